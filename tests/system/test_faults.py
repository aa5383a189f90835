"""Faults against the real servers, each checked the way a channel would see it: nothing that was
accepted is lost, nothing is posted twice, and Slack ends up showing the latest state.

Replicas here are real `python -m bot serve` processes that are killed (SIGKILL), paused
(SIGSTOP) or stopped (SIGTERM); Slack is the emulator, answering slowly, failing, or timing out.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.config import Settings
from bot.storage.keys import Keys
from tests.support.payloads import fixture_json
from tests.support.processes import BotProcess
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
RESOLVED = "grafana/queue-alert-resolved.json"


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="qp-faults-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def group(n: int | str, *, size: float | None = None) -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json(FIRING))
    payload["groupKey"] = f"{payload['groupKey']}/{n}"
    if size is not None:
        payload["alerts"][0]["values"]["max_queue_size"] = size
    return payload


def incidents_shown(slack: Slack) -> list[str]:
    """The incident UID of every root message in the channel, in the order Slack shows them
    (a storm digest, which lists incidents but is none, is left out)."""
    return [
        m.metadata["event_payload"]["uid"]
        for m in slack.emulator.channel_messages(CHANNEL)
        if m.metadata and m.metadata["event_payload"].get("incident")
    ]


def digests_shown(slack: Slack) -> int:
    """Storm digests in the channel, each counted once: a digest's continuations ("Alert storm,
    continued: N more", groups that joined when no edit could add them soon) are its own."""
    return sum(
        1
        for m in slack.emulator.channel_messages(CHANNEL)
        if "Alert storm" in m.text and "continued" not in m.text
    )


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks)


KEYS = Keys("qp")  # the bot's default `redis_prefix`


def sync_redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def queue_empty(store: redis.Redis) -> bool:
    return store.zcard(KEYS.posts(CHANNEL)) == 0 and store.xlen(KEYS.stream) == 0


async def dump_on_failure(processes: list[BotProcess]) -> None:
    for bot in processes:
        print(f"--- {bot.name} ---\n{bot.output()[-6000:]}")


# -- a replica dies, stalls or stops ---------------------------------------------------------------


@pytest.mark.slow
async def test_the_sending_replica_killed_mid_queue_loses_and_duplicates_nothing(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    """30 new groups, Slack answering each post a second late; the replica is SIGKILLed with a
    post in flight. Its successor finds that post by its metadata and posts the rest once."""
    store = sync_redis(redis_url)
    first = BotProcess(slack, redis_url, workdir, "first", SLACK_TIMEOUT_SECONDS="30")
    processes = [first]
    try:
        await first.wait_healthy()
        slack.emulator.stall("chat.postMessage", 1.0)
        for n in range(30):
            assert (await first.send(group(n))).status_code == 202
        await eventually(lambda: len(incidents_shown(slack)) >= 3, what="a few roots", timeout=15)
        first.kill()
        slack.emulator.stall("chat.postMessage", 0)

        second = BotProcess(slack, redis_url, workdir, "second")
        processes.append(second)
        await second.wait_healthy()
        await eventually(lambda: len(incidents_shown(slack)) >= 30, what="30 roots", timeout=30)
        await eventually(lambda: queue_empty(store), what="nothing left to send", timeout=10)

        shown = incidents_shown(slack)
        assert len(shown) == 30 and len(set(shown)) == 30, "each group once, none twice"
        assert digests_shown(slack) <= 1, "a storm digest, if any, once"
        assert store.xlen(KEYS.dead_letters) == 0
    except BaseException:
        await dump_on_failure(processes)
        raise
    finally:
        for bot in processes:
            bot.kill()
        store.close()


@pytest.mark.slow
async def test_a_paused_leader_resumed_after_its_lease_posts_nothing_twice(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    """Two replicas; the leader, which sends, is paused (SIGSTOP) mid-post past its lease; the
    other takes the lead and the channel over. Resumed, the first must not post what its successor
    already has: its writes are refused, and it steps down."""
    store = sync_redis(redis_url)
    replicas = [BotProcess(slack, redis_url, workdir, name) for name in ("one", "two")]
    try:
        for bot in replicas:
            await bot.wait_healthy()
        sender = await eventually(
            lambda: next((b for b in replicas if "senders: sending to" in b.output()), None),
            what="the leader sending",
        )
        other = next(b for b in replicas if b is not sender)
        slack.emulator.stall("chat.postMessage", 1.0)
        for n in range(10):
            assert (await other.send(group(n))).status_code == 202
        await eventually(lambda: len(incidents_shown(slack)) >= 2, what="posting under way")
        sender.signal(signal.SIGSTOP)
        slack.emulator.stall("chat.postMessage", 0)

        await eventually(
            lambda: "senders: sending to" in other.output(), what="take-over", timeout=15
        )
        await eventually(lambda: len(incidents_shown(slack)) >= 10, what="10 roots", timeout=20)
        sender.signal(signal.SIGCONT)
        await eventually(
            lambda: "stepping down" in sender.output() or "no longer leads" in sender.output(),
            what="the resumed replica standing down",
        )
        await eventually(lambda: queue_empty(store), what="nothing left to send")

        shown = incidents_shown(slack)
        assert len(shown) == 10 and len(set(shown)) == 10, "nothing posted twice"
    except BaseException:
        await dump_on_failure(replicas)
        raise
    finally:
        for bot in replicas:
            bot.kill()
        store.close()


@pytest.mark.slow
async def test_sigterm_hands_back_what_it_accepted(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    """A deploy: SIGTERM right after 20 notifications were accepted; the next process shows each
    of them once, without waiting for the reclaim timeout."""
    store = sync_redis(redis_url)
    first = BotProcess(slack, redis_url, workdir, "first", INTAKE_RECLAIM_IDLE_MS="30000")
    processes = [first]
    try:
        await first.wait_healthy()
        slack.emulator.stall("chat.postMessage", 0.5)
        responses = await asyncio.gather(*(first.send(group(n)) for n in range(20)))
        assert [r.status_code for r in responses] == [202] * 20
        first.signal(signal.SIGTERM)
        # uvicorn re-raises SIGTERM once it has shut down, so the status is 0 or -SIGTERM.
        assert await asyncio.to_thread(first.process.wait, 20) in (0, -signal.SIGTERM)
        assert "queuepilot stopped cleanly" in first.output()
        slack.emulator.stall("chat.postMessage", 0)

        second = BotProcess(slack, redis_url, workdir, "second", INTAKE_RECLAIM_IDLE_MS="30000")
        processes.append(second)
        await second.wait_healthy()
        await eventually(lambda: len(incidents_shown(slack)) >= 20, what="20 roots", timeout=25)
        await eventually(lambda: queue_empty(store), what="nothing left to send")
        shown = incidents_shown(slack)
        assert len(shown) == 20 and len(set(shown)) == 20
    except BaseException:
        await dump_on_failure(processes)
        raise
    finally:
        for bot in processes:
            bot.kill()
        store.close()


# -- Slack is out -------------------------------------------------------------------------------


async def test_a_slack_outage_longer_than_reclaim_times_attempts_drops_nothing(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Slack answers 503, then times out (it posts, the answer is lost), for far longer than
    INTAKE_RECLAIM_IDLE_MS × INTAKE_MAX_ATTEMPTS; when it is back, every group has one thread
    and the root re-notified during the outage shows its latest numbers."""
    settings = settings_for(
        intake_reclaim_idle_ms=500, intake_max_attempts=2, slack_timeout_seconds=0.5
    )
    async with run_bot(settings) as running:
        await running.send("grafana", group("a", size=11))
        await eventually(lambda: len(incidents_shown(slack)) == 1, what="the first thread")

        for method in ("chat.postMessage", "chat.update"):
            slack.emulator.fail_next(method, status=503, count=100_000)
        for n in range(5):
            assert (await running.send("grafana", group(n))).status_code == 202
        assert (await running.send("grafana", group("a", size=44))).status_code == 202

        def outage_s() -> float:
            failed = [c.at for c in slack.emulator.calls() if c.status == 503]
            return failed[-1] - failed[0] if len(failed) >= 3 else 0.0

        # Failed calls for longer than reclaim idle × attempts (1 s), whichever loops make them:
        # on a loaded machine the first thread's answer can itself time out, and then only the
        # posts fail (with the sender's backoff), not the root's edits.
        await eventually(
            lambda: outage_s() >= 1.5, what="failed calls for seconds of outage", timeout=20
        )
        slack.emulator.clear_faults()
        slack.emulator.stall("chat.postMessage", 2)  # Slack acts, the answers time out
        await eventually(
            lambda: count(running, "queuepilot_slack_lookups_total", outcome="found") >= 1,
            what="a timed-out post found by its metadata",
            timeout=20,
        )
        slack.emulator.stall("chat.postMessage", 0)

        await eventually(lambda: len(incidents_shown(slack)) >= 6, what="six threads", timeout=20)
        first = slack.emulator.channel_messages(CHANNEL)[0]
        await eventually(
            lambda: "44" in text_of(slack.emulator.thread(CHANNEL, first.ts)[0]),
            what="the latest numbers on the root",
            timeout=15,
        )
        dead_letters = await running.bot.redis.xlen(running.bot.stream.dead_key)
        assert dead_letters == 0, "nothing dead-lettered"
        assert await running.bot.stream.backlog() == 0
    shown = incidents_shown(slack)
    assert len(shown) == 6 and len(set(shown)) == 6


def count(running: RunningBot, name: str, **labels: str) -> float:
    return running.bot.telemetry.registry.get_sample_value(name, labels) or 0.0


# -- deliveries out of order ----------------------------------------------------------------------


async def test_a_stale_firing_after_the_resolve_does_not_reopen(
    running_bot: RunningBot, slack: Slack
) -> None:
    """A lagging Alertmanager HA peer or a Grafana retry delivers the firing again after the
    resolve: same alert, same startsAt. The incident stays resolved and nothing is posted."""
    await running_bot.send("grafana", fixture_json(FIRING))
    [root] = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    await running_bot.send("grafana", fixture_json(RESOLVED))
    await eventually(lambda: len(slack.emulator.thread(CHANNEL, root.ts)) == 2, what="summary")
    stale_before = count(running_bot, "queuepilot_notifications_applied_total", change="stale")

    await running_bot.send("grafana", fixture_json(FIRING))
    await eventually(
        lambda: (
            count(running_bot, "queuepilot_notifications_applied_total", change="stale")
            > stale_before
        ),
        what="the firing judged stale",
    )

    assert await running_bot.bot.store.open_ids() == []
    [root] = slack.emulator.channel_messages(CHANNEL)
    assert "resolved" in text_of(root).lower()
    assert len(slack.emulator.thread(CHANNEL, root.ts)) == 2, "no reopen reply, no second summary"


async def test_a_resolved_entry_handled_before_its_older_firing_opens_nothing(
    running_bot: RunningBot, slack: Slack
) -> None:
    """Two entries of a new group, handled in the wrong order (a delayed or reclaimed entry):
    the resolved one first, then the firing one accepted before it."""
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of

    firing = delivery_of(parse_notification("grafana", fixture_json(FIRING)))
    resolved = delivery_of(parse_notification("grafana", fixture_json(RESOLVED)))
    intake = running_bot.bot.intake

    assert (await intake.apply("2000000000000-0", resolved)).value == "stale"
    assert (await intake.apply("1000000000000-0", firing)).value == "stale"

    assert await running_bot.bot.store.open_ids() == []
    assert await running_bot.bot.queue.waiting(CHANNEL) == 0
    assert slack.emulator.channel_messages(CHANNEL) == []


async def test_state_left_by_0_1_0_neither_wedges_its_groups_nor_loses_its_stream(
    redis_url: str, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """An upgrade: 0.1.0 left its incident and group as plain strings, and an accepted
    notification (raw body) in the stream. The new version applies the entry and opens the
    group again, without tripping over the old keys."""
    from bot.domain.alerting.delivery import group_hash

    store = sync_redis(redis_url)
    payload = fixture_json(FIRING)
    old_group = group_hash("grafana", payload["groupKey"])
    # 0.1.0's unversioned layout, which `Keys` (the v2 layout) has no name for; its stream kept
    # its name.
    store.set(f"qp:group:{old_group}", "1")
    store.set("qp:incident:1", json.dumps({"id": "1", "group_key": payload["groupKey"]}))
    store.xgroup_create(KEYS.stream, "intake", id="0", mkstream=True)
    store.xadd(KEYS.stream, {"source": "grafana", "body": json.dumps(payload), "received_at": "0"})
    try:
        async with run_bot(settings_for()) as running:
            await eventually(lambda: len(incidents_shown(slack)) == 1, what="the old entry shown")
            await eventually(lambda: queue_empty(store), what="applied")
            assert [i.group_key for i in await running.bot.core.open_incidents()] == [
                payload["groupKey"]
            ]
    finally:
        store.close()
