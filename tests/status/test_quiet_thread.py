"""A long incident stays readable: a two-hour incident at the default 10-minute cadence, with a
queue that wobbles but does not change, ends with at most 15 thread messages.

The status tick runs for real against Redis, with a clock the test moves and a metrics backend
of the bot's own interface; the thread is what a sender would make of the outbox: a status is a
new message, a quiet status an edit of the previous one, a chart a new message."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from redis.asyncio import Redis

from bot.actions.flow import Actor
from bot.actions.scale_reverts import ScaleReverts
from bot.backends.kube import kube_access
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import GroupState, open_incident
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.scale.scaling import ScaleTarget
from bot.fleet.readings import FleetReadings
from bot.render.chart import BLOCK_TYPE, chart_block, incident_chart
from bot.render.replies import StatusShown, render_shown
from bot.render.root import render_root
from bot.status.tick import StatusReporter
from bot.storage.incident_store import STATUS_KINDS, Commit, IncidentStore
from bot.storage.send_queue import SendQueue
from bot.telemetry import Telemetry
from sandbox.silence_api import FakeSilenceApi
from tests.support.cores import action_core, grafana_in_process
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WOBBLE = [(40, 31), (41, 32), (40, 33), (42, 31), (41, 34), (39, 32)]


class WobblingQueue:
    """A queue that moves by a job or two, as a real one does between readings, under runners
    booting enough for it: the advice (none) holds, as the stabilized advice would."""

    name = "Prometheus"
    live = True

    def __init__(self) -> None:
        self.reads = 0
        self.drained = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        queued, wait = (0, 0) if self.drained else WOBBLE[self.reads % len(WOBBLE)]
        self.reads += 1
        metrics = RunnerTypeMetrics(
            queued=queued, longest_wait_mins=wait, busy=20, registered=20, desired=80
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": metrics})

    async def aclose(self) -> None:
        return None


@dataclass
class Outbox:
    """What incident 1's channel sender makes of its outbox, as `bot/outbound/messages.py` does:
    each new message (its kind, its text, its blocks as JSON; a status rendered as it goes out),
    and each edit (a quiet status, a summary told anew) apart."""

    queue: SendQueue
    store: IncidentStore
    now: list[datetime]
    messages: list[tuple[str, str, str]] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.messages]

    async def send(self) -> None:
        while (head := await self.queue.head_reply("1")) is not None:
            text, blocks = head.rendered.text, head.rendered.blocks
            if head.kind in STATUS_KINDS and (incident := await self.store.get("1")) is not None:
                shown = StatusShown.from_extra(head.extra)
                blocks = render_shown(incident, shown, now=self.now[0]).blocks
                text = str(blocks[0]["text"]["text"])
            if head.edit_ts:  # a quiet status, or a summary a later change made untrue
                self.edits.append(json.dumps(blocks, ensure_ascii=False))
                await self.queue.record_reply("C1", "1", head.item)
                continue
            self.messages.append((head.kind, text, json.dumps(blocks, ensure_ascii=False)))
            ts = f"2.{len(self.messages):06d}" if head.ts_as else ""
            await self.queue.record_reply("C1", "1", head.item, ts=ts, ts_as=head.ts_as)


async def test_a_two_hour_incident_at_the_default_cadence_stays_within_15_messages(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    queue = SendQueue(redis, "qp", retention_s=3600)
    now = [START]
    metrics = WobblingQueue()
    config = Settings(backend_timeout_seconds=2)  # every 600 s
    readings = FleetReadings(redis, store.keys, metrics, config=config, clock=lambda: now[0])
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    await opened_and_posted(redis, store, config)

    out = Outbox(queue, store, now)

    for _ in range(12):  # two hours, one status every ten minutes
        now[0] += timedelta(seconds=config.status_interval_seconds)
        await reporter.tick()
        await out.send()

    # With the root, at most 15; charts as pictures (`CHART_STYLE=image`) are messages too.
    assert len(out.messages) + 1 <= 15, out.kinds
    assert out.kinds.count("status") == 1 and len(out.edits) == 11  # one status, edited in place
    assert "chart" not in out.kinds, "no picture of a trend that did not move"

    # Then the queue drains: the next status finds it drained, two more checks a minute apart
    # confirm it, and the summary closes the incident: 12 minutes at most with the defaults.
    metrics.drained = True
    for _ in range(13):
        now[0] += timedelta(seconds=61)
        await reporter.tick()
        await out.send()
    loaded = await store.load("1")
    assert loaded.incident is not None and not loaded.incident.is_open
    assert "summary" in out.kinds and len(out.messages) + 1 <= 15, out.kinds
    await redis.aclose()


# -- a whole incident, as the demo walks it -------------------------------------------------

ALICE = Actor("U0ALICE", "alice")
ARC_SET = "arc-runners/mt-l-x86iavx512-8-64"


async def test_a_demo_incident_tells_each_thing_once_in_at_most_8_replies(
    redis_url: str, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """Alert, acknowledge, silence, scale up, diagnose, three statuses, resolve, put-back: the
    thread holds what the root does not say, each said once."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 20
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    queue = SendQueue(redis, "qp", retention_s=3600)
    now = [START]
    metrics = WobblingQueue()
    config = Settings(backend_timeout_seconds=2, scale_revert_settle=0)
    arc = ArcScaler(config, kube_access(str(kube.kubeconfig(tmp_path, kube.url)), {}))
    reverts = ScaleReverts(redis, store.keys, store, arc, config=config, clock=lambda: now[0])
    core = action_core(
        redis,
        store,
        silencer=grafana_in_process(FakeSilenceApi()),
        scaler=arc,
        targets={"linux.2xlarge": ScaleTarget("linux.2xlarge", ARC_SET, cap=20)},
        metrics=metrics,
        scale_allowed=(ALICE.user_id,),
        clock=lambda: now[0],
        reverts=reverts,
    )
    readings = FleetReadings(redis, store.keys, metrics, config=config, clock=lambda: now[0])
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    await opened_and_posted(redis, store, config)
    out = Outbox(queue, store, now)

    for act in (
        core.acknowledge(ALICE, "1"),
        core.silencing.silence(ALICE, "1", 3600),
        core.scaling.scale(ALICE, "1", "linux.2xlarge", 5),
        core.diagnosing.diagnose(ALICE, "1"),
    ):
        outcome = await act
        assert outcome.ok, outcome.text
        now[0] += timedelta(seconds=30)
        await out.send()
    for _ in range(3):  # half an hour of statuses: the third with its chart as a picture
        now[0] += timedelta(seconds=config.status_interval_seconds)
        await reporter.tick()
        await out.send()
    resolved = await core.resolve(ALICE, "1", anyway=True)  # its queue is still live
    assert resolved.ok
    await out.send()
    now[0] += timedelta(seconds=16)
    await reverts.tick()
    await out.send()

    kinds = out.kinds
    assert len(out.messages) <= 8, "\n".join(f"{k}: {t[:90]}" for k, t, _ in out.messages)
    assert kinds.count("chart") == 1, "the summary's picture would draw the status's again"
    texts = [blocks for _, _, blocks in out.messages]
    said = [blocks for kind, _, blocks in out.messages if kind in ("action", "event")]
    (silenced,) = [t for t in said if "Silenced for" in t]
    assert "Silenced for 1 h in Grafana until" in silenced and "<@" not in silenced, "once, no ping"
    (acknowledged,) = [t for t in said if "Acknowledged" in t]
    assert "<@U0ALICE>" in acknowledged, "the owner is mentioned once: the thread is theirs"
    plans = [t for t in texts if "unless someone changes it meanwhile" in t]
    assert len(plans) == 1 and "Scaled linux.2xlarge by +5" in plans[0], "said once"
    (summary,) = [blocks for kind, _, blocks in out.messages if kind == "summary"]
    ended = await store.get("1")
    assert ended is not None and chart_block(incident_chart(ended)) is not None, "one to draw"
    assert f'"type": "{BLOCK_TYPE}"' not in summary, "the last status drew this very chart"
    assert "↩️ linux.2xlarge minRunners 5 goes back to 0" in summary
    assert kinds[-1] == "event" and "Put linux.2xlarge back" in texts[-1]
    # The put-back made the summary's "goes back" untrue: it is edited in place, not said again.
    assert "goes back to 0" not in out.edits[-1] and "Put linux.2xlarge back" in out.edits[-1]
    root = json.dumps(render_root(ended, now=now[0]).blocks)
    assert "unless someone changes it meanwhile" not in root, "the latest actions stay short"
    await redis.aclose()


# -- two hours as a responder lives them ----------------------------------------------------

PLATEAU = [63, 57, 62, 60, 59, 62, 63, 58]  # ±3 around 60, never a direction of its own


class TwoHours:
    """Minute by minute: a rise to 60 jobs against a full fleet, a scale-up from Slack whose
    runners boot slowly, a plateau while they do, then the drain."""

    name = "Prometheus"
    live = True

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock

    async def read(self, *, now: datetime) -> FleetSnapshot:
        t = int((now - START).total_seconds() // 60)
        registered, desired, maximum = 20.0, 20.0, 20.0
        if t > SCALED_AT:  # the scale-up's runners booting, registering a minute at a time
            registered, desired, maximum = min(20.0 + t - SCALED_AT, 55.0), 120.0, 120.0
        if t <= 20:
            queued = 20 + 2 * t
        elif t <= 70:
            queued = PLATEAU[t % len(PLATEAU)]
        else:
            queued = max(60 - 2 * (t - 70), 0)
        metrics = RunnerTypeMetrics(
            queued=queued,
            longest_wait_mins=min(10 + t, 40) if queued else 0,
            busy=registered,
            registered=registered,
            desired=desired,
            maximum=maximum,
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": metrics})

    async def aclose(self) -> None:
        return None


SCALED_AT = 22


async def test_a_two_hour_incident_rising_scaled_and_drained_takes_at_most_15_replies(
    redis_url: str, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """A reading every minute and a status every 10: a new status reply only where the advice
    changed or a threshold was crossed, never two in a minute, never the same age twice; the
    rest edits the last status in place, or nothing once a reply is below it."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 20
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    queue = SendQueue(redis, "qp", retention_s=3600)
    now = [START]
    metrics = TwoHours(now)
    config = Settings(backend_timeout_seconds=2, scale_revert_settle=0)  # every 600 s
    arc = ArcScaler(config, kube_access(str(kube.kubeconfig(tmp_path, kube.url)), {}))
    reverts = ScaleReverts(redis, store.keys, store, arc, config=config, clock=lambda: now[0])
    core = action_core(
        redis,
        store,
        scaler=arc,
        targets={"linux.2xlarge": ScaleTarget("linux.2xlarge", ARC_SET, cap=20)},
        metrics=metrics,
        scale_allowed=(ALICE.user_id,),
        clock=lambda: now[0],
        reverts=reverts,
    )
    readings = FleetReadings(redis, store.keys, metrics, config=config, clock=lambda: now[0])
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    await opened_and_posted(redis, store, config)
    out = Outbox(queue, store, now)

    for minute in range(1, 121):
        now[0] = START + timedelta(minutes=minute, seconds=1)
        if minute == 5:
            assert (await core.acknowledge(ALICE, "1")).ok
        if minute == SCALED_AT:
            scaled = await core.scaling.scale(ALICE, "1", "linux.2xlarge", 20)
            assert scaled.ok, scaled.text
        await readings.tick()
        await reporter.tick()
        await out.send()
        if (ended := await store.get("1")) is not None and not ended.is_open:
            break
    now[0] += timedelta(minutes=31)
    await reverts.tick()
    await out.send()

    kinds = out.kinds
    print(f"two hours: {len(kinds)} replies {kinds}, {len(out.edits)} edits in place")
    assert ended is not None and not ended.is_open, "drained and resolved"
    assert len(kinds) <= 15, kinds
    statuses = [text for kind, text, _ in out.messages if kind == "status"]
    assert 3 <= len(statuses) <= 7, statuses
    titles = [line.split("\n")[0] for line in statuses]
    ages = [line.split("\n")[1].split(" · ")[0] for line in statuses]
    assert len(set(titles)) == len(titles) and len(set(ages)) == len(ages), statuses
    assert kinds.index("action") < len(kinds) - 1 - kinds[::-1].index("status")
    await redis.aclose()


async def opened_and_posted(redis: Redis, store: IncidentStore, config: Settings) -> None:
    """The reference alert's incident, its first status due after one interval, and its root
    posted: replies have a thread to go to."""
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
            status_due=START.timestamp() + config.status_interval_seconds,
        )
    )
    await redis.hset(store.keys.incident("1"), "thread", '{"channel": "C1", "ts": "1.000001"}')


# -- a plateau at the maximum, then a climb -------------------------------------------------

PLATEAU_AT_MAX = [0, 3, -2, 1, -3, 2, -1, 3, -3, 0, 2, -2, 1, -1, 3, -3, 0, 1, -2, 2]
CLIMB_FROM = 40


class AtItsMaximum:
    """A scale set at its maximum of 20, every runner busy on 10-minute jobs, its queue ±3
    around 30 for 40 readings, then climbing 4 jobs a reading."""

    name = "Prometheus"
    live = True

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock

    async def read(self, *, now: datetime) -> FleetSnapshot:
        t = int((now - START).total_seconds() // 60)
        if t <= CLIMB_FROM:
            queued = 30 + PLATEAU_AT_MAX[t % len(PLATEAU_AT_MAX)]
        else:
            queued = 33 + 4 * (t - CLIMB_FROM)
        metrics = RunnerTypeMetrics(
            queued=queued,
            longest_wait_mins=12,
            job_duration_mins=10,
            busy=20,
            registered=20,
            desired=20,
            maximum=20,
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": metrics})

    async def aclose(self) -> None:
        return None


async def test_a_wobbling_plateau_holds_the_advice_and_the_thread_then_a_climb_raises_it(
    redis_url: str,
) -> None:
    """A reading and a status check every minute: over 40 readings wobbling ±3 at the maximum
    the advice the root shows moves at most twice and at most 3 status replies are posted; the
    climb after it raises the advice at once, never through "none"."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    queue = SendQueue(redis, "qp", retention_s=3600)
    now = [START]
    config = Settings(backend_timeout_seconds=2, status_interval_seconds=60)
    readings = FleetReadings(
        redis, store.keys, AtItsMaximum(now), config=config, clock=lambda: now[0]
    )
    reporter = StatusReporter(store, readings, Telemetry(), config=config, clock=lambda: now[0])
    await opened_and_posted(redis, store, config)
    out = Outbox(queue, store, now)
    statuses: list[int] = []  # the minute of each new status reply
    advised: list[tuple[int, tuple[int, int]]] = []  # the advice the root shows, by the minute

    for minute in range(1, 53):
        now[0] = START + timedelta(minutes=minute, seconds=1)
        await readings.tick()
        await reporter.tick()
        posted = len(out.kinds)
        await out.send()
        statuses += [minute for kind in out.kinds[posted:] if kind == "status"]
        incident = await store.get("1")
        assert incident is not None and incident.live is not None
        judged = incident.live.runner_types["linux.2xlarge"].judged
        assert judged is not None
        assert judged.advice.startswith("+"), (minute, judged.advice)
        advised.append((minute, (judged.runners, judged.raise_maximum_by)))

    plateau = [advice for minute, advice in advised if minute <= CLIMB_FROM]
    moves = sum(1 for a, b in itertools.pairwise(plateau) if a != b)
    print(f"plateau: advice moved {moves}×, statuses at minutes {statuses}")
    assert moves <= 2, plateau
    assert len([m for m in statuses if m <= CLIMB_FROM]) <= 3, statuses
    climb = [runners for minute, (runners, _) in advised if minute > CLIMB_FROM]
    assert climb == sorted(climb) and climb[-1] > plateau[-1][0] + 5, advised
    await redis.aclose()
