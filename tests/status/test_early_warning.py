"""The early warning's upkeep against a real Redis, with a clock the test moves and a metrics
backend of the bot's own interface: a warning is raised once the queue builds over five
readings (never on a queue that only wanders), queued for the channel's sender, edited as it
moves, cleared once it no longer crosses, folded into the incident when the alert fires, held
back while dismissed, and each reading is decided by one replica only. A folded warning links
the incident's thread once its root is posted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.backends.http import BackendError
from bot.config import Settings, load_settings
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import EARLY_WARNING, GroupState, open_incident, resolve_manually
from bot.domain.reading.early_warning import Phase
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.fleet.readings import FleetReadings
from bot.status.early_warning import EarlyWarnings
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore
from bot.storage.keys import BAND
from bot.storage.send_queue import SendQueue
from tests.support.payloads import fixture_json

START = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"
CHANNEL = "C01"
THREAD_LINK = "https://acme.slack.com/archives/C1/p1700000100000200"


class Building:
    """linux.2xlarge at its maximum of 20 runners, with the jobs in the system the test sets."""

    name = "Prometheus"
    live = True

    def __init__(self) -> None:
        self.in_system = 18.0
        self.down = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        if self.down:
            raise BackendError(
                "Prometheus is unreachable at http://prometheus:9090", retryable=True
            )
        busy = min(self.in_system, 20)
        metrics = RunnerTypeMetrics(
            queued=self.in_system - busy,
            busy=busy,
            registered=20,
            maximum=20,
            job_duration_mins=6.0,
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={TYPE: metrics})

    async def aclose(self) -> None:
        return None


class Replica:
    def __init__(
        self,
        redis: Redis,
        fleet: Building,
        now: list[datetime],
        permalink: Callable[[str, str], Awaitable[str | None]] | None = None,
        *,
        config: Settings | None = None,
    ) -> None:
        self.store = IncidentStore(redis, "qp")
        self.warnings = WarningStore(redis, self.store.keys)
        config = config or Settings(
            slack_channel=CHANNEL,
            early_warning_queued=10,
            scaler_backend="arc",
            scaler_targets={TYPE: {}},
            backend_timeout_seconds=2,
        )
        readings = FleetReadings(redis, self.store.keys, fleet, config=config, clock=lambda: now[0])
        self.upkeep = EarlyWarnings(
            readings,
            self.store,
            self.warnings,
            config=config,
            clock=lambda: now[0],
            permalink=permalink,
        )


async def test_a_warning_is_raised_edited_cleared_and_decided_once(redis_url: str) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    fleet, now = Building(), [START]
    first, second = Replica(redis, fleet, now), Replica(redis, fleet, now)

    async def reading(in_system: float) -> None:
        fleet.in_system = in_system
        now[0] += timedelta(seconds=60)
        await first.upkeep.tick()
        await second.upkeep.tick()  # the same reading: already decided

    for n in (16, 18, 20, 22):
        await reading(n)
        assert await first.warnings.all() == {}, "not until five readings show it"
    await reading(24)  # 4 queued, +2 jobs/min at the maximum: 10 queued in 3 minutes
    state = (await first.warnings.all())[TYPE]
    assert state.phase is Phase.ACTIVE and state.version == 1 and not state.ts
    assert "4 jobs queued at its maximum of 20 runners, jobs arriving 2.0/min faster" in state.text
    assert "at this rate the alert fires in ~3 min" in state.text
    # The reading's judgement, stabilized as every surface shows it: 4 queued × 6-minute jobs /
    # 30 min take one more runner, but the reading before two asked none, and a rise shows once
    # three readings asked for it.
    advice = "+1 runner would drain it in 30 min; raise the maximum by 1 (20 → 21)"
    assert state.text.endswith("fires in ~3 min; none yet: +1 runner if the queue keeps rising")
    assert state.scalable, "the message offers Scale up"
    # Queued for the channel's sender, past the roots, once.
    posts = await redis.zrange(first.store.keys.posts(CHANNEL), 0, -1, withscores=True)
    assert [(member, score // BAND) for member, score in posts] == [(state.member, BAND_EVENT)]

    await first.warnings.record_post(state, "1700000000.000100")  # what the sender records
    await reading(27)
    state = (await first.warnings.all())[TYPE]
    assert state.version == 2 and state.shown == 1 and state.ts == "1700000000.000100"
    assert advice in state.text, "asked at 2, 4 and 7 queued: the rise holds"
    assert await first.warnings.edits(CHANNEL) == [TYPE], "the posted warning is edited"
    assert await redis.zcard(first.store.keys.posts(CHANNEL)) == 0, "never posted twice"

    # Readings that no longer rise, 7 queued: the line through the last five still rises and
    # still reaches 10 queued within the horizon, so the warning stands (never "no longer
    # building" just before the alert fires)...
    for _ in range(3):
        await reading(27)
        assert (await first.warnings.all())[TYPE].phase is Phase.ACTIVE
    await reading(27)  # ...until the line is flat: withdrawn
    assert (await first.warnings.all())[TYPE].phase is Phase.CLEARED


async def test_a_warnings_advice_drains_the_queue_within_the_configured_target(
    redis_url: str,
) -> None:
    """Built from settings as the app builds it, a warning recommends the runners that drain
    the queue within `DRAIN_TARGET_MINUTES`, as the root, a status and the modal do."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    settings = load_settings(
        _env_file=None,
        slack_channel="C0QUEUE",
        early_warning_queued=10,
        early_warning_minutes=15,
        runner_boot_minutes=5,
        drain_target_minutes=20,
    )
    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now, config=settings)
    for n in (16, 18, 20, 22, 24, 26, 28):
        fleet.in_system = n
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()
    state = (await replica.warnings.all())[TYPE]
    # 4, 6 and 8 queued, 6-minute jobs: at least 4 × 6 / 20 = 1.2 asked three readings running,
    # two runners in 20 minutes.
    assert "+2 runners would drain it in 20 min; raise the maximum by 2" in state.text


async def test_a_queue_wandering_at_its_maximum_never_warns_and_a_build_posts_once(
    redis_url: str,
) -> None:
    """The issue's fleet: at its maximum of 20, 0 to 3 jobs queued from reading to reading with
    no trend (three rises in a row among them). Then a real build, a pause, and the build again
    within the quarter hour: one message, edited, never a second post."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now)

    async def reading(in_system: float) -> None:
        fleet.in_system = in_system
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()

    for queued in [0, 1, 2, 3, 1, 0, 2, 3, 0, 1, 2, 3, 3, 0, 0, 1, 2, 3, 2, 1] * 3:
        await reading(20 + queued)
    assert await replica.warnings.all() == {}, "noise is no build"
    assert await redis.zcard(replica.store.keys.posts(CHANNEL)) == 0

    for n in (22, 24, 26, 28):
        await reading(n)
    raised = (await replica.warnings.all())[TYPE]
    await replica.warnings.record_post(raised, "1700000000.000100")
    for _ in range(5):  # the queue pauses at 8: withdrawn once the line is flat
        await reading(28)
    assert (await replica.warnings.all())[TYPE].phase is Phase.CLEARED
    for n in (30, 32, 34, 36):  # building again, minutes later
        await reading(n)
    again = (await replica.warnings.all())[TYPE]
    assert again.phase is Phase.ACTIVE and again.uid == raised.uid, "the same warning, edited"
    assert await redis.zcard(replica.store.keys.posts(CHANNEL)) == 0, "not posted a second time"
    assert await replica.warnings.edits(CHANNEL) == [TYPE]


async def test_the_alert_firing_folds_the_warning_and_a_dismissal_holds(redis_url: str) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now)

    async def reading(in_system: float) -> None:
        fleet.in_system = in_system
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()

    for n in (16, 18, 20, 22, 24):
        await reading(n)
    state = (await replica.warnings.all())[TYPE]
    await replica.warnings.record_post(state, "1700000000.000100")

    firing = parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    incident = open_incident(
        delivery_of(firing),
        incident_id="7",
        uid="u7",
        channel=CHANNEL,
        now=now[0] + timedelta(minutes=5),
    )
    await replica.store.commit(Commit(incident, group=GroupState(incident_id="7")))
    await reading(26)
    state = (await replica.warnings.all())[TYPE]
    assert state.phase is Phase.FOLDED and state.incident_id == "7"
    await replica.warnings.record_edit(CHANNEL, state)  # the sender showed it
    # The incident keeps the warning it took on, for its summary and postmortem: once.
    await reading(27)
    [taken] = [e for e in await replica.store.events("7") if e.kind == EARLY_WARNING]
    assert taken.text.startswith("Took on the early warning raised 5 min before the alert fired")
    assert f"which said: {TYPE}: queue building" in taken.text and taken.actor is None

    # Once resolved, a queue building again raises a new warning; dismissed, it stays away.
    loaded = await replica.store.load("7")
    resolved = resolve_manually(incident, by="U1", name="al", now=now[0])
    assert await replica.store.commit(Commit(resolved, version=loaded.version))
    for n in (30, 32, 34, 36):
        await reading(n)
    raised = (await replica.warnings.all())[TYPE]
    assert raised.phase is Phase.ACTIVE and raised.uid != state.uid, "a new warning"
    until = (now[0] + timedelta(hours=1)).timestamp()
    dismissed = raised.changed(now[0].timestamp(), phase=Phase.DISMISSED, by="al", until=until)
    assert await replica.warnings.save(dismissed)
    for n in (38, 40, 42, 44):
        await reading(n)
    assert (await replica.warnings.all())[TYPE].phase is Phase.DISMISSED
    # A stale decision (another replica's, older than what is stored) never overwrites it.
    assert not await replica.warnings.save(raised.changed(now[0].timestamp(), text="older"))


async def test_a_warning_without_fresh_readings_says_its_forecast_is_on_hold(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now)

    async def reading(in_system: float | None) -> None:
        fleet.down = in_system is None
        fleet.in_system = in_system or fleet.in_system
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()

    for n in (16, 18, 20, 22, 24):
        await reading(n)
    state = (await replica.warnings.all())[TYPE]
    await replica.warnings.record_post(state, "1700000000.000100")
    last_good = now[0]
    for _ in range(4):  # Prometheus down for four minutes: the forecast stands
        await reading(None)
    assert not (await replica.warnings.all())[TYPE].held_since
    await reading(None)  # five minutes without a reading: on hold, and the message edited
    held = (await replica.warnings.all())[TYPE]
    assert held.phase is Phase.ACTIVE and held.held_since == last_good.timestamp()
    assert await replica.warnings.edits(CHANNEL) == [TYPE]
    await replica.warnings.record_edit(CHANNEL, held)
    await reading(None)  # said once
    assert (await replica.warnings.all())[TYPE].version == held.version
    await reading(27)  # read again: the forecast is current once more
    back = (await replica.warnings.all())[TYPE]
    assert back.phase is Phase.ACTIVE and not back.held_since and back.version == held.version + 1


async def test_a_folded_warning_links_the_incident_thread_once_its_root_is_posted(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    asked: list[tuple[str, str]] = []
    answers: list[str | None] = []  # None: Slack does not say now (slow, failing)

    async def permalink(channel: str, ts: str) -> str | None:
        asked.append((channel, ts))
        return answers.pop(0)

    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now, permalink)

    async def reading(in_system: float) -> None:
        fleet.in_system = in_system
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()

    for n in (16, 18, 20, 22, 24):
        await reading(n)
    await replica.warnings.record_post((await replica.warnings.all())[TYPE], "1700000000.000100")
    firing = parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    incident = open_incident(
        delivery_of(firing), incident_id="7", uid="u7", channel=CHANNEL, now=now[0]
    )
    await replica.store.commit(Commit(incident, group=GroupState(incident_id="7")))
    await reading(26)  # the alert fired; the incident's root waits for its turn in the channel
    folded = (await replica.warnings.all())[TYPE]
    assert folded.phase is Phase.FOLDED and folded.incident_id == "7"
    assert folded.incident_link == "" and asked == [], "no thread to link yet"
    await replica.warnings.record_edit(CHANNEL, folded)  # the sender showed it
    folded = (await replica.warnings.all())[TYPE]
    await reading(28)
    assert (await replica.warnings.all())[TYPE] == folded and asked == []

    queue = SendQueue(redis, "qp", retention_s=86400)
    await queue.record_root(
        incident,
        "1700000100.000200",
        "digest",
        version=1,
        edit_differs=False,
        edit_after_ms=0,
    )
    answers += [None, THREAD_LINK]
    await reading(30)  # Slack did not answer: said without the link, asked again next reading
    assert (await replica.warnings.all())[TYPE] == folded
    assert asked == [(CHANNEL, "1700000100.000200")]
    await reading(32)
    linked = (await replica.warnings.all())[TYPE]
    assert linked.incident_link == THREAD_LINK and linked.version == folded.version + 1
    assert linked.phase is Phase.FOLDED and linked.incident_id == "7"
    assert len(asked) == 2, "one call per decision"
    assert await replica.warnings.edits(CHANNEL) == [TYPE], "the message is edited to link it"
    await replica.warnings.record_edit(CHANNEL, linked)
    linked = (await replica.warnings.all())[TYPE]
    for n in (34, 36):
        await reading(n)
    assert (await replica.warnings.all())[TYPE] == linked and len(asked) == 2, "asked once"
