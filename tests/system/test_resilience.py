"""Nothing acknowledged is lost: Redis outages, a killed consumer, Slack rate limits and refusals.

What a sender and a channel would notice: a 503 (never a 500) while the bot cannot persist, a
recovery without a restart, every accepted notification in Slack exactly once, Retry-After
honoured, and a permanent Slack error that neither wedges intake nor gets retried forever.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bot.config import Settings
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.servers import RedisServer
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"
REPO = Path(__file__).resolve().parents[2]
GROUP = "intake"


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition, 0 when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


async def metrics_of(running: RunningBot) -> str:
    response = await running.http.get("/metrics")
    assert response.status_code == 200
    return response.text


def other_group(payload: dict[str, Any], suffix: str) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    changed["groupKey"] = f"{payload['groupKey']}/{suffix}"
    return changed


# --- 1. Redis down: 503, then recovery without a restart ---------------------------------------


async def test_redis_outage_answers_503_and_recovers_without_restart(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    firing = fixture_json(FIRING)
    # The default reclaim (30 s): recovery must not wait for another replica to take over.
    settings = settings_for(redis_url=own_redis.url, intake_reclaim_idle_ms=30_000)
    async with run_bot(settings) as running:
        first = await running.send("grafana", firing)
        assert first.status_code == 202, first.text
        await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="first thread")

        own_redis.stop()
        # Grafana retries a failed delivery: each attempt must be told to retry (503), not 500.
        for attempt in range(3):
            response = await running.send("grafana", other_group(firing, f"outage-{attempt}"))
            assert response.status_code == 503, response.text
            assert response.json() == {
                "status": "rejected",
                "error": "cannot persist the notification now; retry",
            }
        am = await running.send("alertmanager", fixture_json(AM_FIRING))
        assert am.status_code == 503, am.text
        ready = await running.http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "not ready"}, "the cause is for logs, not callers"
        assert (await running.http.get("/healthz")).status_code == 200
        text = await metrics_of(running)
        assert (
            metric(text, "queuepilot_notifications_total", source="grafana", outcome="unavailable")
            == 3
        )

        own_redis.start()  # same port, empty: no persistence

        async def ready_again() -> bool:
            return (await running.http.get("/readyz")).status_code == 200

        await eventually(ready_again, timeout=10, what="/readyz back to 200")
        response = await running.send("grafana", other_group(firing, "after-outage"))
        assert response.status_code == 202, response.text

        # Well inside the 30 s reclaim: the consumer itself retried (make bench times it).
        await eventually(
            lambda: len(slack.emulator.channel_messages(CHANNEL)) == 2,
            timeout=15,
            what="a thread for the notification accepted after the outage",
        )
        roots = slack.emulator.channel_messages(CHANNEL)
        assert len(roots) == 2, "the 503-answered notifications must not have been posted"

        async def drained() -> bool:
            return await running.bot.stream.backlog() == 0

        await eventually(drained, what="stream drained")


# --- 3. Slack 429: waited out, not hammered ----------------------------------------------------


async def test_slack_429_is_waited_out(running_bot: RunningBot, slack: Slack) -> None:
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=1)
    response = await running_bot.send("grafana", fixture_json(FIRING))
    assert response.status_code == 202, response.text

    await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root message")
    calls = slack.emulator.calls("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    assert calls[1].at - calls[0].at >= 0.95, "the retry must wait for Retry-After: 1"
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1

    text = await metrics_of(running_bot)
    assert metric(text, "queuepilot_slack_rate_limited_total", method="chat.postMessage") >= 1


# --- 4. Permanent Slack errors don't wedge intake ----------------------------------------------


async def test_permanent_slack_error_does_not_wedge_intake(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    firing = fixture_json(FIRING)
    async with run_bot(settings_for(slack_channel="C0MISSING")) as running:

        async def drained() -> bool:
            return await running.bot.stream.backlog() == 0

        for attempt in range(2):
            response = await running.send("grafana", other_group(firing, f"g{attempt}"))
            assert response.status_code == 202, response.text
            await eventually(drained, what=f"notification {attempt} acknowledged")

        # The sender posts in its own time, after the intake committed: wait for both tries.
        await eventually(
            lambda: len(slack.emulator.calls("chat.postMessage")) >= 2, what="both roots tried"
        )
        calls = slack.emulator.calls("chat.postMessage")
        assert [c.error for c in calls] == ["channel_not_found"] * 2, "one try per notification"
        assert await running.bot.redis.xlen(running.bot.stream.dead_key) == 0

        # Nothing is left to retry: both entries are acknowledged (so no reclaim can redeliver
        # them) and the channel's queue holds neither root. A third group, posted after them,
        # shows the sender went on past the refusals instead of retrying them.
        keys = running.bot.queue.keys

        async def nothing_waits() -> bool:
            redis = running.bot.redis
            return not await redis.zcard(keys.posts("C0MISSING")) and not await redis.hlen(
                keys.in_flight("C0MISSING")
            )

        await eventually(nothing_waits, what="the refused roots dropped from the queue")
        response = await running.send("grafana", other_group(firing, "after"))
        assert response.status_code == 202, response.text
        await eventually(
            lambda: len(slack.emulator.calls("chat.postMessage")) >= 3, what="the third root tried"
        )
        calls = slack.emulator.calls("chat.postMessage")
        assert len(calls) == 3, "refusals must not be retried"
        incidents = [c.params["metadata"]["event_payload"] for c in calls]
        assert len({i["uid"] for i in incidents}) == 3, "one try for each group, none again"

        assert (await running.http.get("/healthz")).status_code == 200
        assert (await running.http.get("/readyz")).status_code == 200
        text = await metrics_of(running)
        assert (
            metric(
                text,
                "queuepilot_slack_calls_total",
                method="chat.postMessage",
                outcome="channel_not_found",
            )
            == 3
        )


# --- 5. One notification the consumer cannot process does not stop intake ---------------------


async def test_unprocessable_notification_does_not_stop_intake(
    running_bot: RunningBot, slack: Slack
) -> None:
    """A lone UTF-16 surrogate (`\\ud800`) is valid JSON syntax; whether the bot refuses it (400)
    or accepts and sets it aside, the notifications after it must still reach Slack."""
    firing = fixture_json(FIRING)
    poison = other_group(firing, "\ud800")
    response = await running_bot.send("grafana", json.dumps(poison).encode())
    assert response.status_code in (202, 400), response.text

    response = await running_bot.send("grafana", other_group(firing, "next"))
    assert response.status_code == 202, response.text
    await eventually(
        lambda: slack.emulator.channel_messages(CHANNEL),
        timeout=5,
        what="a thread for the notification after the unprocessable one",
    )

    async def drained() -> bool:
        return await running_bot.bot.stream.backlog() == 0

    await eventually(drained, what="stream drained (the bad entry set aside, not retried forever)")
