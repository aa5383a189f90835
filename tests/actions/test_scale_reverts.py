"""Scale-ups that undo themselves: put back when the incident resolves or after
SCALE_REVERT_AFTER, only while the value is still the one set (a change since is left and said),
retried when the API server is briefly away, reported once when it cannot be done; two
replicas sweeping at once revert and say it once; Redis going away is waited out. The sweep
runs against a real Redis and the Kubernetes-shaped API server, on a clock the test moves; the
end-to-end tests scale from Slack and resolve the incident."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.actions.flow import Actor
from bot.actions.scale import made as made_up
from bot.actions.scale_reverts import (
    MAX_ATTEMPTS,
    MAX_BACKOFF_S,
    PutBackDue,
    ScaleReverts,
    record_id,
)
from bot.backends.kube import kube_access
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult, Undo
from bot.backends.scale.arc import ArcScaler
from bot.backends.scale.aws import ASG_DESIRED, AsgScaler
from bot.config import Settings
from bot.domain.incident.incidents import PILOT, Incident, Status
from bot.domain.reading.early_warning import (
    Phase,
    WarningState,
    fate_told,
    scaled_from,
    scaled_words,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judgement import Judgement, added
from bot.domain.scale.pilot import Hold, Verdict, pilot_acts, scale_ups, verdict
from bot.domain.scale.scale_ups import ScaleUp, undone
from bot.domain.scale.scaling import Policy, ScaleTarget
from bot.fleet.readings import FleetReadings
from bot.render.early_warning import render_warning
from bot.render.replies import render_event
from bot.render.root import render_root
from bot.storage.due_set import scale_revert_records
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import Commit, IncidentStore
from bot.storage.keys import Keys
from sandbox.serve import serve_in_thread
from tests.support.chart_admission import chart_policy
from tests.support.cores import action_core
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.incidents import changed, with_scaled
from tests.support.mutations import json_values
from tests.support.running import eventually, run_bot
from tests.support.scale import RUNNER, form_values, open_incident, view_submission
from tests.support.servers import RedisServer
from tests.support.slack import USER, Slack, click, ephemeral_texts, post_event, slash, thread_texts
from tests.support.store import KEYS, PREFIX, T0, opened

SET = ("arc-runners", "mt-l-x86iavx512-8-64")
TARGET = ScaleTarget("linux", "arc-runners/mt-l-x86iavx512-8-64", cap=20)
# The sweep looks every 15 s of the test's clock: each look reads the queue anew.
READ_EVERY_SECOND = Settings(metrics_interval_seconds=1, backend_timeout_seconds=2)


@pytest.fixture
def kube(kube: FakeKubeApi) -> FakeKubeApi:
    """The Kubernetes fake with the fixture's scale set, 40 runners running."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    return kube


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def pass_(self, **span: float) -> None:
        self.now += timedelta(**span)


@pytest.fixture
def arc(kube: FakeKubeApi, tmp_path: Path) -> ArcScaler:
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    return ArcScaler(Settings(backend_timeout_seconds=2), kube_access(str(path), {}))


@pytest.fixture
def clock() -> Clock:
    return Clock()


def sweep(
    redis: Redis,
    scaler: Scaler,
    clock: Clock,
    after_s: int = 4 * 3600,
    *,
    settle_s: float = 0,
    readings: FleetReadings | None = None,
) -> ScaleReverts:
    store = IncidentStore(redis, PREFIX)
    config = Settings(
        scale_revert_after=after_s, backend_timeout_seconds=2, scale_revert_settle=settle_s
    )
    return ScaleReverts(redis, KEYS, store, scaler, config=config, clock=clock, readings=readings)


class LinuxQueue:
    """The live queue of the `linux` type, as a metrics backend reads it; the test sets it."""

    name = "Prometheus"
    live = True

    def __init__(self, queued: int) -> None:
        self.queued = queued

    async def read(self, *, now: datetime) -> FleetSnapshot:
        metrics = RunnerTypeMetrics(queued=self.queued, longest_wait_mins=1, busy=40)
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux": metrics})

    async def aclose(self) -> None:
        return None


async def scaled(reverts: ScaleReverts, arc: ArcScaler, delta: int = 5) -> ScaleResult:
    result = await arc.scale(ScaleRequest(TARGET, delta, "1", "alice"))
    assert result.undo is not None
    await reverts.remember("1", TARGET, result.undo, by="alice")
    return result


async def said(redis: Redis) -> list[str]:
    store = IncidentStore(redis, PREFIX)
    return [e.text for e in await store.events("1") if e.kind == "scale_reverted"]


async def resolve(redis: Redis, clock: Clock) -> None:
    store = IncidentStore(redis, PREFIX)
    loaded = await store.load("1")
    assert loaded.incident is not None
    at = clock()
    done = changed(
        loaded.incident,
        status=Status.RESOLVED,
        updated_at=at,
        resolved_at=at,
    )
    assert await store.commit(Commit(done, version=loaded.version, thread=loaded.thread))


def min_runners(kube: FakeKubeApi) -> int:
    return int(kube.sets[SET]["spec"]["minRunners"])


async def test_put_back_after_scale_revert_after_while_the_incident_is_open(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    assert min_runners(kube) == 5
    clock.pass_(hours=1)
    await reverts.tick()
    assert min_runners(kube) == 5 and not await said(redis), "open, and not 4 h yet"
    kube.write(manager="manager", status={"currentRunners": 45})  # runners started meanwhile
    clock.pass_(hours=3)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await said(redis) == ["Put linux back (4 h after the scale-up): minRunners 5 → 0 (ARC)"]
    assert not await redis.zcard(KEYS.scale_reverts), "done with"
    clock.pass_(hours=1)
    await reverts.tick()
    assert len(await said(redis)) == 1


async def test_put_back_when_the_incident_resolves_and_a_second_scale_up_goes_with_it(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock, after_s=0)  # off: only when it resolves
    await scaled(reverts, arc, 5)
    clock.pass_(minutes=10)
    await scaled(reverts, arc, 3)  # 5 → 8: the value to put back is still 0
    clock.pass_(days=2)
    await reverts.tick()
    assert min_runners(kube) == 8, "no time limit: only the resolution puts it back"
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await said(redis) == ["Put linux back (the incident resolved): minRunners 8 → 0 (ARC)"]


async def test_after_the_resolve_it_waits_for_the_queue_to_stay_drained_the_settle_time(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """The alert cleared with 10 jobs still queued: the runners stay while they are needed, and
    go back once the type's queue has stayed drained 30 minutes since a look last saw it."""
    await opened(IncidentStore(redis, PREFIX))
    queue = LinuxQueue(queued=10)
    readings = FleetReadings(redis, KEYS, queue, config=READ_EVERY_SECOND, clock=clock)
    reverts = sweep(redis, arc, clock, settle_s=1800, readings=readings)
    await scaled(reverts, arc)
    await resolve(redis, clock)
    for _ in range(4):  # 10 queued for a minute after the resolve
        clock.pass_(seconds=16)
        await reverts.tick()
    assert min_runners(kube) == 5 and not await said(redis), "still queueing: it stays"
    queue.queued = 0
    clock.pass_(minutes=29)
    await reverts.tick()
    assert min_runners(kube) == 5, "drained, but not for 30 minutes since it was seen queueing"
    clock.pass_(minutes=2)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await said(redis) == [
        "Put linux back (the incident resolved and its queue stayed drained 30 min): "
        "minRunners 5 → 0 (ARC)"
    ]


async def test_a_queue_seen_again_while_settling_starts_the_settle_time_over(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    queue = LinuxQueue(queued=0)
    readings = FleetReadings(redis, KEYS, queue, config=READ_EVERY_SECOND, clock=clock)
    reverts = sweep(redis, arc, clock, settle_s=1800, readings=readings)
    await scaled(reverts, arc)
    await resolve(redis, clock)
    clock.pass_(minutes=20)
    await reverts.tick()
    queue.queued = 3  # it queues again 20 minutes after the resolve
    clock.pass_(seconds=16)
    await reverts.tick()
    queue.queued = 0
    clock.pass_(minutes=20)  # 40 minutes after the resolve, 20 after the queue
    await reverts.tick()
    assert min_runners(kube) == 5
    clock.pass_(minutes=11)
    await reverts.tick()
    assert min_runners(kube) == 0


async def test_without_live_numbers_it_goes_back_the_settle_time_after_the_resolve(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock, settle_s=1800)
    await scaled(reverts, arc)
    await resolve(redis, clock)
    clock.pass_(minutes=29)
    await reverts.tick()
    assert min_runners(kube) == 5
    clock.pass_(minutes=1)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert len(await said(redis)) == 1


async def test_the_answer_says_when_it_goes_back_with_the_settle_time(
    redis: Redis, arc: ArcScaler, clock: Clock
) -> None:
    assert sweep(redis, arc, clock, settle_s=1800).plan() == (
        "It goes back when the incident resolves and its queue stays drained 30 min or after 4 h,"
        " unless someone changes it meanwhile."
    )
    assert sweep(redis, arc, clock, after_s=0).plan() == (
        "It goes back when the incident resolves, unless someone changes it meanwhile."
    )


async def test_a_scale_up_of_the_same_field_by_another_incident_takes_its_put_back_on(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """Incident 2 scales what incident 1 scaled: the record is 2's now (it goes back to the value
    before 1's), and 1's summary no longer promises a put-back its thread will never tell."""
    store = IncidentStore(redis, PREFIX)
    await opened(store, "1")
    await opened(store, "2")  # another alert group
    reverts = sweep(redis, arc, clock)
    first = await arc.scale(ScaleRequest(TARGET, 5, "1", "alice"))
    assert first.undo is not None
    await reverts.remember("1", TARGET, first.undo, by="alice")
    await commit_put_back(store, "1", first.undo)
    second = await arc.scale(ScaleRequest(TARGET, 3, "2", "bob"))
    assert second.undo is not None
    record = await reverts.remember("2", TARGET, second.undo, by="bob")
    assert record.undo.before == 0, "what goes back is the value before the first"
    one = await store.get("1")
    assert one is not None and one.put_backs == ()


async def commit_put_back(store: IncidentStore, incident_id: str, undo: Undo) -> None:
    """What the scale-up's own commit records on its incident (`Scaling`)."""
    loaded = await store.load(incident_id)
    assert loaded.incident is not None
    up = made_up(
        "linux", undo.after - (undo.before or 0), "alice", loaded.incident.updated_at, undo
    )
    rid = record_id("linux", undo.field)
    updated = with_scaled(
        loaded.incident, up.model_copy(update={"back": rid, "back_to": undo.before})
    )
    assert await store.commit(Commit(updated, version=loaded.version, thread=loaded.thread))


async def test_a_second_scale_up_after_helm_moved_the_floor_goes_back_to_helms(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """Helm raised the floor between two scale-ups: the put-back ends at Helm's value, never
    below it (the first scale-up's value before is from before Helm's change)."""
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock, after_s=0)
    await scaled(reverts, arc, 5)  # 0 → 5
    kube.write(manager="helm", spec={"minRunners": 20})
    clock.pass_(minutes=10)
    await scaled(reverts, arc, 3)  # 20 → 23
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    await reverts.tick()
    assert min_runners(kube) == 20
    assert await said(redis) == ["Put linux back (the incident resolved): minRunners 23 → 20 (ARC)"]


async def test_a_scale_up_kept_between_two_others_stays(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock, after_s=0)
    await scaled(reverts, arc, 5)  # 0 → 5, to go back
    kept = await arc.scale(ScaleRequest(TARGET, 3, "1", "bob"))  # 5 → 8, kept: not recorded
    assert kept.undo is not None and kept.undo.after == 8
    await scaled(reverts, arc, 2)  # 8 → 10, to go back
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    await reverts.tick()
    assert min_runners(kube) == 8, "bob's kept +3 stays"


async def test_a_change_since_is_left_and_said_once(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    kube.write(manager="helm", spec={"minRunners": 12})
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    await reverts.tick()
    clock.pass_(minutes=5)
    await reverts.tick()
    assert min_runners(kube) == 12, "left as it is"
    (text,) = await said(redis)
    assert text.startswith(
        "Left linux as it is (the incident resolved): minRunners is 12 now, not the 5 set "
        "from Slack; changed by helm at "
    )


async def test_a_transient_failure_is_retried_with_backoff(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    await resolve(redis, clock)
    kube.unavailable = 2
    clock.pass_(seconds=16)
    await reverts.tick()
    assert min_runners(kube) == 5 and not await said(redis), "503: not yet, nothing said"
    clock.pass_(seconds=10)
    await reverts.tick()
    assert kube.unavailable == 1, "not tried again before its backoff (15 to 30 s)"
    clock.pass_(seconds=21)
    await reverts.tick()
    assert kube.unavailable == 0 and min_runners(kube) == 5, "second failure: 30 to 60 s now"
    clock.pass_(seconds=61)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await said(redis) == ["Put linux back (the incident resolved): minRunners 5 → 0 (ARC)"]


async def test_a_permanent_failure_is_reported_once_and_dropped(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    del kube.sets[SET]
    await resolve(redis, clock)
    for _ in range(3):
        clock.pass_(minutes=1)
        await reverts.tick()
    (text,) = await said(redis)
    assert text.startswith("Could not put linux back (the incident resolved): ")
    assert "answered 404" in text and text.endswith("minRunners stays 5")
    assert not await redis.zcard(KEYS.scale_reverts)


async def test_a_put_back_the_admission_policy_denies_is_said_in_its_words_once_and_dropped(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """The API server runs the chart's own policy. The scale-up was made within its ceiling; then
    a helm upgrade dropped the runner type from SCALER_TARGETS, and the policy denies every
    change of its set: the put-back is told once in the policy's words, never as RBAC's, and
    not tried again."""
    named = {"target": "/".join(SET), "cap": 20, "ceiling": 40}
    kube.admission = chart_policy({"linux": named})
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    # ARC's controller moves the set's resourceVersion as it takes the scale-up on: a put-back
    # read before that and written after meets a 409, and is rightly read and written again.
    await eventually(lambda: kube.reacted(SET[1]), what="ARC took the scale-up on")
    kube.admission = chart_policy({"other": {**named, "target": "arc-runners/other"}})
    await resolve(redis, clock)
    for _ in range(3):
        clock.pass_(minutes=1)
        await reverts.tick()
    assert await said(redis) == [
        "Could not put linux back (the incident resolved): The Kubernetes API answered 403 "
        "Forbidden: its admission policy queuepilot.queuepilot-scaler denied the change: "
        "queuepilot's ServiceAccount may not change arc-runners/mt-l-x86iavx512-8-64: no "
        "SCALER_TARGETS entry with a ceiling names this AutoscalingRunnerSet. Its ceilings are "
        "SCALER_TARGETS' `ceiling`s, as the chart rendered them; the bot's own (the same "
        "entries) should match. To go past one, or change a set no entry names, change "
        "SCALER_TARGETS and `helm upgrade`. minRunners stays 5"
    ]
    assert not await redis.zcard(KEYS.scale_reverts), "dropped, not retried"
    put_backs = [p for p in kube.patches if p[2]["spec"] == {"minRunners": 0}]
    assert len(put_backs) == 1 and min_runners(kube) == 5


# An Auto Scaling group as DescribeAutoScalingGroups answers it, but without its DesiredCapacity.
GROUP_WITHOUT_DESIRED = (
    '<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">'
    "<DescribeAutoScalingGroupsResult><AutoScalingGroups><member>"
    "<AutoScalingGroupName>gpu-runners</AutoScalingGroupName><MinSize>0</MinSize>"
    "<MaxSize>8</MaxSize></member></AutoScalingGroups></DescribeAutoScalingGroupsResult>"
    "<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
    "</DescribeAutoScalingGroupsResponse>"
)


@pytest.fixture
def asg_without_desired(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[AsgScaler, list[str]]]:
    """The `aws-asg` scaler against an Auto Scaling API whose answer lacks the field it reads;
    the actions it was asked."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    asked: list[str] = []

    async def answer(request: Request) -> Response:
        asked.extend(parse_qs((await request.body()).decode())["Action"])
        return Response(GROUP_WITHOUT_DESIRED, media_type="text/xml")

    server = serve_in_thread(Starlette(routes=[Route("/", answer, methods=["POST"])]))
    config = Settings(aws_region="us-east-1", aws_endpoint_url=server.url)
    yield AsgScaler(config), asked
    server.stop()


async def test_an_unforeseen_put_back_error_is_tried_as_attempts_then_said_once(
    redis: Redis,
    clock: Clock,
    asg_without_desired: tuple[AsgScaler, list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The group's answer lacks DesiredCapacity (a KeyError in the scaler, no BackendError):
    each look counts an attempt, and once they run out the thread says so, as for a backend
    that kept failing; each attempt's traceback is logged once."""
    scaler, asked = asg_without_desired
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, scaler, clock)
    target = ScaleTarget("linux", "gpu-runners", cap=8)
    await reverts.remember("1", target, Undo(ASG_DESIRED, 2, 7), by="alice")
    await resolve(redis, clock)
    due = scale_revert_records(redis, KEYS)
    for attempt in range(1, MAX_ATTEMPTS):
        clock.pass_(seconds=MAX_BACKOFF_S + 1)
        await reverts.tick()
        record = PutBackDue.load(await due.data(record_id("linux", ASG_DESIRED)))
        assert record is not None and record.attempts == attempt
    assert not await said(redis), "not yet: attempts are left"
    for _ in range(3):
        clock.pass_(seconds=MAX_BACKOFF_S + 1)
        await reverts.tick()
    assert asked == ["DescribeAutoScalingGroups"] * MAX_ATTEMPTS, "then never asked again"
    assert await said(redis) == [
        "Could not put linux back (the incident resolved): AWS Auto Scaling failed "
        "unexpectedly (queuepilot's log says why). desired capacity stays 7"
    ]
    assert not await redis.zcard(KEYS.scale_reverts)
    tracebacks = [r.exc_info[0] for r in caplog.records if r.exc_info]
    assert tracebacks == [KeyError] * MAX_ATTEMPTS, "once an attempt"


async def test_two_replicas_sweeping_at_once_revert_and_say_it_once(
    redis: Redis, redis_url: str, kube: FakeKubeApi, arc: ArcScaler, clock: Clock, tmp_path: Path
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    first = sweep(redis, arc, clock)
    await scaled(first, arc)
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    other = Redis.from_url(redis_url, decode_responses=True)
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    second = sweep(other, ArcScaler(Settings(), kube_access(str(path), {})), clock)
    try:
        await asyncio.gather(first.tick(), second.tick(), first.tick(), second.tick())
    finally:
        await other.aclose()
    # Written once (a PATCH refused 409 because ARC's controller wrote the set between the
    # sweeper's GET and its PATCH is read again and sent again: not a second revert).
    reverts = [p for p in kube.written if p[1]["spec"] == {"minRunners": 0}]
    assert len(reverts) == 1
    assert len(await said(redis)) == 1


async def test_redis_going_away_is_waited_out(
    kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """The sweep logs and returns while Redis is away (its records are in Redis: a restart
    without persistence loses them, and those scale-ups stay); once Redis is back, scale-ups
    recorded from then on are put back."""
    server = RedisServer()
    server.start()
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        await opened(IncidentStore(redis, PREFIX))
        reverts = sweep(redis, arc, clock)
        await scaled(reverts, arc)
        server.stop()
        clock.pass_(hours=5)
        await reverts.tick()  # no exception: Redis is away
        assert min_runners(kube) == 5
        server.start()
        await eventually(redis.ping, what="Redis back")
        await opened(IncidentStore(redis, PREFIX))
        await scaled(reverts, arc, 2)  # 5 → 7, recorded with 5 as the value before
        clock.pass_(hours=5)
        await reverts.tick()
        assert min_runners(kube) == 5
        assert len(await said(redis)) == 1
    finally:
        await redis.aclose()
        server.stop()


@given(st.text(max_size=300) | st.builds(json.dumps, json_values))
def test_a_stored_record_is_read_back_or_refused(text: str) -> None:
    record = PutBackDue.load(text)
    assert record is None or PutBackDue.load(record.dump()) == record


@pytest.mark.parametrize(
    "garbage", [{"scaled_at": "soon"}, {"attempts": "many"}, {"target": {"cap": None}}]
)
async def test_a_record_with_garbage_in_a_field_is_logged_and_dropped(
    redis: Redis,
    kube: FakeKubeApi,
    arc: ArcScaler,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
    garbage: dict[str, Any],
) -> None:
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    await scaled(reverts, arc)
    due = scale_revert_records(redis, KEYS)
    rid = record_id("linux", "minRunners")
    stored = json.loads(await due.data(rid) or "")
    target = {**stored["target"], **garbage.pop("target", {})}
    await due.schedule(
        rid, clock().timestamp(), json.dumps({**stored, **garbage, "target": target})
    )
    clock.pass_(hours=5)
    await reverts.tick()
    assert "record unreadable or gone; dropped" in caplog.text
    assert not await redis.zcard(KEYS.scale_reverts), "not looked at again"
    assert min_runners(kube) == 5, "nothing put back on its word"


# -- scale-ups made from an early warning -------------------------------------------------


def warning_sweep(
    redis: Redis, arc: ArcScaler, clock: Clock, after_s: int = 4 * 3600
) -> tuple[ScaleReverts, WarningStore]:
    warnings = WarningStore(redis, KEYS)
    config = Settings(scale_revert_after=after_s, backend_timeout_seconds=2, scale_revert_settle=0)
    store = IncidentStore(redis, PREFIX)
    reverts = ScaleReverts(redis, KEYS, store, arc, config=config, clock=clock, warnings=warnings)
    return reverts, warnings


async def warned_and_scaled(
    reverts: ScaleReverts, warnings: WarningStore, arc: ArcScaler, clock: Clock
) -> WarningState:
    """A standing warning for `linux`, and +5 runners scaled from it by alice."""
    text = "linux: queue building, 9 queued and +1.4/min; at this rate the alert fires in ~11 min"
    state = WarningState.raised("linux", "C1", text, clock().timestamp(), scalable=True)
    assert await warnings.save(state)
    result = await arc.scale(ScaleRequest(TARGET, 5, "", "alice"))
    assert result.undo is not None
    await reverts.remember("", TARGET, result.undo, by="alice", warning=state.uid)
    return state


async def moved(warnings: WarningStore, clock: Clock, **fields: object) -> None:
    """The upkeep's next decision on the warning."""
    state = await warnings.get("linux")
    assert state is not None
    assert await warnings.save(state.changed(clock().timestamp(), **fields))


async def shown_scaled(warnings: WarningStore) -> str:
    state = await warnings.get("linux")
    assert state is not None
    return scaled_words(state.scaled)


async def test_a_warnings_scale_up_stays_through_a_pause_and_goes_back_once_it_is_over(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    reverts, warnings = warning_sweep(redis, arc, clock)
    await warned_and_scaled(reverts, warnings, arc, clock)
    clock.pass_(minutes=1)
    await reverts.tick()
    assert min_runners(kube) == 5, "the warning stands"
    await moved(warnings, clock, phase=Phase.CLEARED)
    clock.pass_(minutes=10)
    await reverts.tick()
    assert min_runners(kube) == 5, "cleared 10 min ago: the queue may build again"
    await moved(warnings, clock, phase=Phase.ACTIVE)  # it did
    clock.pass_(minutes=20)
    await reverts.tick()
    assert min_runners(kube) == 5
    await moved(warnings, clock, phase=Phase.CLEARED)
    clock.pass_(minutes=16)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await shown_scaled(warnings) == (
        "Put linux back (the queue stopped building): minRunners 5 → 0 (ARC)."
    )
    assert not await redis.zcard(KEYS.scale_reverts), "done with"


async def test_the_warnings_message_no_longer_says_when_it_goes_back_once_it_went_back(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    reverts, warnings = warning_sweep(redis, arc, clock)
    await warned_and_scaled(reverts, warnings, arc, clock)
    plan = reverts.plan(warning=True)
    line = "alice scaled linux by +5 at 10:00 UTC: minRunners 0 → 5 (ARC)."
    rid = record_id("linux", "minRunners")
    scaled = (ScaleUp(runner_type="linux", added=5, by="alice", back=rid, said=line, fate=plan),)
    await moved(warnings, clock, phase=Phase.CLEARED, scaled=scaled)
    clock.pass_(minutes=16)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await shown_scaled(warnings) == (
        "alice scaled linux by +5 at 10:00 UTC: minRunners 0 → 5 (ARC). "
        "Put linux back (the queue stopped building): minRunners 5 → 0 (ARC)."
    ), "the put-back's sentence in place of the plan's, which stopped being true"


@given(ids=st.lists(st.sampled_from(["x|minRunners", "x|maxRunners", ""]), max_size=4))
def test_a_put_back_is_told_once_in_place_of_its_own_plan(ids: list[str]) -> None:
    plan = "It goes back when its queue has stopped building, unless someone changes it."
    scaled = [
        ScaleUp(runner_type="x", added=1, by="", back=rid, said=f"{n} scaled x.", fate=plan)
        for n, rid in enumerate(ids)
    ]
    state = WarningState.raised("x", "C1", "building", 1.0).changed(2.0, scaled=tuple(scaled))
    told = fate_told(state, "x|minRunners", "Put x back.")
    assert scaled_words(told).count("Put x back.") == 1
    assert [s.said for s in told if s.said] == [s.said for s in scaled], "what was scaled is kept"
    for before, after in zip(scaled, told, strict=False):
        assert after.fate == before.fate or before.back == "x|minRunners"
        assert plan not in after.fate or before.back != "x|minRunners"


async def test_each_scale_up_from_a_warning_tells_its_own_put_back_on_the_message(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """maxRunners raised, then minRunners, from one warning: once the queue stopped building for
    15 min, both go back (telling the first does not restart the wait of the second), and each
    line on the warning's message says what became of its own scale-up."""
    reverts, warnings = warning_sweep(redis, arc, clock)
    text = "linux: queue building, 9 jobs queued; at this rate the alert fires in ~2 min"
    state = WarningState.raised("linux", "C1", text, clock().timestamp(), scalable=True)
    assert await warnings.save(state)
    core = action_core(
        redis,
        IncidentStore(redis, PREFIX),
        scaler=arc,
        targets={"linux": TARGET},
        scale_allowed=(USER,),
        clock=clock,
        reverts=reverts,
    )
    core.scaling.config = core.scaling.config.model_copy(update={"scale_cooldown_seconds": 0})
    kube.write(manager="manager", status={"currentRunners": 120})  # at its maximum
    for delta, raise_maximum in ((10, True), (5, False)):
        outcome = await core.warnings.scale(
            Actor(USER, "alice"), "linux", state.uid, delta, raise_maximum=raise_maximum
        )
        assert outcome.ok, outcome.message
        clock.pass_(minutes=1)
    plan = reverts.plan(warning=True)
    shown = warning_text(await warnings.get("linux"))
    assert shown.count(plan) == 2, shown
    await moved(warnings, clock, phase=Phase.CLEARED)
    clock.pass_(minutes=16)
    await reverts.tick()
    assert (kube.sets[SET]["spec"]["minRunners"], kube.sets[SET]["spec"]["maxRunners"]) == (0, 120)
    gone = "Put linux back (the queue stopped building)"
    ceiling, floor = warning_text(await warnings.get("linux")).split(" · ")
    assert ceiling.endswith(f"(ARC). {gone}: maxRunners 130 → 120 (ARC)."), ceiling
    assert floor.startswith("alice scaled linux by +5 at ")
    assert floor.endswith(f"(ARC). {gone}: minRunners 5 → 0 (ARC)."), floor


def warning_text(state: WarningState | None) -> str:
    """What the warning's message says of its scale-ups."""
    assert state is not None
    blocks = render_warning(state).blocks
    contexts = [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]
    [said] = [text for text in contexts if text.startswith("↗️")]
    return said


async def test_a_scale_up_asked_from_a_warning_whose_alert_fired_goes_on_to_the_incident(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """The modal was opened from the warning; the alert fired before it was submitted: the
    runners are added all the same, as the incident's scale-up, and the answer says why."""
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    warnings = WarningStore(redis, KEYS)
    text = "linux: queue building, 9 jobs queued; at this rate the alert fires in ~2 min"
    state = WarningState.raised("linux", "C1", text, clock().timestamp(), scalable=True)
    assert await warnings.save(state)
    await moved(warnings, clock, phase=Phase.FOLDED, incident_id="1")
    core = action_core(
        redis, store, scaler=arc, targets={"linux": TARGET}, scale_allowed=(USER,), clock=clock
    )
    assert core.warnings is not None
    outcome = await core.warnings.scale(Actor(USER, "alice"), "linux", state.uid, 5)
    assert outcome.ok, outcome.message
    assert outcome.message.startswith(
        "The alert fired meanwhile: incident 1 carries the warning on, and the scale-up is its. "
        "You scaled `linux` by +5"
    )
    assert min_runners(kube) == 5
    [scaled] = [e for e in await store.events("1") if e.kind == "scaled"]
    assert scaled.text.startswith("Scaled linux by +5")
    assert scaled.scale == ScaleUp(
        runner_type="linux",
        added=5,
        by="alice",
        at=scaled.at,
        field="minRunners",
        before=0,
        after=5,
    )


async def test_a_warnings_scale_up_is_taken_on_by_the_incident_and_put_back_when_it_resolves(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    reverts, warnings = warning_sweep(redis, arc, clock)
    made_at = clock()
    await warned_and_scaled(reverts, warnings, arc, clock)
    await moved(warnings, clock, phase=Phase.FOLDED, incident_id="1")  # the alert fired
    for _ in range(3):
        clock.pass_(seconds=16)
        await reverts.tick()
    assert min_runners(kube) == 5, "the incident is open"
    taken = [e for e in await store.events("1") if e.kind == "scaled"]
    assert [e.text for e in taken] == [
        "Took on the early warning's scale-up of linux by alice (minRunners 0 → 5)"
    ], "said once, in the incident's thread (whose reply says when it goes back)"
    # Made when the warning scaled, before the incident took it on; its record puts it back to
    # 0, 4 h after it at the latest.
    assert taken[0].scale == ScaleUp(
        runner_type="linux",
        added=5,
        by="alice",
        at=made_at,
        field="minRunners",
        before=0,
        after=5,
        back="linux|minRunners",
        back_to=0,
        back_by=made_at + timedelta(hours=4),
    )
    assert taken[0].at > made_at
    assert await shown_scaled(warnings) == "Incident 1 took it on."
    incident = await store.get("1")
    assert incident is not None
    assert [(p.runner_type, p.field, p.before, p.after) for p in incident.put_backs] == [
        ("linux", "minRunners", 0, 5)
    ], "the summary will say it goes back"
    root = json.dumps(render_root(incident, now=clock()).blocks, ensure_ascii=False)
    assert "• <!date^" in root and "Took on the early warning's scale-up of linux by alice" in root
    await moved(warnings, clock, phase=Phase.CLEARED)  # the folded warning's end changes nothing
    clock.pass_(minutes=30)
    await reverts.tick()
    assert min_runners(kube) == 5
    await resolve(redis, clock)
    clock.pass_(seconds=16)
    await reverts.tick()
    assert min_runners(kube) == 0
    assert await said(redis) == ["Put linux back (the incident resolved): minRunners 5 → 0 (ARC)"]
    gone = await store.get("1")
    assert gone is not None and gone.put_backs == (), "put back: nothing left to say"


@asynccontextmanager
async def writes_refused(redis: Redis, user: str) -> AsyncIterator[None]:
    """Redis answers `user`'s writes NOPERM inside the block, as it does for a user whose ACL
    was narrowed; its reads still work."""
    await redis.execute_command("ACL SETUSER", user, "resetkeys", "%R~*")
    try:
        yield
    finally:
        await redis.execute_command("ACL SETUSER", user, "~*")


@pytest.mark.parametrize("refused", ["warning", "incident"])
async def test_a_hand_over_cut_short_by_redis_is_told_once(
    redis: Redis, redis_url: str, kube: FakeKubeApi, arc: ArcScaler, clock: Clock, refused: str
) -> None:
    """Redis refuses a write in the middle of the hand-over (the warning's line, or the
    incident's reply): a later look finishes it, and the incident has one "Took on" and one
    scale-up of +5 on record, so its advice counts +5."""
    user = "hand-over"
    await redis.execute_command("ACL SETUSER", user, "on", "nopass", "~*", "&*", "+@all")
    limited = Redis.from_url(redis_url, username=user, decode_responses=True)
    try:
        store = IncidentStore(redis, PREFIX)
        await opened(store)
        warnings = WarningStore(limited if refused == "warning" else redis, KEYS)
        told = IncidentStore(limited if refused == "incident" else redis, PREFIX)
        config = Settings(backend_timeout_seconds=2, scale_revert_settle=0)
        reverts = ScaleReverts(
            redis, KEYS, told, arc, config=config, clock=clock, warnings=warnings
        )
        await warned_and_scaled(reverts, warnings, arc, clock)
        await moved(warnings, clock, phase=Phase.FOLDED, incident_id="1")
        async with writes_refused(redis, user):
            clock.pass_(seconds=16)
            await reverts.tick()
        assert await shown_scaled(warnings) != "Incident 1 took it on.", "cut short"
        for _ in range(3):
            clock.pass_(seconds=40)  # past the lease of the look that was cut short
            await reverts.tick()
    finally:
        await limited.aclose()
        await redis.acl_deluser(user)
    taken = [e for e in await store.events("1") if e.kind == "scaled"]
    assert [(e.text, e.scale and e.scale.added) for e in taken] == [
        ("Took on the early warning's scale-up of linux by alice (minRunners 0 → 5)", 5)
    ]
    assert await shown_scaled(WarningStore(redis, KEYS)) == "Incident 1 took it on."
    incident = await store.get("1")
    assert incident is not None
    assert [(p.before, p.after) for p in incident.put_backs] == [(0, 5)]
    assert min_runners(kube) == 5, "the incident is open: it stays"


@pytest.mark.parametrize(
    ("ending", "why"),
    [
        ("dismissed", "the early warning was dismissed and did not come back"),
        ("replaced", "its early warning ended"),
        ("time", "4 h after the scale-up"),
    ],
)
async def test_a_warnings_scale_up_goes_back_when_the_warning_is_gone_or_its_time_is_up(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock, ending: str, why: str
) -> None:
    reverts, warnings = warning_sweep(redis, arc, clock)
    state = await warned_and_scaled(reverts, warnings, arc, clock)
    if ending == "dismissed":
        until = clock().timestamp() + 3600
        await moved(warnings, clock, phase=Phase.DISMISSED, by="bob", until=until)
        clock.pass_(minutes=59)
        await reverts.tick()
        assert min_runners(kube) == 5, "dismissed for an hour: it may still be needed"
        clock.pass_(minutes=2)
    elif ending == "replaced":
        await moved(warnings, clock, phase=Phase.CLEARED)
        clock.pass_(minutes=16)
        newer = WarningState.raised("linux", "C1", state.text, clock().timestamp())
        assert await warnings.save(newer)
    else:
        clock.pass_(hours=4)
    await reverts.tick()
    assert min_runners(kube) == 0
    shown = await shown_scaled(warnings)
    if ending == "replaced":
        assert shown == "", "a newer warning's message is not the place"
    else:
        assert shown == f"Put linux back ({why}): minRunners 5 → 0 (ARC)."


# -- end to end: from Slack, through the bot's own scheduler --------------------------------


def arc_settings(settings_for: Any, kube: FakeKubeApi, tmp_path: Path, **extra: Any) -> Any:
    values = {
        "scaler_backend": "arc",
        "scaler_kubeconfig": str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        "scaler_targets": json.dumps(
            {RUNNER: {"target": "arc-runners/mt-l-x86iavx512-8-64", "cap": 20, "ceiling": 150}}
        ),
        "scale_allowed_users": USER,
    }
    return settings_for(**{**values, **extra})


async def test_a_scale_up_from_slack_is_put_back_when_the_incident_is_resolved(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """No live numbers here (the `alert` backend): it goes back the settle time after the
    resolve."""
    settings = arc_settings(settings_for, kube, tmp_path, scale_revert_settle="2s")
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +5"))
        await eventually(lambda: min_runners(kube) == 5, what="scaled")
        await eventually(
            lambda: any(
                "It goes back when the incident resolves and its queue stays drained 2 s or "
                "after 4 h" in t
                for t in thread_texts(slack, root.ts)
            ),
            what="the scale-up's reply says when it goes back",
        )
        assert not any("It goes back" in t for t in ephemeral_texts(slack)), "said once"
        kube.write(manager="manager", status={"currentRunners": 45})
        await post_event(running.http, slash("resolve 1"))
        await eventually(lambda: min_runners(kube) == 0, what="put back")
        await eventually(
            lambda: any(
                "Put linux.g5.4xlarge.nvidia.gpu back (the incident resolved and its queue "
                "stayed drained 2 s): minRunners 5 → 0" in t
                for t in thread_texts(slack, root.ts)
            ),
            what="said in the thread",
        )


async def test_the_modal_warns_of_helm_and_a_kept_scale_up_stays(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    async with run_bot(arc_settings(settings_for, kube, tmp_path)) as running:
        root = await open_incident(running, slack)
        assert (await click(running, root, "incident_scale")).status_code == 200
        form = (
            await eventually(
                lambda: [v for v in slack.emulator.views() if "Now:" in json.dumps(v["blocks"])],
                what="the form with capacity",
            )
        )[-1]
        blocks = json.dumps(form["blocks"], ensure_ascii=False)
        assert (
            "managed by Helm (release mt-l-x86iavx512-8-64 in arc-runners, marked by its "
            "meta.helm.sh/release-name annotation): the next `helm upgrade` puts the chart's "
            "values back" in blocks
        )
        assert "Keep it after the incident" in blocks
        assert (
            "put back when the incident resolves and its queue stays drained 30 min or after 4 h"
            in blocks
        )
        values = {
            **form_values(RUNNER, "5"),
            "keep": {"value": {"type": "checkboxes", "selected_options": [{"value": "keep"}]}},
        }
        step = await post_event(running.http, view_submission(form, values))
        confirm = step.json()["view"]
        shown = json.dumps(confirm["blocks"], ensure_ascii=False)
        assert "Kept after the incident, as you chose." in shown
        assert "managed by Helm (release mt-l-x86iavx512-8-64" in shown
        await post_event(running.http, view_submission({**confirm, "id": form["id"]}, {}))
        await eventually(lambda: min_runners(kube) == 5, what="scaled")
        await eventually(
            lambda: any(
                "Kept after the incident, as asked" in t for t in thread_texts(slack, root.ts)
            ),
            what="the reply says it stays",
        )
        prefix = running.bot.settings.redis_prefix
        assert not await running.bot.redis.zcard(Keys(prefix).scale_reverts), "nothing recorded"


async def test_queue_scale_keep_stays_after_the_incident_resolves(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    async with run_bot(arc_settings(settings_for, kube, tmp_path)) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +5 keep"))
        await eventually(lambda: min_runners(kube) == 5, what="scaled")
        await eventually(
            lambda: any(
                "Kept after the incident, as asked" in t for t in thread_texts(slack, root.ts)
            ),
            what="the reply says it stays",
        )
        await post_event(running.http, slash("resolve 1"))
        await eventually(
            lambda: any("resolved" in t.lower() for t in thread_texts(slack, root.ts)[-1:]),
            what="the summary",
        )
        prefix = running.bot.settings.redis_prefix
        assert not await running.bot.redis.zcard(Keys(prefix).scale_reverts), "nothing recorded"
    assert min_runners(kube) == 5


@pytest.mark.parametrize("first", ["minRunners", "maxRunners"])
async def test_two_scale_ups_of_one_set_go_back_floor_first_whatever_their_order(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock, first: str
) -> None:
    """maxRunners 120 → 130 and minRunners 0 → 125, made in either order, both due when the
    incident resolves: the floor goes first, so maxRunners comes back to 120 with nothing in
    its way, and the thread says both went back whole."""
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    for field in (first, *({"minRunners", "maxRunners"} - {first})):
        if field == "maxRunners":
            kube.write(manager="manager", status={"currentRunners": 120})  # at its maximum
        delta = 10 if field == "maxRunners" else 125
        if field == "minRunners" and first == "minRunners":
            delta = 100  # below the 120 maximum it has then
        result = await arc.scale(
            ScaleRequest(TARGET, delta, "1", "alice", raise_maximum=field == "maxRunners")
        )
        assert result.undo is not None
        await reverts.remember("1", TARGET, result.undo, by="alice")
        clock.pass_(seconds=1)
    kube.write(manager="manager", status={"currentRunners": 40})
    await resolve(redis, clock)
    clock.pass_(seconds=15)
    await reverts.tick()
    spec = kube.sets[SET]["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (0, 120), "both in one look"
    (text,) = await said(redis)  # one reply for the incident's put-backs, its reason once
    head, floor, ceiling = text.replace("): ", "; ", 1).split("; ")
    assert head == "Put linux back (the incident resolved"
    assert floor.startswith("minRunners ") and ceiling == "maxRunners 130 → 120 (ARC)"


async def test_a_put_back_stopped_by_a_kept_floor_says_what_it_left(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """The issue's sequence through the sweep: maxRunners raised, then a colleague raises
    minRunners above the old maximum by hand; the put-back stops at that floor and says so,
    never "put back"."""
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    kube.write(manager="manager", status={"currentRunners": 120})
    result = await arc.scale(ScaleRequest(TARGET, 10, "1", "alice", raise_maximum=True))
    assert result.undo is not None
    await reverts.remember("1", TARGET, result.undo, by="alice")
    kube.write(manager="kubectl", spec={"minRunners": 125})
    await resolve(redis, clock)
    clock.pass_(seconds=15)
    await reverts.tick()
    spec = kube.sets[SET]["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (125, 125)
    assert await said(redis) == [
        "Put linux back only part of the way (the incident resolved): maxRunners 130 → 125 "
        "(ARC); maxRunners stays 125, not 120: minRunners is 125 now, and ARC's listener does "
        "not run with maxRunners below minRunners"
    ]


async def test_a_ceiling_due_before_our_floor_waits_for_it_and_goes_back_whole(
    redis: Redis, kube: FakeKubeApi, arc: ArcScaler, clock: Clock
) -> None:
    """maxRunners 120 → 130, then an hour later minRunners 0 → 125, the incident still open:
    four hours after the first, the ceiling is due but our floor is not. It waits for the floor
    (going back part of the way would leave maxRunners at 125 for good), and an hour later both
    are back: (0, 120), each said whole."""
    await opened(IncidentStore(redis, PREFIX))
    reverts = sweep(redis, arc, clock)
    kube.write(manager="manager", status={"currentRunners": 120})
    ceiling = await arc.scale(ScaleRequest(TARGET, 10, "1", "alice", raise_maximum=True))
    assert ceiling.undo is not None
    await reverts.remember("1", TARGET, ceiling.undo, by="alice")
    clock.pass_(seconds=3600)
    floor = await arc.scale(ScaleRequest(TARGET, 125, "1", "alice"))
    assert floor.undo is not None and floor.undo.field == "minRunners"
    await reverts.remember("1", TARGET, floor.undo, by="alice")
    clock.pass_(seconds=3 * 3600 + 15)
    await reverts.tick()  # the ceiling's four hours are up; the floor has one to go
    spec = kube.sets[SET]["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (125, 130)
    assert await said(redis) == []
    for _ in range(241):  # an hour of looks, 15 s apart
        clock.pass_(seconds=15)
        await reverts.tick()
    spec = kube.sets[SET]["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (0, 120)
    (text,) = await said(redis)  # the floor, then the ceiling in the same look: one reply
    assert text == (
        "Put linux back (4 h after the scale-up): minRunners 125 → 0 (ARC); "
        "maxRunners 130 → 120 (ARC)"
    )


# What the incident takes on from its early warning's scale-ups: each as it was made (a
# person's stays theirs, the pilot's its own, with its Undo), one still followed unverified
# until its follow-up decides.


def judged(at: datetime) -> Judgement:
    return Judgement(at=at, queued=40.0, runners=10, needed=10, registered=40.0)


async def test_a_pilot_act_still_followed_when_the_alert_fires_stays_its_own_in_the_incident(
    redis: Redis, arc: ArcScaler, clock: Clock
) -> None:
    """The pilot scaled from the warning; its runners are followed for 10 min; the alert fires
    after 2. The incident takes the act on as the pilot's own, still followed (a failure must
    still pause it): its runners count as capacity on their way, so a next act adds only what
    the readings want beyond them, never the same need twice."""
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    reverts, warnings = warning_sweep(redis, arc, clock)
    state = WarningState.raised("linux", "C1", "linux: queue building", clock().timestamp())
    result = await arc.scale(ScaleRequest(TARGET, 5, "", PILOT))
    assert result.undo is not None
    record = await reverts.remember("", TARGET, result.undo, by=PILOT, warning=state.uid)
    done = made_up("linux", 5, PILOT, clock(), result.undo, pilot=True)
    entry = scaled_from("queuepilot (policy) scaled linux by +5.", "", record.id, done, None, 600)
    assert await warnings.save(state.with_scaled((entry,)))
    clock.pass_(minutes=2)
    await moved(warnings, clock, phase=Phase.FOLDED, incident_id="1")  # the alert fired
    for _ in range(3):
        clock.pass_(seconds=16)
        await reverts.tick()
    incident = await store.get("1")
    assert incident is not None
    [act] = pilot_acts(incident, "linux")
    assert act.scale is not None and act.scale.came is None
    mine = scale_ups(incident, "linux")
    pending = [s.followed for s in mine]
    assert pending == [True], "still followed in the incident"
    # Past its period, within the act's boot and its 10-minute follow-up: the readings desired
    # 50 runners through the hold; 40 run and its 5 are on their way (the incident's view
    # counts them).
    policy = Policy(up_to=60, step=20, hold_s=60, cooldown_s=300)
    now = clock() + timedelta(seconds=policy.period_s)
    hold = Hold(
        since=now - timedelta(minutes=2), asks=((now - timedelta(minutes=2), 50), (now, 50))
    )
    decided = verdict(policy, hold, added(judged(now), 5), mine, now)
    assert decided == Verdict(5, "+5 wanted for 2 min (45 → 50), within up_to 60"), decided


async def alice_then_the_pilot(
    redis: Redis, arc: ArcScaler, clock: Clock, *, undo_the_pilot: bool = False
) -> tuple[Incident, Undo]:
    """alice adds 5 from linux's warning, the pilot 3 more (its record continues alice's), each
    said on the warning's message as they are; `undo_the_pilot`: the pilot's act is undone
    there. The alert fires, the warning folds, and incident 1 takes the scale-ups on: the
    incident, and the pilot's act's undo."""
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    reverts, warnings = warning_sweep(redis, arc, clock)
    state = WarningState.raised("linux", "C1", "linux: queue building", clock().timestamp())
    assert await warnings.save(state)
    undo = None
    for by, delta in (("alice", 5), (PILOT, 3)):
        result = await arc.scale(ScaleRequest(TARGET, delta, "", by))
        assert result.undo is not None
        undo = result.undo
        record = await reverts.remember("", TARGET, undo, by=by, warning=state.uid)
        done = reverts.going_back(
            made_up("linux", delta, by, clock(), undo, pilot=by == PILOT), record
        )
        entry = scaled_from(f"{by} scaled linux by +{delta}.", "", record.id, done, None, 600)
        assert await warnings.save_fresh(
            "linux", lambda s, e=entry: s.with_scaled((*s.scaled, e)) if s else None
        )
        clock.pass_(minutes=1)
    assert undo is not None
    if undo_the_pilot:  # its Undo on the message: back to where alice's scale-up left it
        assert (await reverts.undo_now(TARGET, undo)).done
        assert await warnings.save_fresh(
            "linux",
            lambda s: (
                s.with_scaled(tuple(undone(u) if u.pilot else u for u in s.scaled)) if s else None
            ),
        )
    await moved(warnings, clock, phase=Phase.FOLDED, incident_id="1")
    for _ in range(3):
        clock.pass_(seconds=16)
        await reverts.tick()
    incident = await store.get("1")
    assert incident is not None
    return incident, undo


async def test_a_persons_scale_up_taken_on_with_the_pilots_is_not_the_pilots_to_undo(
    redis: Redis, arc: ArcScaler, clock: Clock
) -> None:
    """alice added 5 from the warning, the pilot 3 more (the record continues alice's). The
    incident takes on one scale-up of 8: the pilot's Undo must not put alice's 5 back, nor its
    up_to count them."""
    incident, _ = await alice_then_the_pilot(redis, arc, clock)
    acts = pilot_acts(incident, "linux")
    assert [(a.scale.added, a.scale.before) for a in acts if a.scale] == [(3, 5)], acts
    taken = [e.scale for e in incident.actions if e.scale and not e.scale.pilot]
    assert [(d.by, d.added, d.before) for d in taken] == [("alice", 5, 0)], taken


async def test_an_undone_act_taken_on_from_the_warning_says_so_and_offers_no_undo(
    redis: Redis, arc: ArcScaler, clock: Clock
) -> None:
    """alice added 5 from the warning, the pilot 3 more, and someone undid the pilot's act there
    (linux back to 5). The incident takes both on: the pilot's reply in the thread says it was
    undone and has no Undo to click, and alice's 5 still go back at the resolve, from 5."""
    incident, undo = await alice_then_the_pilot(redis, arc, clock, undo_the_pilot=True)
    [act] = pilot_acts(incident, "linux")
    assert act.scale is not None and act.scale.undone
    reply = render_event(incident, act)
    assert ", undone)" in reply.text and "pilot_undo" not in json.dumps(reply.blocks), reply
    [going] = incident.put_backs
    assert (going.back_to, going.back_from) == (undo.before - 5, undo.before), going
