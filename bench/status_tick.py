"""The status tick with live metrics: CPU per interval's statuses and backend reads, at 10, 100
and 1,000 open incidents, on a real redis-server.

Every incident is due at once (the worst case: a tick after an outage). The backend is the bot's
own metrics interface answering at once with 40 runner types, so the numbers are queuepilot's
cost, not a backend's latency. What users need: one backend read per tick whatever the number of
incidents, and a tick that stays cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.alerts import parse_notification
from bot.delivery import delivery_of
from bot.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.incidents import GroupState, open_incident
from bot.readings import FleetReadings
from bot.sandbox.redis_server import RedisServer
from bot.status import StatusConfig, StatusReporter
from bot.store import Commit, IncidentStore
from bot.telemetry import Telemetry
from tests.conftest import fixture_json

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


async def measure(redis_url: str, incidents: int) -> tuple[float, float, int, int, int]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushall()
    store = IncidentStore(redis, "bench")
    now = [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    fleet = InstantFleet()
    readings = FleetReadings(
        redis, store.keys, fleet, interval_s=60, timeout_s=5, clock=lambda: now[0]
    )
    reporter = StatusReporter(
        store, readings, Telemetry(), config=StatusConfig(), clock=lambda: now[0]
    )
    payload = fixture_json("grafana/queue-alert-firing.json")
    for n in range(incidents):
        payload["groupKey"] = f"bench-{n}"
        delivery = delivery_of(parse_notification("grafana", payload))
        incident = open_incident(
            delivery, incident_id=str(n), uid=f"u{n}", channel="C1", now=now[0]
        )
        await store.commit(
            Commit(
                incident,
                group=GroupState(incident_id=str(n)),
                group_hash=incident.group_hash,
                status_due=now[0].timestamp() + 600,
            )
        )
    ticks = []
    rounds = 0
    for _ in range(3):  # three intervals: the first status, then quiet ones
        now[0] += timedelta(seconds=601)
        cpu, wall = time.process_time(), time.perf_counter()
        # A tick takes at most 100 due incidents; the scheduler ticks again STATUS_TICK_SECONDS
        # later. Here: tick until none is due, the cost of one interval's statuses.
        while await store.due_status(now[0].timestamp()):
            await reporter.tick()
            rounds += 1
        ticks.append((time.process_time() - cpu, time.perf_counter() - wall))
    size = 0
    for n in range(min(incidents, 50)):
        size += await redis.memory_usage(store.keys.incident(str(n))) or 0
    await redis.aclose()
    cpu = sum(t[0] for t in ticks) / len(ticks)
    wall = sum(t[1] for t in ticks) / len(ticks)
    return cpu, wall, fleet.reads, size // min(incidents, 50), rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    server = RedisServer()
    server.start()
    try:
        print(f"status tick, live metrics ({TYPES} runner types), every incident due:")
        for size in (int(s) for s in args.sizes.split(",")):
            cpu, wall, reads, per_incident, rounds = asyncio.run(measure(server.url, size))
            print(
                f"  {size:5d} incidents: {cpu * 1000:7.1f} ms CPU ({cpu * 1e6 / size:.0f} µs per "
                f"incident), {wall * 1000:7.1f} ms wall per interval in {rounds // 3} ticks; "
                f"{reads} backend reads in 3 intervals; {per_incident / 1024:.1f} KiB of Redis "
                "per incident (after 3 statuses)"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
