"""Notifications that arrive together: appended to Redis in one round trip, and applied per
alert group in batches, with exactly the outcome of one-by-one handling."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.applications import Starlette

from bot.config import Settings
from bot.domain.alerting.alerts import Notification, parse_notification
from bot.domain.alerting.delivery import Delivery, delivery_of
from bot.storage.streams import NOTIFICATION_KEPT_BYTES, NotificationStream
from bot.telemetry import Telemetry
from handlers import webhooks
from sandbox.redis_server import free_port
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack

FIRING, RESOLVED = "grafana/queue-alert-firing.json", "grafana/queue-alert-resolved.json"


def body(name: str, *, starts_at: str | None = None, group: str | None = None) -> bytes:
    """A Grafana notification as the webhook accepts it."""
    payload = fixture_json(name)
    if starts_at is not None:
        for alert in payload["alerts"]:
            alert["startsAt"] = starts_at
    if group is not None:
        payload["groupKey"] = group
    return json.dumps(payload).encode()


def notification(raw: bytes) -> Notification:
    return parse_notification("grafana", json.loads(raw))


def delivery(raw: bytes) -> Delivery:
    return delivery_of(notification(raw))


async def test_appends_arriving_together_each_get_their_own_entry_in_order(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    stream = NotificationStream(redis, "batch")
    sent = [body(FIRING, group=f"group-{n}") for n in range(40)]
    try:
        ids = await asyncio.gather(
            *(stream.append(notification(raw), raw, float(n)) for n, raw in enumerate(sent))
        )

        assert len(set(ids)) == 40
        entries = await redis.xrange(stream.key)
        assert [entry_id for entry_id, _ in entries] == ids  # in the order they were accepted
        await stream.ensure_group()
        read = await stream.read("c1", count=40, block_ms=100)
        assert [e.id for e in read] == ids
        assert [e.delivery for e in read] == [delivery(raw) for raw in sent]
    finally:
        await redis.aclose()


async def test_a_body_repeated_in_one_read_is_worked_out_once(redis_url: str) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    stream = NotificationStream(redis, "batch")
    await stream.ensure_group()
    repeated, other = body(FIRING), body(FIRING, group="another")
    try:
        for raw in (repeated, other, repeated, repeated):
            await stream.append(notification(raw), raw, 0.0)
        first, second, third, fourth = await stream.read("c1", count=10, block_ms=100)
        assert first.delivery == delivery(repeated) and second.delivery == delivery(other)
        assert third.delivery is first.delivery and fourth.delivery is first.delivery
    finally:
        await redis.aclose()


async def test_appends_arriving_together_all_fail_when_redis_is_down() -> None:
    # Nothing is acknowledged unless Redis has it: every waiting webhook gets the error (a 503).
    redis = Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    stream = NotificationStream(redis, "batch")
    try:
        results = await asyncio.gather(
            *(stream.append(notification(body(FIRING)), body(FIRING), 0.0) for _ in range(5)),
            return_exceptions=True,
        )
        assert all(isinstance(r, RedisError) for r in results), results
    finally:
        await redis.aclose()


async def test_a_backlog_of_one_group_applies_in_order_as_if_one_by_one(
    redis_url: str, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Repeats, a resolve, a lagging repeat of the old firing, and a real re-fire, all waiting
    in the stream when the consumer starts (a restart, a burst): one batch read."""
    old, new = "2025-12-01T02:23:00Z", "2025-12-01T04:00:00Z"
    backlog = (
        [body(FIRING, starts_at=old)] * 20
        + [body(RESOLVED, starts_at=old)]
        + [body(FIRING, starts_at=old)] * 5  # stale: that firing is over
        + [body(FIRING, starts_at=new)] * 10  # fired again
    )
    redis = Redis.from_url(redis_url, decode_responses=True)
    stream = NotificationStream(redis, "qp")
    await stream.ensure_group()
    for n, item in enumerate(backlog):
        await stream.append(notification(item), item, float(n))
    try:
        async with run_bot(settings_for()) as running:
            await eventually(lambda: _applied(running) >= len(backlog), what="all applied")
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
            thread = await eventually(
                lambda: _replies(slack, roots[0].ts, 2), what="summary and reopen replies"
            )

            assert len(roots) == 1, "one incident thread for the group"
            assert "resolved" in _text(thread[0]).lower()
            assert "fired again" in _text(thread[1]).lower()
            assert await running.bot.store.open_ids() == ["1"]
            incident = await running.bot.store.get("1")
            assert incident is not None and incident.reopened == 1
            # Every notification that was not stale counted once: 20 + the resolve + 10.
            assert incident.notified.count == 31
            assert _applied(running, "opened") == 1
            assert _applied(running, "resolved") == 1
            assert _applied(running, "reopened") == 1
            assert _applied(running, "stale") >= 5
            assert await stream.backlog() == 0
    finally:
        await redis.aclose()


@pytest.mark.parametrize("groups", [3])
async def test_a_backlog_of_several_groups_opens_one_incident_each(
    redis_url: str, settings_for: Callable[..., Settings], slack: Slack, groups: int
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    stream = NotificationStream(redis, "qp")
    await stream.ensure_group()
    interleaved = [body(FIRING, group=f"g{n % groups}") for n in range(30)]
    for n, item in enumerate(interleaved):
        await stream.append(notification(item), item, float(n))
    try:
        async with run_bot(settings_for()) as running:
            await eventually(lambda: _applied(running) >= 30, what="all applied")
            roots = await eventually(
                lambda: len(slack.emulator.channel_messages(CHANNEL)) >= groups, what="roots"
            )
            assert roots
            assert len(slack.emulator.channel_messages(CHANNEL)) == groups
            assert _applied(running, "opened") == groups
            assert len(await running.bot.store.open_ids()) == groups
    finally:
        await redis.aclose()


def _applied(running: Any, change: str | None = None) -> float:
    registry = running.bot.telemetry.registry
    changes = (
        [change]
        if change
        else ["opened", "updated", "alerts_changed", "resolved", "reopened", "stale"]
    )
    return sum(
        registry.get_sample_value("queuepilot_notifications_applied_total", {"change": c}) or 0.0
        for c in changes
    )


def _replies(slack: Slack, ts: str, count: int) -> list[Any] | None:
    replies = slack.emulator.thread(CHANNEL, ts)[1:]
    return replies if len(replies) >= count else None


def _text(message: Any) -> str:
    return message.text + json.dumps(message.blocks)


async def test_a_large_body_waits_in_the_stream_as_its_capped_facts(redis_url: str) -> None:
    # Facts are capped, bodies are not: a backlog of big bodies would cost Redis what a backlog
    # of facts does not. Small bodies wait as they came; both read back as their delivery.
    redis = Redis.from_url(redis_url, decode_responses=True)
    stream = NotificationStream(redis, "big")
    app = Starlette()
    webhooks.register(
        app,
        webhooks.AlertWebhooks(stream, Telemetry(), config=Settings(alert_webhook_token="t")),
    )
    small = body(FIRING)
    payload = fixture_json(FIRING)
    payload["alerts"][0]["annotations"]["description"] = "x" * (NOTIFICATION_KEPT_BYTES * 2)
    big = json.dumps(payload).encode()
    headers = {"Authorization": "Bearer t", "Content-Type": "application/json"}
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://qp") as http:
            for raw in (small, big):
                response = await http.post("/alerts/grafana", content=raw, headers=headers)
                assert response.status_code == 202, response.text

        (_, as_body), (_, as_facts) = await redis.xrange(stream.key)
        assert as_body["body"].encode() == small and "d" not in as_body
        assert "body" not in as_facts and len(as_facts["d"]) < NOTIFICATION_KEPT_BYTES
        await stream.ensure_group()
        read = await stream.read("c1", count=10, block_ms=100)
        assert [e.delivery for e in read] == [delivery(small), delivery(big)]
    finally:
        await redis.aclose()
