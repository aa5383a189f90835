"""The capacity report's history where the backend keeps none (`METRICS_BACKEND=github`):
queuepilot's own readings, kept a slot apart in a real Redis by the replicas that take them, and
the report a responder reads from them. The readings are the GitHub backend's own (`fleet_of`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.actions.core import Actor
from bot.actions.flow import Acting, Authorizer
from bot.actions.report import Report
from bot.backends.metrics import AlertMetrics
from bot.backends.metrics.github_jobs import fleet_of
from bot.config import Settings
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.fleet.readings import FleetReadings
from bot.fleet.readings_history import ReadingsHistory
from bot.storage.incident_store import IncidentStore
from bot.storage.keys import Keys
from bot.storage.leases import Interactions
from bot.telemetry import Telemetry
from tests.support.cores import _no_members, _no_name

START = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)  # a Saturday, midnight UTC
BUSY = (timedelta(hours=10), timedelta(hours=13))  # each day, the fleet at its maximum of 20


class WorkdayFleet:
    """The GitHub backend's reading (its own `fleet_of`, over jobs and runners as GitHub's API
    lists them): from 10:00 to 13:00 every day 20 runners busy and 14 jobs queued for 30
    minutes; otherwise no job at all, so the reading lists no runner type. GitHub has no
    maximum. `replica` marks which replica's reading a slot kept (its jobs' duration)."""

    name = "GitHub"
    live = True

    def __init__(self, replica: int) -> None:
        self.replica = replica

    async def read(self, *, now: datetime) -> FleetSnapshot:
        into_day = now - now.replace(hour=0, minute=0, second=0, microsecond=0)
        if not BUSY[0] <= into_day < BUSY[1]:
            return fleet_of([], [], now=now, every_job_listed=True)
        labels = [{"name": "self-hosted"}, {"name": "linux.2xlarge"}]
        since = (now - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
        queued = [
            {"labels": ["linux.2xlarge"], "status": "queued", "created_at": since}
            for _ in range(14)
        ]
        running = [
            {"labels": ["linux.2xlarge"], "status": "in_progress", "runner_id": n}
            for n in range(20)
        ]
        runners = [{"labels": labels, "status": "online", "busy": True} for _ in range(20)]
        fleet = fleet_of([*queued, *running], runners, now=now, every_job_listed=True)
        # The job minutes the jobs listing adds to a reading, told apart by replica.
        shown = fleet.runner_types["linux.2xlarge"].model_copy(
            update={"job_duration_mins": 40 + self.replica}
        )
        return fleet.model_copy(update={"runner_types": {"linux.2xlarge": shown}})

    async def aclose(self) -> None:
        return None


async def read_for(
    redis: Redis, days: float, *, skip: tuple[float, float] = (0, 0), every_mins: int = 1
) -> None:
    """Two replicas read the fleet every `every_mins` for `days` (none in `skip`, hours from
    START)."""
    keys = Keys("qp")
    kept = ReadingsHistory(redis, keys, interval_s=60 * every_mins)
    now = [START]
    replicas = [
        FleetReadings(
            redis,
            keys,
            WorkdayFleet(n),
            config=Settings(metrics_interval_seconds=60 * every_mins, backend_timeout_seconds=5),
            clock=lambda: now[0],
            kept=kept,
        )
        for n in (1, 2)
    ]
    for minute in range(0, int(days * 24 * 60), every_mins):
        now[0] = START + timedelta(minutes=minute)
        if skip[0] * 60 <= minute < skip[1] * 60:
            continue
        # The reading each minute is one replica's; both keep it in the same slot.
        await replicas[minute // every_mins % 2].latest()


async def test_two_days_of_readings_give_the_hours_at_the_maximum_and_over_the_thresholds(
    redis: Redis,
) -> None:
    await read_for(redis, 2)
    history = await ReadingsHistory(redis, Keys("qp"), interval_s=60).history(
        start=START, end=START + timedelta(days=2)
    )
    assert history.note == ""  # every slot was read
    kept = history.types["linux.2xlarge"]
    # Every slot has the type: listed while busy, else nothing queued (the reading listed every
    # job). One reading a slot, not two.
    assert kept.step_s == 300 and len(kept.queued) == 2 * 288
    assert kept.hours_at_max is None  # GitHub has no maximum: not a number it can give
    assert kept.hours_over(Thresholds(queued=10)) == 6.0  # 10:00 to 13:00, both days
    assert kept.hours_over(Thresholds(wait_mins=45)) == 0.0
    # Three hours a day of 30-minute waits in twenty-four: p50 idle, p90 the busy hours' wait.
    assert kept.wait_p50_mins == 0 and kept.wait_p90_mins == 30
    assert kept.quantiles_of == "sampled longest wait"
    # Each slot keeps the first reading in it, the replicas' in turn (40 + 1, 40 + 2 minutes).
    assert kept.job_mins == 41.5


async def test_a_window_the_bot_was_down_for_is_not_counted_and_the_history_says_so(
    redis: Redis,
) -> None:
    await read_for(redis, 2, skip=(8, 32))  # down from 08:00 on the first day for a day
    history = await ReadingsHistory(redis, Keys("qp"), interval_s=60).history(
        start=START, end=START + timedelta(days=2)
    )
    over = history.types["linux.2xlarge"].hours_over(Thresholds(queued=10))
    assert over == 3.0  # the second day's only
    assert history.note.startswith("queuepilot's readings cover 1.0 of these 2.0 days")


async def test_an_unreadable_slot_is_left_out_and_the_rest_is_read(redis: Redis) -> None:
    keys = Keys("qp")
    kept = ReadingsHistory(redis, keys, interval_s=60)
    for hour in range(3):
        at = START + timedelta(hours=hour)
        metrics = RunnerTypeMetrics(queued=5, registered=20, maximum=20)
        await kept.keep(FleetSnapshot(at=at, source="github", runner_types={"gpu": metrics}))
    await redis.hset(keys.readings_day("20261121"), str(int(START.timestamp()) + 3900), "{not")
    history = await kept.history(start=START, end=START + timedelta(hours=3))
    assert sorted(history.types["gpu"].queued) == [START.timestamp() + h * 3600 for h in range(3)]


async def test_with_the_github_backend_the_report_has_the_week_from_queuepilots_readings(
    redis: Redis,
) -> None:
    await read_for(redis, 7, every_mins=5)
    store = IncidentStore(redis, "qp")
    now = START + timedelta(days=7)
    acting = Acting(
        store,
        Telemetry(),
        Interactions(redis, "qp"),
        Authorizer(Settings(), group_members=_no_members),
        display_name=_no_name,
        clock=lambda: now,
    )
    readings = FleetReadings(
        redis,
        store.keys,
        AlertMetrics(),
        config=Settings(backend_timeout_seconds=2),
        clock=lambda: now,
    )
    report = Report(
        acting,
        readings,
        config=Settings(early_warning_queued=10),
        history=ReadingsHistory(redis, store.keys, interval_s=300),
    )
    outcome = await report.report(Actor("U1", "al"), 7, interaction="i1")
    text = outcome.message
    assert "• *linux.2xlarge*: 0 incidents · 21 h over the thresholds" in text, text
    # 14 queued 3 hours a day for 7 days: 294 job-hours, with no maximum to say a share of.
    assert (
        "sampled longest wait p50 0 s, p90 30 min · 294 job-hours waited · peak 14 queued" in text
    )
    assert "at the maximum" not in text  # GitHub cannot say
    assert "sampled longest wait, hours over the alert's thresholds from queuepilot's" in text
