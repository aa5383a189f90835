"""The simulated CI fleet: its queue, and the real protocols it speaks to the bot's backends.

The bot's own production clients are pointed at the fleet over HTTP (the `prometheus` metrics
backend, the `hud` jobs, the `alertmanager` silencer, the `arc` scaler, the Grafana payload
parser), so a
drift between what the fleet serves and what the bot expects fails here, not in a demo.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.kube import kube_access
from bot.backends.metrics.hud import HudMetrics
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.backends.silence import SilenceRequest, alertmanager_silencer
from bot.config import Settings
from bot.domain.alerting.alerts import Matcher, parse_notification
from bot.domain.alerting.delivery import facts_of
from bot.domain.queue_cost.jobs import Arrivals, Trigger, jobs_view, surging
from bot.domain.scale.scaling import ScaleTarget
from sandbox.fleet import (
    DEMO_BURSTS,
    DEMO_TYPES,
    Burst,
    Fleet,
    RunnerTypeSpec,
    Stall,
    minutes,
)
from sandbox.fleet_alerts import (
    GPU_RULE_LABELS,
    RULE_UID,
    Notification,
    QueueRule,
    RuleConfig,
    grafana_payload,
)
from sandbox.fleet_api import STARTUP_BUCKETS, FleetApi, FleetApiConfig, runner_set_name
from sandbox.serve import serve_in_thread
from sandbox.stack import SCALE_SETS
from tests.support.running import eventually
from tests.support.servers import wait_until


class Clock:
    """The fleet's clock, moved by the test: simulated minutes pass at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def to_minute(self, minute: float) -> None:
        self.now = minute * 60


def drained_at(fleet: Fleet, clock: Clock, *, scale_at: float | None = None) -> float:
    """The first minute after the burst at which linux.2xlarge has no queue."""
    peak = 0
    for minute in range(0, 120):
        clock.to_minute(minute)
        if scale_at is not None and minute == scale_at:
            fleet.set_bounds("linux.2xlarge", 16, 30)  # maxRunners 20 → 30
        queued = fleet.reading()["linux.2xlarge"].queued
        peak = max(peak, queued)
        if minute > 16 and queued == 0:
            assert peak >= 25, f"the burst should queue, peaked at {peak}"
            return minute
    raise AssertionError("never drained")


def test_the_burst_queues_one_type_and_scaling_drains_it_sooner() -> None:
    clock = Clock()
    alone = drained_at(Fleet(speed=1, clock=clock), clock)
    clock = Clock()
    scaled = drained_at(Fleet(speed=1, clock=clock), clock, scale_at=12)
    assert 30 <= alone <= 70
    assert scaled < alone - 10
    # The other runner types never queue: the alert is about one type.
    clock = Clock()
    fleet = Fleet(speed=1, clock=clock)
    for minute in range(0, 60, 5):
        clock.to_minute(minute)
        others = {n: r.queued for n, r in fleet.reading().items() if n != "linux.2xlarge"}
        assert max(others.values()) <= 2, (minute, others)


def test_scaled_runners_boot_before_they_take_jobs() -> None:
    clock = Clock()
    spec = RunnerTypeSpec(
        "t", arrival_per_min=0, job_minutes=5, boot_minutes=3, minimum=0, maximum=1
    )
    fleet = Fleet([spec], [Burst("t", 0, 1, 20)], speed=1, clock=clock)  # ~20 jobs
    clock.to_minute(1)
    before = fleet.reading()["t"]
    assert fleet.set_bounds("t", 0, 5)
    assert not fleet.set_bounds("t", 0, 5), "the same bounds again change nothing"
    asked = fleet.reading()["t"]
    assert (asked.registered + asked.booting, asked.maximum, asked.desired) == (5, 5, 5)
    clock.to_minute(2.5)
    assert fleet.reading()["t"].registered == before.registered  # still booting
    clock.to_minute(4.5)
    booted = fleet.reading()["t"]
    assert booted.registered == 5 and booted.busy == 5
    # The ceiling put back: idle runners go as their jobs end; none is stopped mid-job.
    fleet.set_bounds("t", 0, 1)
    assert fleet.reading()["t"].registered == 5
    clock.to_minute(30)
    assert fleet.reading()["t"].registered <= 1


def test_a_floor_above_the_load_keeps_idle_runners_and_an_absent_ceiling_is_unbounded() -> None:
    clock = Clock()
    spec = RunnerTypeSpec(
        "t", arrival_per_min=0, job_minutes=5, boot_minutes=1, minimum=0, maximum=2
    )
    fleet = Fleet([spec], [Burst("t", 0, 1, 30)], speed=1, clock=clock)
    clock.to_minute(1)
    fleet.set_bounds("t", 3, None)  # ARC: no maxRunners is no ceiling
    clock.to_minute(3)
    read = fleet.reading()["t"]
    assert read.maximum == 2**31 - 1 and read.registered > 20
    clock.to_minute(60)
    assert fleet.reading()["t"].registered == 3, "the floor stays warm once the queue is gone"


def test_a_ceiling_below_the_floor_stops_the_listener_until_the_spec_is_valid() -> None:
    """ARC's listener refuses a config with maxRunners below minRunners: no job is started and
    no runner asked for while the spec says so; a valid spec brings it back."""
    clock = Clock()
    spec = RunnerTypeSpec(
        "t", arrival_per_min=0, job_minutes=5, boot_minutes=1, minimum=0, maximum=4
    )
    fleet = Fleet([spec], [Burst("t", 0, 10, 30)], speed=1, clock=clock)
    clock.to_minute(1)
    assert fleet.set_bounds("t", 6, 4)  # minRunners 6, maxRunners 4
    clock.to_minute(8)
    stopped = fleet.reading(window_min=5)["t"]
    assert stopped.started_per_min == 0 and stopped.queued > 0
    assert stopped.registered + stopped.booting <= 4, "nothing asked for past the old bounds"
    fleet.set_bounds("t", 6, 6)
    clock.to_minute(12)
    assert fleet.reading()["t"].busy == 6, "running again: its runners asked for, and busy"


def test_a_stalled_listener_freezes_its_assigned_jobs_while_runners_sit_idle() -> None:
    """What ARC shows when its listener stops acting on jobs: `gha_assigned_jobs` frozen, no
    runner asked for, jobs waiting while runners that finished theirs sit idle."""
    clock = Clock()
    fleet = Fleet(stalls=[Stall("linux.2xlarge", 3.0)], speed=1, clock=clock)
    clock.to_minute(3)
    frozen = fleet.reading()["linux.2xlarge"].assigned
    clock.to_minute(12)
    later = fleet.reading(window_min=5)["linux.2xlarge"]
    assert later.assigned == frozen
    assert later.idle > 0 and later.queued > 20 and later.started_per_min == 0
    healthy = Fleet(speed=1, clock=Clock())
    assert healthy.stalls == ()


def test_time_runs_at_the_speed_asked() -> None:
    clock = Clock()
    fleet = Fleet(speed=10, clock=clock)
    clock.now = 30  # 30 real seconds
    assert fleet.minute == pytest.approx(5.0, abs=0.1)
    with pytest.raises(ValueError):
        Fleet(speed=0)


def test_durations_read_like_prometheus_ranges() -> None:
    assert [minutes(t) for t in ("10m", "1h", "90s", "1d")] == [10, 60, 1.5, 1440]
    with pytest.raises(ValueError):
        minutes("10 m")


# -- over HTTP -------------------------------------------------------------------------------


KUBE_TOKEN = "fleet-test-token"


@pytest.fixture
def fleet_api() -> Iterator[FleetApi]:
    api = FleetApi(
        Fleet(DEMO_TYPES, DEMO_BURSTS, speed=60),  # a simulated minute per real second
        FleetApiConfig(kube_token=KUBE_TOKEN, rate_window="10m"),
    )
    with serve_in_thread(api.app) as server:
        api.url = server.url
        yield api


# The demo's settings: every type scalable (SCALER_TARGETS), one scale set named by hand.
DEMO = Settings(runner_scale_sets=SCALE_SETS, scaler_targets={spec.name: {} for spec in DEMO_TYPES})
DEMO_NAMES = DEMO.runner_names


def test_the_demos_settings_name_every_types_scale_set_as_the_fleet_does() -> None:
    for spec in DEMO_TYPES:
        assert DEMO_NAMES.scale_set(spec.name) == spec.scale_set
    assert [spec.scale_set for spec in DEMO_TYPES] == [
        "linux-2xlarge",
        "linux-4xlarge",
        "linux-g5-4xlarge-nvidia-gpu",
        "win-4xlarge",
    ]


async def test_the_prometheus_backend_reads_the_fleet_by_runner_type(fleet_api: FleetApi) -> None:
    served = {"prometheus_url": fleet_api.url, "prometheus_rate_window": "10m"}
    metrics = PrometheusMetrics(DEMO.model_copy(update=served))
    unnamed = PrometheusMetrics(Settings(**served))
    try:
        snapshot = await metrics.read(now=datetime.now(UTC))
        as_served = await unnamed.read(now=datetime.now(UTC))
    finally:
        await metrics.aclose()
        await unnamed.aclose()
    # The series are ARC's scale sets (suffix stripped), named for the types the alerts use.
    assert set(as_served.runner_types) == {spec.scale_set for spec in DEMO_TYPES}
    assert set(snapshot.runner_types) == {spec.name for spec in DEMO_TYPES}
    assert snapshot.note == ""  # every default ARC query was answered
    truth = fleet_api.served()
    for name, read in snapshot.runner_types.items():
        assert read.maximum == truth[name].maximum
        assert read.minimum == truth[name].minimum
        assert read.duration_baseline_mins == truth[name].duration_baseline_mins
    # In real time, as the bot measures its own durations: at ×60, a 6-minute job of the
    # fleet's takes 6 real seconds, and 2 jobs a fleet minute arrive 120 times a real minute.
    two = snapshot.runner_types["linux.2xlarge"]
    assert (two.duration_baseline_mins, two.arrival_baseline_per_min) == (0.1, 120.0)


async def test_the_huds_queued_jobs_show_the_periodic_surge_behind_the_burst() -> None:
    """The burst is one workflow's surge: the HUD backend lists the demo fleet's queued jobs
    (HUD's `queued_jobs` shape), and the view names `periodic` as the workflow behind it."""
    clock = Clock()
    api = FleetApi(Fleet(speed=1, clock=clock), FleetApiConfig(rate_window="10m"))
    clock.to_minute(20)  # the burst has passed; its jobs still wait
    with serve_in_thread(api.app) as server:
        hud = HudMetrics(Settings(hud_url=server.url))
        try:
            now = datetime.now(UTC)
            listing = await hud.queued_jobs(now=now)
        finally:
            await hud.aclose()
        async with httpx.AsyncClient() as client:
            page = (await client.get(f"{server.url}/")).text
    assert "Queued jobs by workflow" in page and "periodic (schedule)" in page
    waits = [job.wait_mins(now) for job in listing.jobs]
    assert listing.jobs and min(waits) > 5, "HUD lists jobs queued over 5 minutes only"
    assert {job.runner_type for job in listing.jobs} == {"linux.2xlarge"}
    view = jobs_view(listing, Arrivals(), source="hud", at=now)
    surge = surging(view, "linux.2xlarge")
    assert surge is not None and surge.workflow == "periodic" and surge.share > 0.5
    assert surge.trigger is Trigger.SCHEDULE


def test_runner_set_names_carry_arcs_suffix() -> None:
    name = runner_set_name("linux-2xlarge")
    assert name.startswith("linux-2xlarge-") and len(name) == len("linux-2xlarge-") + 5
    assert name == runner_set_name("linux-2xlarge")


async def test_the_alertmanager_silencer_creates_reads_and_expires(fleet_api: FleetApi) -> None:
    silencer = alertmanager_silencer(fleet_api.url)
    now = datetime.now(UTC)
    request = SilenceRequest(
        (Matcher("__alert_rule_uid__", RULE_UID), Matcher("type", "alerting-infra")),
        now,
        now + timedelta(hours=1),
        "alice",
        "from the test",
    )
    try:
        silence_id = await silencer.create(request)
        state = await silencer.state(silence_id)
        assert state is not None and state.in_force
        assert fleet_api.silences.silencing(fleet_api.rule.labels, datetime.now(UTC)) == [
            silence_id
        ]
        await silencer.expire(silence_id)
        await silencer.expire(silence_id)  # already expired: what was asked is true
        state = await silencer.state(silence_id)
        assert state is not None and not state.in_force
        assert await silencer.state(str(uuid.uuid4())) is None
    finally:
        await silencer.aclose()


def test_the_alerts_view_and_silence_links_open_pages_that_say_the_rule_and_its_silences(
    fleet_api: FleetApi,
) -> None:
    """*View alert* and *Silence in Grafana* on the root open the rule, with its state and
    the silences that hold it, and the silence form, which says where silences are made here."""
    assert evaluate(fleet_api.rule, 0, 30, 9) is None and fleet_api.rule.state == "pending"
    payload = grafana_payload(
        Notification("firing", 30, 9, datetime.now(UTC)),
        fleet_api.rule.labels,
        fleet_url=fleet_api.url,
        thresholds=fleet_api.rule.config,
    )
    alert = payload["alerts"][0]
    now = datetime.now(UTC)
    fleet_api.silences.create(
        {
            "matchers": [
                {
                    "name": "__alert_rule_uid__",
                    "value": RULE_UID,
                    "isRegex": False,
                    "isEqual": True,
                },
                {"name": "type", "value": "alerting-infra", "isRegex": False, "isEqual": True},
            ],
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(hours=2)).isoformat(),
            "createdBy": "alice <b>",
            "comment": "from Slack",
        },
        now,
    )

    rule = httpx.get(alert["generatorURL"])
    assert rule.status_code == 200 and rule.headers["content-type"].startswith("text/html")
    assert "<h1>Jobs queueing in autoscaled machines</h1>" in rule.text
    assert "state <b>Pending</b> (silenced)" in rule.text
    assert "Triggers when regular runner types queue" in rule.text
    assert "alice &lt;b&gt;" in rule.text, "what a silence says is escaped"

    form = httpx.get(alert["silenceURL"])
    assert form.status_code == 200
    assert f"<code>__alert_rule_uid__={RULE_UID}</code>" in form.text
    assert "silences are made from Slack" in form.text and "from Slack</td>" in form.text
    for link in (alert["dashboardURL"], alert["panelURL"], alert["annotations"]["runbook_url"]):
        assert httpx.get(link).status_code == 200, link
    assert httpx.get(f"{fleet_api.url}/alerting/grafana/nope/view").status_code == 404


def target(runner_type: str = "linux.2xlarge") -> ScaleTarget:
    return ScaleTarget(runner_type, f"arc-runners/{DEMO_NAMES.scale_set(runner_type)}", cap=20)


@pytest.fixture
def arc(fleet_api: FleetApi, tmp_path: Path) -> Iterator[ArcScaler]:
    """The bot's `arc` scaler, reaching the fleet's Kubernetes API through a kubeconfig."""
    access = kube_access(str(fleet_api.kube.kubeconfig(tmp_path, fleet_api.url)), {})
    yield ArcScaler(Settings(), access)


async def test_the_arc_scaler_raises_a_scale_set_the_fleet_then_runs_within(
    fleet_api: FleetApi, arc: ArcScaler
) -> None:
    """What ARC would do: the patched ceiling is what the listener scales within, the status
    the controller writes says how many runners there are, and the scale-up is put back."""
    fleet = fleet_api.fleet
    # A fleet minute per second: the burst, a minute in, fills linux.2xlarge within seconds.
    await eventually(
        lambda: fleet.reading()["linux.2xlarge"].queued > 5, what="a queue", timeout=30
    )
    capacity = await arc.capacity(target())
    assert capacity is not None and capacity.at_maximum and capacity.maximum == 20
    assert capacity.managed_by is None, "the demo's sets are nobody's: a revert is shown"
    result = await arc.scale(ScaleRequest(target(), 6, "1", "U0ALICE", raise_maximum=True))
    assert result.detail == "maxRunners 20 → 26"
    assert fleet.reading()["linux.2xlarge"].maximum == 26
    await eventually(
        lambda: fleet.reading()["linux.2xlarge"].registered > 20, what="booted", timeout=30
    )
    # The controller's status writes move the resourceVersion on; the revert still goes back.
    assert result.undo is not None
    reverted = await arc.revert(target(), result.undo)
    assert reverted.done, reverted.detail
    assert fleet_api.spec("linux.2xlarge")["maxRunners"] == 20
    assert [change[2] for change in fleet_api.bounds_changes] == [26, 20]


async def test_a_floor_above_the_ceiling_is_refused_before_anything_changes(
    fleet_api: FleetApi, arc: ArcScaler
) -> None:
    with pytest.raises(BackendError, match="above maxRunners"):
        await arc.scale(ScaleRequest(target("linux.4xlarge"), 10, "1", "U0ALICE"))
    result = await arc.scale(ScaleRequest(target("linux.4xlarge"), 2, "1", "U0ALICE"))
    assert result.detail == "minRunners 14 → 16 (maxRunners 18)"
    assert fleet_api.fleet.reading()["linux.4xlarge"].minimum == 16
    with pytest.raises(BackendError):  # no such scale set: the API server's 404
        await arc.capacity(target("macos.m1"))


def kube_call(url: str, method: str, body: bytes, content_type: str) -> httpx.Response:
    path = "/apis/actions.github.com/v1alpha1/namespaces/arc-runners/autoscalingrunnersets/"
    headers = {"Authorization": f"Bearer {KUBE_TOKEN}", "Content-Type": content_type}
    return httpx.request(method, f"{url}{path}linux-2xlarge", content=body, headers=headers)


# Where a JSON patch can reach in an AutoscalingRunnerSet, the object's identity included.
PATHS = [
    "/spec/minRunners",
    "/spec/maxRunners",
    "/spec",
    "/metadata",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/resourceVersion",
    "/kind",
    "/status/currentRunners",
    "",
]
BODIES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=BODIES
    | st.fixed_dictionaries(
        {"spec": st.dictionaries(st.sampled_from(["minRunners", "maxRunners"]), BODIES)}
    )
    | st.lists(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(["add", "replace", "remove", "test"]) | st.text(max_size=8),
                "path": st.sampled_from(PATHS) | BODIES,
                "value": BODIES,
            }
        )
    )
    | st.fixed_dictionaries({"matchers": BODIES, "startsAt": BODIES, "endsAt": BODIES}),
    where=st.sampled_from(["merge", "json", "silences"]),
)
def test_anything_sent_to_the_fleet_gets_an_answer_never_a_crash(
    fleet_api: FleetApi, body: object, where: str
) -> None:
    raw = json.dumps(body, allow_nan=True).encode()
    if where == "silences":
        answer = httpx.post(f"{fleet_api.url}/api/v2/silences", content=raw)
    else:
        kind = "merge-patch" if where == "merge" else "json-patch"
        answer = kube_call(fleet_api.url, "PATCH", raw, f"application/{kind}+json")
    assert answer.status_code < 500, answer.text
    # Whatever was taken, the scale set still passes its schema and the fleet runs within it.
    spec = fleet_api.spec("linux.2xlarge")
    minimum, maximum = spec.get("minRunners", 0), spec.get("maxRunners", 2**31 - 1)
    read = fleet_api.fleet.reading()["linux.2xlarge"]
    assert (read.minimum, read.maximum) == (minimum, maximum)


# -- the alert rule and its Grafana payloads -----------------------------------------------------


def evaluate(
    rule: QueueRule, minute: float, queued: int, wait: float, silenced: bool = False
) -> Any:
    wall = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minute)
    return rule.evaluate(minute, wall, queued, wait, silenced=silenced)


def test_the_rule_fires_after_pending_renotifies_and_resolves_on_recovery() -> None:
    rule = QueueRule(RuleConfig(fire_queued=10, pending_min=2, repeat_min=10))
    assert evaluate(rule, 0, 12, 1) is None and rule.state == "pending"
    assert evaluate(rule, 1, 14, 1) is None
    fired = evaluate(rule, 2, 15, 1.5)
    assert fired.status == "firing" and fired.queued == 15
    assert evaluate(rule, 5, 20, 3) is None
    again = evaluate(rule, 12, 30, 6)
    assert again.status == "firing" and again.starts_at == fired.starts_at
    assert evaluate(rule, 13, 5, 3) is None  # below the threshold, not yet recovered
    resolved = evaluate(rule, 14, 1, 0.5)
    assert resolved.status == "resolved" and resolved.ends_at > resolved.starts_at
    assert rule.state == "normal"


def test_a_flap_shorter_than_pending_sends_nothing() -> None:
    rule = QueueRule(RuleConfig(pending_min=2))
    assert evaluate(rule, 0, 12, 0) is None
    assert evaluate(rule, 1, 0, 0) is None and rule.state == "normal"
    assert evaluate(rule, 3, 12, 0) is None and rule.state == "pending"


def test_a_silenced_alert_sends_nothing_until_the_silence_ends() -> None:
    rule = QueueRule(RuleConfig(pending_min=0, repeat_min=10))
    assert evaluate(rule, 0, 12, 0).status == "firing"
    assert evaluate(rule, 10, 30, 8, silenced=True) is None
    assert evaluate(rule, 11, 30, 8) is not None  # the silence ended: the repeat goes out
    assert evaluate(rule, 30, 0, 0, silenced=True) is None  # the resolve is held back too
    assert rule.state == "normal"


def test_the_payload_is_a_grafana_notification_the_bot_reads(fleet_api: FleetApi) -> None:
    rule = fleet_api.rule
    note = evaluate(QueueRule(RuleConfig(pending_min=0)), 0, 17, 6.25)
    payload = grafana_payload(note, rule.labels, fleet_url=fleet_api.url, thresholds=rule.config)
    facts = facts_of(parse_notification("grafana", payload))
    assert (facts.numbers.max_queue_size, facts.numbers.max_queue_time_mins) == (17, 6.2)
    assert Matcher("__alert_rule_uid__", RULE_UID) in facts.silence_matchers
    assert facts.title == "Jobs queueing in autoscaled machines"
    assert "__alert_rule_uid__" not in payload["alerts"][0]["labels"]  # Grafana hides it


def test_the_gpu_teams_rule_says_what_it_watches_not_the_main_rules_words() -> None:
    """The incident's description is the rule's: the GPU team's speaks of its GPU runners."""
    note = evaluate(QueueRule(RuleConfig(pending_min=0)), 0, 17, 6.25)
    said = {}
    for name, labels in (("main", QueueRule().labels), ("gpu", GPU_RULE_LABELS)):
        payload = grafana_payload(note, labels, fleet_url="http://fleet", thresholds=RuleConfig())
        facts = facts_of(parse_notification("grafana", payload))
        said[name] = (facts.team, facts.summary, facts.description)
    assert said["main"][2].startswith("Triggers when regular runner types queue")
    assert said["gpu"] == (
        "gpu",
        "GPU jobs are queueing",
        "Triggers when jobs wait too long for linux.g5.4xlarge.nvidia.gpu runners or many of "
        "them queue at once.",
    )


def test_the_payload_says_the_rules_fleet_minutes_in_real_ones() -> None:
    """A fleet 6 times faster: its rule holds 30 fleet minutes' wait to 5, and Grafana's payload
    says 5 and 0.83 real minutes, as the bot measures an incident's duration."""
    rule = QueueRule(RuleConfig(pending_min=0))
    note = evaluate(rule, 0, 17, 30.0)
    payload = grafana_payload(
        note, rule.labels, fleet_url="http://fleet", thresholds=rule.config, speed=6
    )
    facts = facts_of(parse_notification("grafana", payload))
    assert (facts.numbers.max_queue_time_mins, facts.numbers.queue_time_threshold) == (5.0, 0.83)
    assert facts.numbers.max_queue_size == 17, "a count is a count"


def test_notifications_reach_the_bot_with_its_token_and_are_retried() -> None:
    received: list[tuple[str | None, dict[str, Any]]] = []
    failures = [503]

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def grafana(request: Request) -> JSONResponse:
        if failures:
            return JSONResponse({"error": "busy"}, status_code=failures.pop())
        received.append((request.headers.get("authorization"), await request.json()))
        return JSONResponse({"accepted": True}, status_code=202)

    bot = Starlette(routes=[Route("/alerts/grafana", grafana, methods=["POST"])])
    with serve_in_thread(bot) as bot_server:
        config = FleetApiConfig(
            webhook_url=f"{bot_server.url}/alerts/grafana",
            webhook_token="tok",
            rule=RuleConfig(pending_min=0),
        )
        api = FleetApi(Fleet(DEMO_TYPES, DEMO_BURSTS, speed=600), config)
        with serve_in_thread(api.app) as server:
            api.url = server.url
            wait_until(lambda: received, timeout=30, what="a notification")
    token, payload = received[0]
    assert token == "Bearer tok"
    assert payload["status"] == "firing" and payload["version"] == "1"
    assert payload["alerts"][0]["silenceURL"].startswith(server.url)


def bucket_of(waits_s: list[float]) -> tuple[float, float]:
    """The bounds (minutes) of ARC's bucket the slowest of a few starts falls in: where the p99
    of fewer than 100 starts lies."""
    slowest = max(waits_s)
    upper = min(b for b in STARTUP_BUCKETS if b >= slowest)
    lower = max((b for b in STARTUP_BUCKETS if b < slowest), default=0.0)
    return lower / 60, upper / 60


async def test_the_fleets_wait_is_arcs_slowest_recent_start_and_the_last_hours_after_a_stall() -> (
    None
):
    """The fleet answers the wait as ARC does, from the jobs that started: the p99 of the starts
    within the rate window. Once 2xlarge's listener stalls, none starts within the window and the
    bot reads the last hour's, where it read "not known"."""
    clock = Clock()
    fleet = Fleet(speed=1, clock=clock)
    api = FleetApi(fleet, FleetApiConfig(rate_window="10m"))
    clock.to_minute(12)  # the burst queues, and its jobs start after waiting
    recent = fleet.startup_waits(10)["linux.2xlarge"]
    with serve_in_thread(api.app) as server:
        metrics = PrometheusMetrics(Settings(prometheus_url=server.url))
        try:
            burst = (await metrics.read(now=datetime.now(UTC))).runner_types["linux-2xlarge"]
            fleet.stall("linux.2xlarge")
            clock.to_minute(25)  # no start for 13 minutes, jobs still queued
            stalled = (await metrics.read(now=datetime.now(UTC))).runner_types["linux-2xlarge"]
        finally:
            await metrics.aclose()
    hour = fleet.startup_waits(60)["linux.2xlarge"]
    assert len(recent) < 100 and len(hour) < 100
    assert burst.wait_of_starts and burst.longest_wait_mins is not None
    low, high = bucket_of(recent)
    assert low <= burst.longest_wait_mins <= high
    assert stalled.queued and stalled.queued > 0 and stalled.wait_of_starts
    low, high = bucket_of(hour)
    assert stalled.longest_wait_mins is not None and low <= stalled.longest_wait_mins <= high
