"""The status tick with live metrics: CPU per interval's statuses and backend reads, at 10, 100
and 1,000 open incidents, on a real redis-server.

Every incident is due at once (the worst case: a tick after an outage), and each has been open
for hours already: its trend holds the full 48 statuses (`--history`), the size it keeps for the
rest of its life. The backend is the bot's own metrics interface answering at once with 40
runner types, so the numbers are queuepilot's cost, not a backend's latency. What users need:
one backend read per tick whatever the number of incidents, a scheduler tick (at most 100 due
incidents) that never holds the event loop long, and an interval's statuses that stay cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incident_fleet import MAX_VIEW_TYPES, as_snapshot
from bot.domain.incident.incidents import (
    TREND_POINTS,
    GroupState,
    Incident,
    open_incident,
    record_status,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, worst_first
from bot.fleet.readings import FleetReadings
from bot.status.tick import StatusReporter
from bot.storage.incident_store import Commit, IncidentStore
from bot.telemetry import Telemetry
from sandbox.redis_server import RedisServer
from tests.support.payloads import fixture_json

TYPES = 40


class InstantFleet:
    name, live = "Prometheus", True

    def __init__(self) -> None:
        self.reads = 0

    async def read(self, *, now: datetime) -> FleetSnapshot:
        self.reads += 1
        types = {
            f"linux.type-{i}": RunnerTypeMetrics(
                queued=i % 7,
                longest_wait_mins=i,
                busy=10,
                registered=12,
                completed_per_min=2,
                arrival_per_min=2.5,
                job_duration_mins=12,
            )
            for i in range(TYPES)
        }
        return FleetSnapshot(at=now, source="prometheus", runner_types=types)

    async def aclose(self) -> None:
        return None


def seasoned(incident: Incident, fleet: FleetSnapshot, statuses: int) -> Incident:
    """The incident after `statuses` statuses, ten minutes apart."""
    for i in range(statuses):
        at = incident.opened_at + timedelta(minutes=10 * (i + 1))
        snapshot = as_snapshot(incident, fleet.model_copy(update={"at": at}), at)
        incident = record_status(incident, snapshot, live=fleet, posted=True)
    return incident


async def measure(
    redis_url: str, incidents: int, history: int = TREND_POINTS
) -> tuple[float, float, float, int, tuple[int, int], int]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushall()
    store = IncidentStore(redis, "bench")
    now = [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    fleet = InstantFleet()
    config = Settings(backend_timeout_seconds=5)
    readings = FleetReadings(redis, store.keys, fleet, config=config, clock=lambda: now[0])
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    payload = fixture_json("grafana/queue-alert-firing.json")
    template: Incident | None = None
    for n in range(incidents):
        payload["groupKey"] = f"bench-{n}"
        delivery = delivery_of(parse_notification("grafana", payload))
        incident = open_incident(
            delivery, incident_id=str(n), uid=f"u{n}", channel="C1", now=now[0]
        )
        if template is None:
            reading = await fleet.read(now=now[0])
            queueing = [(n, m) for n, m in worst_first(reading.runner_types) if m.queued]
            view = reading.model_copy(update={"runner_types": dict(queueing[:MAX_VIEW_TYPES])})
            template = seasoned(incident, view, history)
            fleet.reads = 0  # only the ticks' reads count
        incident = template.model_copy(
            update={
                "id": incident.id,
                "uid": incident.uid,
                "group_key": incident.group_key,
                "group_hash": incident.group_hash,
            }
        )
        await store.commit(
            Commit(
                incident,
                group=GroupState(incident_id=str(n)),
                group_hash=incident.group_hash,
                status_due=now[0].timestamp() + 600,
            )
        )
    # As `python -m bot serve` does once started (`_settle_heap`): what startup and seeding
    # built is out of the collector's view, so a full collection walks only what ticks make.
    gc.collect()
    gc.freeze()
    intervals = []
    worst_tick = 0.0
    rounds = 0
    for _ in range(3):  # three intervals: a status, then quiet ones
        now[0] += timedelta(seconds=601)
        cpu, wall = time.process_time(), time.perf_counter()
        # A tick takes at most 100 due incidents; the scheduler ticks again STATUS_TICK_SECONDS
        # later. Here: tick until none is due, the cost of one interval's statuses.
        while await store.status_due.pending(now[0].timestamp()):
            tick = time.process_time()
            await reporter.tick()
            worst_tick = max(worst_tick, time.process_time() - tick)
            rounds += 1
        intervals.append((time.process_time() - cpu, time.perf_counter() - wall))
    sample = min(incidents, 50)
    kept = waiting = 0
    k = store.keys
    for n in range(sample):
        # What the incident keeps (state, timeline, group) and its replies waiting for the
        # channel's posting budget (no sender runs here; once posted they are deleted).
        for key in (k.incident(str(n)), k.timeline(str(n))):
            kept += await redis.memory_usage(key) or 0
        for key in (k.outbox(str(n)), k.outbox_items(str(n))):
            waiting += await redis.memory_usage(key) or 0
    group_hashes = [key async for key in redis.scan_iter(match=store.keys.group("*"))]
    for key in group_hashes[:sample]:
        kept += await redis.memory_usage(key) or 0
    await redis.aclose()
    gc.unfreeze()
    cpu = sum(t[0] for t in intervals) / len(intervals)
    wall = sum(t[1] for t in intervals) / len(intervals)
    return cpu, wall, worst_tick, fleet.reads, (kept // sample, waiting // sample), rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument(
        "--history", type=int, default=TREND_POINTS, help="statuses each incident has had"
    )
    args = parser.parse_args()
    server = RedisServer()
    server.start()
    try:
        print(
            f"status tick, live metrics ({TYPES} runner types), every incident due, each after "
            f"{args.history} statuses:"
        )
        for size in (int(s) for s in args.sizes.split(",")):
            cpu, wall, worst, reads, (kept, waiting), rounds = asyncio.run(
                measure(server.url, size, args.history)
            )
            print(
                f"  {size:5d} incidents: worst tick {worst * 1000:6.1f} ms CPU; every status of "
                f"an interval {cpu * 1000:7.1f} ms CPU ({cpu * 1e6 / size:.0f} µs per incident), "
                f"{wall * 1000:7.1f} ms wall, in {rounds // 3} ticks; {reads} backend reads in "
                f"3 intervals; Redis per incident {kept / 1024:.1f} KiB kept, "
                f"+{waiting / 1024:.1f} KiB of replies waiting to be posted"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
