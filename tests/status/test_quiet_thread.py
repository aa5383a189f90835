"""A long incident stays readable: a two-hour incident at the default 10-minute cadence, with a
queue that wobbles but does not change, ends with at most 15 thread messages.

The status tick runs for real against Redis, with a clock the test moves and a metrics backend
of the bot's own interface; the thread is what a sender would make of the outbox: a status is a
new message, a quiet status an edit of the previous one, a chart a new message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.domain.alerts import parse_notification
from bot.domain.delivery import delivery_of
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.incidents import GroupState, open_incident
from bot.fleet.readings import FleetReadings
from bot.outbound.queue import SendQueue
from bot.status.tick import StatusConfig, StatusReporter
from bot.storage.incident_store import Commit, IncidentStore
from bot.telemetry import Telemetry
from tests.support.payloads import fixture_json

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WOBBLE = [(40, 31), (41, 32), (40, 33), (42, 31), (41, 34), (39, 32)]


class WobblingQueue:
    """A queue that moves by a job or two, as a real one does between readings."""

    name = "Prometheus"
    live = True

    def __init__(self) -> None:
        self.reads = 0
        self.drained = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        queued, wait = (0, 0) if self.drained else WOBBLE[self.reads % len(WOBBLE)]
        self.reads += 1
        metrics = RunnerTypeMetrics(queued=queued, longest_wait_mins=wait, busy=20, registered=20)
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": metrics})

    async def aclose(self) -> None:
        return None


async def test_a_two_hour_incident_at_the_default_cadence_stays_within_15_messages(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    queue = SendQueue(redis, "qp", retention_s=3600)
    now = [START]
    metrics = WobblingQueue()
    readings = FleetReadings(
        redis, store.keys, metrics, interval_s=60, timeout_s=2, clock=lambda: now[0]
    )
    config = StatusConfig()  # the defaults: every 600 s, a chart every third status
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    incident = open_incident(
        delivery_of(parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=START,
    )
    await store.commit(
        Commit(
            incident,
            group=GroupState(incident_id="1"),
            group_hash=incident.group_hash,
            status_due=START.timestamp() + config.interval_s,
        )
    )
    # The root is posted: replies now have a thread to go to.
    await redis.hset(store.keys.incident("1"), "thread", '{"channel": "C1", "ts": "1.000001"}')

    messages, edits = ["root"], 0

    async def send_what_is_waiting() -> None:
        nonlocal edits
        while (head := await queue.head_reply("1")) is not None:
            if head.kind == "restatus" and head.status_ts:
                edits += 1
                await queue.record_reply("C1", "1", head.item)
                continue
            # Charts as pictures (`CHART_STYLE=image`): each one is a message of its own.
            messages.append(head.kind)
            ts = f"2.{len(messages):06d}"
            status = ts if head.kind in ("status", "restatus") else ""
            await queue.record_reply("C1", "1", head.item, status_ts=status)

    for _ in range(12):  # two hours, one status every ten minutes
        now[0] += timedelta(seconds=config.interval_s)
        await reporter.tick()
        await send_what_is_waiting()

    assert len(messages) <= 15, messages
    assert messages.count("status") == 1 and edits == 11  # one status, edited in place
    assert messages.count("chart") == 4  # every third status

    # Then the queue drains: the next status finds it drained, two more checks a minute apart
    # confirm it, and the summary closes the incident: 12 minutes at most with the defaults.
    metrics.drained = True
    for _ in range(13):
        now[0] += timedelta(seconds=61)
        await reporter.tick()
        await send_what_is_waiting()
    loaded = await store.load("1")
    assert loaded.incident is not None and not loaded.incident.is_open
    assert "summary" in messages and len(messages) <= 15, messages
    await redis.aclose()
