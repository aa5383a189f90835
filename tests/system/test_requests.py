"""Slack requests acknowledged by one replica and performed from the requests stream, as a
responder sees it: the click is done and answered whichever replica Slack reached, once, even
when the replica performing it dies mid-way, and a click that cannot be kept is answered.

Replicas are bots on one redis-server and one Slack (the emulator): in this process where a
replica only has to stop performing requests (as one that is not the leader), real processes
where one is killed.
"""

from __future__ import annotations

import copy
import json
import logging
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot.actions.flow import BUSY, NO_REDIS
from bot.config import Settings
from bot.storage.keys import Keys
from bot.storage.streams import REQUESTS_GROUP as GROUP
from handlers.lazy import NOT_TAKEN
from sandbox.serve import serve_in_thread
from sandbox.silence_api import FakeSilenceApi
from tests.support.busy_pool import every_connection_held
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.payloads import fixture_json
from tests.support.processes import BotProcess
from tests.support.running import RunningBot, Tracebacks, eventually, open_incident, run_bot
from tests.support.scale import RUNNER, webhook_settings
from tests.support.servers import RedisServer
from tests.support.slack import (
    CHANNEL,
    USER,
    Slack,
    block_action,
    button_value,
    click,
    ephemeral_texts,
    post_event,
    slash,
)

FIRING = "grafana/queue-alert-firing.json"
KEYS = Keys("qp")  # the bot's default `redis_prefix`


def acknowledgements(slack: Slack, root: Any) -> list[Any]:
    """The thread's replies saying someone acknowledged the incident."""
    return [
        m
        for m in slack.emulator.thread(CHANNEL, root.ts)[1:]
        if "Acknowledged" in m.text + json.dumps(m.blocks)
    ]


async def requests_backlog(running: RunningBot) -> float:
    text = (await running.http.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "queuepilot_requests_backlog":
                return sample.value
    raise AssertionError("/metrics has no queuepilot_requests_backlog")


def with_response_url(body: str, slack: Slack) -> str:
    """The click as Slack sends it, with a `response_url` the emulator answers to the person."""
    with slack.emulator.workspace() as ws:
        token = ws.ui.new_response_url(CHANNEL, USER, None)
    payload = json.loads(urllib.parse.parse_qs(body)["payload"][0])
    payload["response_url"] = f"{slack.server.url}/_emulator/respond/{token}"
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def ack_click(root: Any) -> str:
    action = {"type": "button", "action_id": "incident_ack"}
    action["value"] = button_value(root, "incident_ack")
    return block_action(action, message_ts=root.ts)


# -- one replica acks, another performs ------------------------------------------------------------


async def test_a_click_taken_by_a_follower_is_done_by_the_leader(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Replica B, which does not lead, answers Slack and performs nothing itself: the click
    waits in the requests stream for A, the leader, which does it and answers the person."""
    async with run_bot(settings_for()) as a:
        root = await open_incident(a, slack)
        async with run_bot(settings_for()) as b:
            assert not (await b.http.get("/readyz")).json()["leads"]
            assert (await click(b, root, "incident_ack")).status_code == 200
            await eventually(
                lambda: ephemeral_texts(slack) == ["You acknowledged incident 1."],
                what="the leader's answer to the person",
            )
            await eventually(lambda: acknowledgements(slack, root), what="the thread's reply")

            async def done() -> bool:
                return await requests_backlog(a) == 0 and await requests_backlog(b) == 0

            await eventually(done, what="the request left the stream")
    assert f"<@{USER}>" in json.dumps(slack.emulator.channel_messages(CHANNEL)[0].blocks)


async def test_a_click_under_way_when_the_lead_is_lost_is_done_once_by_the_next_term(
    settings_for: Callable[..., Settings], slack: Slack, redis_url: str
) -> None:
    """The leader loses its lease while it performs a click (it looks up who clicked; a stall
    past the lease, say): its commit is refused, and the click is neither lost nor answered
    "try again": the next term (here the same replica, leading again) does it, once."""
    async with run_bot(settings_for()) as running:
        root = await open_incident(running, slack)
        slack.emulator.stall("users.info", 60)
        assert (await click(running, root, "incident_ack")).status_code == 200
        await eventually(lambda: slack.emulator.calls("users.info"), what="the click under way")
        store = redis.Redis.from_url(redis_url, decode_responses=True)
        try:
            store.delete(KEYS.leader)  # the lease ran out meanwhile
        finally:
            store.close()
        slack.emulator.stall("users.info", 0)
        await eventually(lambda: acknowledgements(slack, root), what="the thread's reply")
        await eventually(lambda: ephemeral_texts(slack), what="the answer to the person")

        async def done() -> bool:
            return await requests_backlog(running) == 0

        await eventually(done, what="the request done")
    assert ephemeral_texts(slack) == ["You acknowledged incident 1."]
    assert len(acknowledgements(slack, root)) == 1


async def test_the_same_click_delivered_to_two_replicas_acts_once(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for()) as a, run_bot(settings_for()) as b:
        root = await open_incident(a, slack)
        body = ack_click(root)
        assert (await post_event(a.http, body)).status_code == 200
        await eventually(lambda: ephemeral_texts(slack), what="the first answer")
        assert (await post_event(b.http, body)).status_code == 200
        await eventually(lambda: len(ephemeral_texts(slack)) == 2, what="the second answer")
        await eventually(lambda: acknowledgements(slack, root), what="the thread's reply")

    assert ephemeral_texts(slack) == ["You acknowledged incident 1."] * 2, "the same answer"
    assert len(acknowledgements(slack, root)) == 1


async def test_a_slow_backend_for_one_incident_holds_up_no_click_on_another(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Incident 1's silence waits on a Grafana that does not answer; incident 2's
    acknowledgement is done and answered meanwhile."""
    api = FakeSilenceApi()
    with serve_in_thread(api.app) as grafana:
        settings = settings_for(
            silence_backend="grafana", grafana_url=grafana.url, grafana_token=api.token
        )
        release = api.hang()
        try:
            async with run_bot(settings) as running:
                for n in (1, 2):
                    payload = copy.deepcopy(fixture_json(FIRING))
                    payload["groupKey"] = f"{payload['groupKey']}/{n}"
                    assert (await running.send("grafana", payload)).status_code == 202
                    await eventually(
                        lambda n=n: len(slack.emulator.channel_messages(CHANNEL)) == n,
                        what=f"incident {n}'s root",
                    )
                first, second = slack.emulator.channel_messages(CHANNEL)
                option = {"text": {"type": "plain_text", "text": "1h"}, "value": "3600"}
                silence = {
                    "type": "static_select",
                    "action_id": "incident_silence",
                    "selected_option": option,
                }
                await post_event(running.http, block_action(silence, message_ts=first.ts))
                await eventually(lambda: api.requests, what="the silence under way")
                await click(running, second, "incident_ack")
                await eventually(
                    lambda: "You acknowledged incident 2." in ephemeral_texts(slack),
                    what="incident 2 acknowledged while incident 1's silence waits",
                )
                assert not any("silenced" in t for t in ephemeral_texts(slack))
                release.set()
                await eventually(
                    lambda: any("You silenced incident 1" in t for t in ephemeral_texts(slack)),
                    what="the silence done once Grafana answers",
                )
        finally:
            release.set()


# -- Redis down at click time ----------------------------------------------------------------------


async def test_a_click_while_redis_is_down_is_acked_and_the_person_told(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    tracebacks = Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    try:
        async with run_bot(settings_for(redis_url=own_redis.url)) as running:
            root = await open_incident(running, slack)
            own_redis.stop()
            response = await post_event(running.http, with_response_url(ack_click(root), slack))
            assert response.status_code == 200, "Slack has its ack"
            await eventually(
                lambda: ephemeral_texts(slack) == [NO_REDIS], what="the person told", timeout=15
            )
    finally:
        logging.getLogger().removeHandler(tracebacks)
    ours = ("handlers", "slack_bolt", "bot.intake")
    assert [r for r in tracebacks.records if r.startswith(ours)] == []
    assert acknowledgements(slack, root) == []


async def test_a_click_that_finds_every_redis_connection_busy_is_told_busy_not_down(
    own_redis: RedisServer,
    settings_for: Callable[..., Settings],
    slack: Slack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crowd holding every connection is not an outage: the person is told the bot is busy,
    which an operator reads differently from "cannot reach its database"."""
    async with run_bot(settings_for(redis_url=own_redis.url)) as running:
        root = await open_incident(running, slack)
        async with every_connection_held(running.bot.redis, own_redis.url, monkeypatch):
            response = await post_event(running.http, with_response_url(ack_click(root), slack))
            assert response.status_code == 200, "Slack has its ack"
            await eventually(
                lambda: ephemeral_texts(slack) == [BUSY], what="the person told", timeout=15
            )
    assert NO_REDIS not in ephemeral_texts(slack)
    assert acknowledgements(slack, root) == [], "not done, and the person knows it"


async def test_a_scale_up_made_while_every_redis_connection_is_busy_says_it_was_made(
    own_redis: RedisServer,
    settings_for: Any,
    slack: Slack,
    receiver: ScaleReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scaler added the runners, then the incident could not be written: the person is told
    it was scaled, not to try again (which would add them twice)."""
    settings = webhook_settings(settings_for, receiver, redis_url=own_redis.url)
    async with run_bot(settings) as running:
        await open_incident(running, slack)
        let_go = receiver.hang()
        command = with_command_response_url(slash(f"scale {RUNNER} +3"), slack)
        await post_event(running.http, command)
        await eventually(lambda: receiver.raw, what="the scaler asked")
        async with every_connection_held(running.bot.redis, own_redis.url, monkeypatch):
            let_go.set()
            said = await eventually(
                lambda: next((t for t in ephemeral_texts(slack) if "scaled" in t), None),
                what="the answer",
                timeout=20,
            )
    assert said.startswith(f"You scaled `{RUNNER}` by +3"), said
    assert "It is not in the incident's thread: queuepilot was too busy to write it down" in said
    assert "try again" not in said
    assert len(receiver.accepted) == 1


async def test_a_scale_up_click_while_redis_is_down_is_told_so(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Scale up… opens its form where Slack arrived: with Redis away it cannot, and says so."""
    settings = settings_for(
        redis_url=own_redis.url,
        scaler_backend="webhook",
        scaler_webhook_url="http://127.0.0.1:9/scale",  # never called: Redis is asked first
        scaler_webhook_secret="s3cret",
        scaler_targets=json.dumps({"linux.2xlarge": {"target": "pool", "cap": 10}}),
        scale_allowed_users=USER,
    )
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        own_redis.stop()
        action = {"type": "button", "action_id": "incident_scale"}
        action["value"] = button_value(root, "incident_scale")
        body = with_response_url(block_action(action, message_ts=root.ts), slack)
        assert (await post_event(running.http, body)).status_code == 200
        await eventually(
            lambda: ephemeral_texts(slack) == [NO_REDIS], what="the person told", timeout=15
        )
        await eventually(lambda: not running.bot.lazy.pending, what="the lazy work over")
    assert ephemeral_texts(slack) == [NO_REDIS], "told once"


async def test_queue_help_while_redis_is_down_is_answered_with_the_help_alone(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """`/queue help` and a typo need no leader: answered where Slack arrived, without Redis,
    and nobody is told Redis is away."""
    async with run_bot(settings_for(redis_url=own_redis.url)) as running:
        await open_incident(running, slack)
        own_redis.stop()
        for text in ("help", "scale"):
            command = with_command_response_url(slash(text), slack)
            assert (await post_event(running.http, command)).status_code == 200
        [help_, usage] = await eventually(
            lambda: len(ephemeral_texts(slack)) == 2 and ephemeral_texts(slack),
            what="the help and the usage",
            timeout=15,
        )
        await eventually(lambda: not running.bot.lazy.pending, what="the lazy work over")
    assert "/queue scale" in help_ and usage.startswith("usage: `/queue scale")
    assert NO_REDIS not in ephemeral_texts(slack)


async def test_a_click_that_cannot_be_appended_for_an_unforeseen_reason_is_told_and_logged(
    settings_for: Callable[..., Settings], slack: Slack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append fails in a way nobody foresaw (the Redis client closed under it, say): the
    person is told it was not taken, and the log has the traceback once."""
    tracebacks = Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    try:
        async with run_bot(settings_for()) as running:
            root = await open_incident(running, slack)

            async def closed(work: str, body: dict[str, Any]) -> str:
                raise RuntimeError("the Redis client is closed")

            monkeypatch.setattr(running.bot.request_stream, "append", closed)
            assert (await click(running, root, "incident_ack")).status_code == 200
            await eventually(
                lambda: ephemeral_texts(slack) == [NOT_TAKEN.message], what="the person told"
            )
    finally:
        logging.getLogger().removeHandler(tracebacks)
    assert [r for r in tracebacks.records if r.startswith("handlers.lazy")] == [
        "handlers.lazy: slack: a request (incident-button) was not taken"
    ]
    assert acknowledgements(slack, root) == []


async def test_a_request_waiting_under_its_key_is_performed(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """The requests stream stores the work's key, which never changes: a click appended under
    `incident-button` (by a replica of another build, say) is done, not dead-lettered."""
    async with run_bot(settings_for()) as running:
        root = await open_incident(running, slack)
        body = json.loads(urllib.parse.parse_qs(ack_click(root))["payload"][0])
        await running.bot.request_stream.append("incident-button", body)
        await eventually(
            lambda: ephemeral_texts(slack) == ["You acknowledged incident 1."],
            what="the click done",
        )
        assert await running.bot.redis.xlen(KEYS.request_dead_letters) == 0


def with_command_response_url(body: str, slack: Slack) -> str:
    """A slash command as Slack sends it, with a `response_url` the emulator answers to."""
    with slack.emulator.workspace() as ws:
        token = ws.ui.new_response_url(CHANNEL, USER, None)
    fields = dict(urllib.parse.parse_qsl(body))
    fields["response_url"] = f"{slack.server.url}/_emulator/respond/{token}"
    return urllib.parse.urlencode(fields)


# -- the replica performing a click dies mid-way ---------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.slow
async def test_a_click_whose_replica_died_mid_way_is_done_once_by_another(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    """The replica performing an acknowledgement is killed while it looks up who clicked (after
    it claimed the click); the other takes the request over and does it, once."""
    store = redis.Redis.from_url(redis_url, decode_responses=True)
    replicas = [BotProcess(slack, redis_url, workdir, name) for name in ("one", "two")]
    try:
        for replica in replicas:
            await replica.wait_healthy()
        assert (await replicas[0].send(fixture_json(FIRING))).status_code == 202
        [root] = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
        slack.emulator.stall("users.info", 60)
        async with httpx.AsyncClient(base_url=replicas[0].url, timeout=10) as http:
            assert (await post_event(http, ack_click(root))).status_code == 200
        await eventually(lambda: slack.emulator.calls("users.info"), what="the click under way")

        [pending] = store.xpending_range(KEYS.requests, GROUP, "-", "+", 10)
        [performing] = [r for r in replicas if pending["consumer"].startswith(r.consumer_prefix)]
        performing.kill()
        slack.emulator.stall("users.info", 0)

        await eventually(
            lambda: ephemeral_texts(slack), what="the other replica's answer", timeout=20
        )
        await eventually(lambda: acknowledgements(slack, root), what="the reply", timeout=20)
        await eventually(lambda: store.xlen(KEYS.requests) == 0, what="the request done")
        assert ephemeral_texts(slack) == ["You acknowledged incident 1."]
        assert len(acknowledgements(slack, root)) == 1
        assert store.xlen(KEYS.request_dead_letters) == 0
    except BaseException:
        for replica in replicas:
            print(f"--- {replica.name} ---\n{replica.output()[-6000:]}")
        raise
    finally:
        for replica in replicas:
            replica.kill()
        store.close()


async def test_a_click_acked_just_before_its_replica_stops_is_handed_off_once(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """B acks a click and stops at once, its hand-off to the leader still under way (a Redis
    replica confirms an append within 1 s, which REDIS_WAIT_REPLICAS waits for): B's stop waits
    for the hand-off before it closes Redis, so the click is appended once and A does it once."""
    async with run_bot(settings_for()) as a:
        root = await open_incident(a, slack)
        async with run_bot(settings_for(redis_wait_replicas=1)) as b:
            assert (await click(b, root, "incident_ack")).status_code == 200
        await eventually(lambda: not b.bot.lazy.pending, what="B's hand-off over")

        async def done() -> bool:
            return await requests_backlog(a) == 0 and bool(ephemeral_texts(slack))

        await eventually(done, what="the click done")
        appended = (await a.bot.redis.xinfo_stream(a.bot.request_stream.key))["entries-added"]
        assert appended == 1, "the hand-off done again over a new connection"
        assert ephemeral_texts(slack) == ["You acknowledged incident 1."]
