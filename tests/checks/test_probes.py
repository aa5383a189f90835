"""Each probe against the real server or the local stand-in of what it checks, one verdict at a
time: what an operator reads on the line, and the fix."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.backends.metrics.prometheus import all_queries
from bot.checks import Finding, Verdict
from bot.checks.run import bounded, probe_all, render
from bot.config import Settings
from bot.domain.reading.runner_pods import NEEDS
from sandbox.github_issues import TOKEN
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.silence_api import READ, FakeSilenceApi
from tests.support.busy_github import LIVED, REPO, BusyGithub, Clock
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.fakes.github_api import FakeGithub, one_github
from tests.support.fakes.hud_api import FakeHud
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import eventually
from tests.support.sentinel import MASTER_NAME, SentinelSet
from tests.support.servers import free_port, moto_server
from tests.support.slack import Slack

REGION = "us-east-1"
SET = "mt-l-x86iavx512-8-64"


def of(findings: list[Finding], subject: str) -> list[Finding]:
    return [f for f in findings if f.subject == subject]


def verdicts(findings: list[Finding]) -> list[Verdict]:
    return [f.verdict for f in findings]


# -- Kubernetes: a SelfSubjectAccessReview per verb, then the set itself ---------------------------


def arc_settings(settings_for: Callable[..., Settings], kube: FakeKubeApi, **targets: str) -> Any:
    directory = Path(tempfile.mkdtemp(prefix="qp-kube-"))
    kubeconfig = kube.kubeconfig(directory, kube.url)  # type: ignore[attr-defined]
    return settings_for(
        scaler_backend="arc",
        scaler_kubeconfig=str(kubeconfig),
        scaler_targets=json.dumps(targets or {"linux.big": f"arc-runners/{SET}"}),
    )


async def test_a_service_account_that_may_patch_its_sets_is_ok(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    kube.add_from_fixture(minRunners=2, maxRunners=120)

    [found] = of(await probe_all(arc_settings(settings_for, kube), {}), "kubernetes")

    assert found.verdict is Verdict.OK
    assert found.detail == (
        f"arc-runners/{SET} (linux.big): get and patch allowed; minRunners 2, maxRunners 120, "
        "120 runners now"
    )
    asked = [review["resourceAttributes"] for review in kube.reviews]
    assert [(a["verb"], a["resource"], a["name"]) for a in asked] == [
        ("get", "autoscalingrunnersets", SET),
        ("patch", "autoscalingrunnersets", SET),
    ]
    assert kube.patches == [], "nothing was written"


async def test_a_service_account_without_patch_rights_fails_with_the_rbac_fix(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    kube.add_from_fixture()
    kube.denied_verbs = {"patch"}

    [found] = of(await probe_all(arc_settings(settings_for, kube), {}), "kubernetes")

    assert found.verdict is Verdict.FAIL
    assert "may not patch autoscalingrunnersets.actions.github.com" in found.detail
    assert "Role in arc-runners allowing get and patch on autoscalingrunnersets" in found.fix


async def test_before_an_upgrade_that_applies_the_charts_role_a_missing_grant_there_is_a_warning(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    """The chart's upgrade check runs before the upgrade applies the Role it makes: a grant still
    missing in that namespace may be the upgrade's own, and must not stop it; elsewhere it fails."""
    kube.add_from_fixture()
    kube.denied_verbs = {"patch"}
    settings = arc_settings(settings_for, kube)

    [found] = of(
        await probe_all(settings, {"QUEUEPILOT_ROLE_PENDING": "arc-runners"}), "kubernetes"
    )

    assert found.verdict is Verdict.WARN
    assert "may not patch autoscalingrunnersets.actions.github.com yet" in found.detail
    assert "`helm test`" in found.fix
    [elsewhere] = of(
        await probe_all(settings, {"QUEUEPILOT_ROLE_PENDING": "ci-runners"}), "kubernetes"
    )
    assert elsewhere.verdict is Verdict.FAIL


async def test_a_target_outside_the_roles_resource_names_is_named_with_the_fix(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    """The chart's Role names the scale sets of its values' SCALER_TARGETS: a runner type given
    elsewhere (the Secret, an edited ConfigMap) is refused by RBAC, and `check` names it while
    the others pass."""
    kube.add_from_fixture()
    kube.add_from_fixture("linux-gpu")
    kube.rules = [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["autoscalingrunnersets"],
            "resourceNames": [SET],
            "verbs": ["get", "patch"],
        }
    ]
    directory = Path(tempfile.mkdtemp(prefix="qp-kube-"))
    settings = settings_for(
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(directory, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps({"linux.big": f"arc-runners/{SET}", "linux.gpu": {"cap": 2}}),
    )

    named, outside = of(await probe_all(settings, {}), "kubernetes")

    assert named.verdict is Verdict.OK
    assert outside.verdict is Verdict.FAIL
    assert outside.detail == (
        "arc-runners/linux-gpu (linux.gpu): may not get or patch "
        "autoscalingrunnersets.actions.github.com"
    )
    assert "named linux-gpu" in outside.fix
    assert "add linux.gpu there and `helm upgrade` so the Role names it" in outside.fix
    asked = {review["resourceAttributes"]["name"] for review in kube.reviews}
    assert asked == {SET, "linux-gpu"}, "each target is asked about by its name"


async def test_a_target_naming_no_set_fails(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    kube.add_from_fixture()
    settings = arc_settings(settings_for, kube, **{"linux.big": "arc-runners/nope"})

    [found] = of(await probe_all(settings, {}), "kubernetes")

    assert found.verdict is Verdict.FAIL
    assert found.detail == "arc-runners/nope (linux.big): no such AutoscalingRunnerSet"
    assert found.fix == (
        'set SCALER_TARGETS["linux.big"] to an existing scale set (kubectl get '
        "autoscalingrunnersets -n arc-runners)"
    )


async def test_a_derived_scale_set_that_does_not_exist_names_runner_scale_sets(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    kube.add_from_fixture()
    directory = Path(tempfile.mkdtemp(prefix="qp-kube-"))
    settings = settings_for(
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(directory, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps({"linux.big": {"cap": 4}}),
    )

    [found] = of(await probe_all(settings, {}), "kubernetes")

    assert found.detail == "arc-runners/linux-big (linux.big): no such AutoscalingRunnerSet"
    assert found.fix == (
        'give linux.big\'s scale set in RUNNER_SCALE_SETS ({"linux.big": "<its name>"}) (kubectl '
        "get autoscalingrunnersets -n arc-runners), or set SCALER_ARC_NAMESPACE to the namespace "
        "it is in"
    )


async def test_min_runners_above_max_runners_fails(
    settings_for: Callable[..., Settings], kube: FakeKubeApi
) -> None:
    kube.add_from_fixture(minRunners=30, maxRunners=20)

    [found] = of(await probe_all(arc_settings(settings_for, kube), {}), "kubernetes")

    assert found.verdict is Verdict.FAIL
    assert "minRunners 30, maxRunners 20: minRunners above maxRunners" in found.detail


# -- Grafana: reads silences; may create them, asked without creating one --------------------------


@pytest.fixture
def grafana() -> Iterator[FakeSilenceApi]:
    api = FakeSilenceApi()
    with serve_in_thread(api.app) as server:
        api.url = server.url  # type: ignore[attr-defined]
        yield api
        if api.hanging is not None:
            api.hanging.set()


def grafana_settings(settings_for: Callable[..., Settings], grafana: FakeSilenceApi) -> Settings:
    return settings_for(
        silence_backend="grafana",
        grafana_url=grafana.url,  # type: ignore[attr-defined]
        grafana_token=grafana.token,
        backend_timeout_seconds=1,
    )


async def test_an_editors_token_may_read_and_create_silences(
    settings_for: Callable[..., Settings], grafana: FakeSilenceApi
) -> None:
    found = of(await probe_all(grafana_settings(settings_for, grafana), {}), "silences")

    assert verdicts(found) == [Verdict.OK, Verdict.OK]
    assert found[0].detail.endswith("reads silences (0 active)")
    assert found[1].detail == "the token may create or edit silences (folder rights: per silence)"
    assert grafana.silences == {}, "the probe created nothing"


async def test_a_grafana_token_without_silence_rights_fails(
    settings_for: Callable[..., Settings], grafana: FakeSilenceApi
) -> None:
    grafana.permissions = frozenset(READ)  # a Viewer's

    found = of(await probe_all(grafana_settings(settings_for, grafana), {}), "silences")

    assert verdicts(found) == [Verdict.OK, Verdict.FAIL]
    assert found[1].detail.startswith("the token may not create silences: Grafana answered 403")
    assert "Permissions needed: all of any of alert.instances:read" in found[1].detail
    assert "Editor role" in found[1].fix


async def test_a_grafana_that_does_not_answer_is_a_failure_within_the_timeout(
    settings_for: Callable[..., Settings], grafana: FakeSilenceApi
) -> None:
    grafana.hang()

    found = of(await probe_all(grafana_settings(settings_for, grafana), {}), "silences")

    assert verdicts(found) == [Verdict.FAIL]
    assert "did not answer within 1 s" in found[0].detail


# -- Prometheus: which runner types each query returns ---------------------------------------------


async def test_queries_that_return_nothing_say_arcs_metrics_are_not_scraped(
    settings_for: Callable[..., Settings], empty_prometheus: str
) -> None:
    settings = settings_for(metrics_backend="prometheus", prometheus_url=empty_prometheus)

    found = of(await probe_all(settings, {}), "prometheus")
    pods = [f for f in found if f.detail.startswith("runner pods")]
    asked = [f for f in found if f.detail.startswith("query ")]
    found = [f for f in found if f not in pods and f not in asked]

    assert verdicts(found) == [Verdict.FAIL]
    # The runner pods' readings are optional, said apart.
    queries = all_queries(Settings(prometheus_url=empty_prometheus))
    every = len([field for field in queries if field not in NEEDS])
    # What each field asks, a line each; the runner pods' readings in one.
    assert verdicts(asked) == [Verdict.OK] * (every + 1)
    assert found[0].detail == f"none of the {every} queries returns a series"
    assert "scrape ARC's listeners" in found[0].fix
    assert [(f.verdict, f.detail) for f in pods] == [
        (
            Verdict.OK,
            "runner pods: kube-state-metrics is not scraped, so diagnostics cannot see runner "
            "pods that cannot be scheduled or start, OOM kills, nodes under pressure (optional)",
        ),
        (
            Verdict.OK,
            "runner pods: the kubelet's cAdvisor is not scraped, so diagnostics cannot see CPU "
            "throttling, memory near its limit (optional)",
        ),
        (
            Verdict.OK,
            "runner pods: node-exporter is not scraped, so diagnostics cannot see runner nodes "
            "whose disks are saturated, OOM kills of pods ARC deleted (optional)",
        ),
    ]


async def test_the_runner_pods_sources_found_are_said_with_their_runner_types(
    settings_for: Callable[..., Settings],
) -> None:
    fleet = ArcFleet(pods=("ksm",))
    fleet.pods.set(fleet.queueing.name, running=2)
    fleet.pods.set(fleet.healthy.name, running=1)
    settings = settings_for(metrics_backend="prometheus", prometheus_url=fleet.prometheus.url)
    try:

        async def both_types() -> list[str] | None:
            found = of(await probe_all(settings, {}), "prometheus")
            pods = [f.detail for f in found if f.detail.startswith("runner pods")]
            return pods if pods and "2 runner types" in pods[0] else None

        pods = await eventually(both_types, what="the runner pods scraped", timeout=30)
    finally:
        fleet.stop()
    assert pods[0] == (
        f"runner pods: kube-state-metrics for 2 runner types ({HEALTHY}, {QUEUEING}): "
        "diagnostics can see runner pods that cannot be scheduled or start, OOM kills, nodes "
        "under pressure"
    )
    assert "cAdvisor is not scraped" in pods[1]


async def test_cadvisor_without_kube_state_metrics_names_kube_state_metrics_as_missing(
    settings_for: Callable[..., Settings],
) -> None:
    """cAdvisor's series are tied to runner pods by kube-state-metrics' kube_pod_owner: with
    cAdvisor alone, the missing source is kube-state-metrics, not cAdvisor."""
    fleet = ArcFleet(pods=("cadvisor",))
    fleet.pods.set(fleet.queueing.name, running=2, throttled=0.5)
    settings = settings_for(metrics_backend="prometheus", prometheus_url=fleet.prometheus.url)
    try:

        async def cadvisor_in() -> list[str] | None:
            found = of(await probe_all(settings, {}), "prometheus")
            pods = [f.detail for f in found if f.detail.startswith("runner pods")]
            return pods if len(pods) == 3 and "cAdvisor is scraped" in pods[1] else None

        pods = await eventually(cadvisor_in, what="cAdvisor scraped", timeout=30)
    finally:
        fleet.stop()
    assert pods == [
        "runner pods: kube-state-metrics is not scraped, so diagnostics cannot see runner pods "
        "that cannot be scheduled or start, OOM kills, nodes under pressure (optional)",
        "runner pods: the kubelet's cAdvisor is scraped but kube-state-metrics is missing, whose "
        "kube_pod_owner ties its series to runner pods: diagnostics cannot see CPU throttling, "
        "memory near its limit (optional)",
        "runner pods: node-exporter is not scraped, so diagnostics cannot see runner nodes whose "
        "disks are saturated, OOM kills of pods ARC deleted (optional)",
    ]


async def test_a_query_prometheus_refuses_is_named_with_its_setting(
    settings_for: Callable[..., Settings], empty_prometheus: str
) -> None:
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=empty_prometheus,
        prometheus_queries=json.dumps({"queued": "sum(", "busy": "up"}),
    )

    found = of(await probe_all(settings, {}), "prometheus")

    refused = [f for f in found if f.detail.startswith("queued:")]
    assert verdicts(refused) == [Verdict.FAIL]
    assert "Prometheus answered 400" in refused[0].detail
    assert refused[0].fix.startswith('correct PROMETHEUS_QUERIES["queued"]')


# -- Redis: eviction -------------------------------------------------------------------------------


async def test_a_redis_that_may_evict_fails_and_snapshots_are_persistence(
    settings_for: Callable[..., Settings], evicting_redis: str
) -> None:
    found = of(await probe_all(settings_for(redis_url=evicting_redis), {}), "redis")

    by_verdict = {f.verdict: f for f in found}
    assert verdicts(found).count(Verdict.FAIL) == 1
    failed = by_verdict[Verdict.FAIL]
    assert failed.detail.startswith("maxmemory-policy allkeys-lru with maxmemory 64.00M")
    assert "set maxmemory-policy noeviction" in failed.fix
    assert any(f.detail.startswith("persistence: RDB snapshots (save 60 1)") for f in found)


async def test_sentinels_that_agree_on_the_master_are_ok_and_one_down_is_a_warning(
    settings_for: Callable[..., Settings],
) -> None:
    sentinels = SentinelSet()
    sentinels.start()
    try:
        settings = settings_for(
            redis_url="redis://127.0.0.1:1/0",  # with Sentinel, only its database is read
            redis_sentinels=sentinels.sentinels,
            redis_sentinel_master=MASTER_NAME,
        )
        found = of(await probe_all(settings, {}), "redis")
        sentinels.kill(sentinels.sentinel_ports[0])
        degraded = of(await probe_all(settings, {}), "redis")
    finally:
        sentinels.stop()

    master = f"127.0.0.1:{sentinels.master_port}"
    assert found[0] == Finding(
        Verdict.OK, "redis", f"all 3 Sentinels name {master} as master 'mymaster'"
    )
    assert any(f.detail == "role master, 1 replica connected" for f in found)
    assert degraded[0].verdict is Verdict.WARN
    assert degraded[0].detail.startswith(f"2 of 3 Sentinels name {master} as master 'mymaster'")
    assert "quorum" in degraded[0].fix


# -- GitHub and the HUD ----------------------------------------------------------------------------


@pytest.fixture
def github() -> Iterator[tuple[FakeGithub, RunningServer]]:
    fake = FakeGithub()
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    fake.runner(1, "linux.2xlarge")
    try:
        yield fake, server
    finally:
        server.stop()


async def test_a_github_token_without_the_runners_permission_fails_naming_it(
    settings_for: Callable[..., Settings], github: tuple[FakeGithub, RunningServer]
) -> None:
    fake, server = github
    fake.forbidden = {"/orgs/pytorch/actions/runners"}
    settings = settings_for(
        metrics_backend="github",
        github_token=fake.token,
        github_api_url=server.url,
        github_org="pytorch",
        github_repos="pytorch/pytorch",
    )

    found = of(await probe_all(settings, {}), "github")

    assert verdicts(found) == [Verdict.OK, Verdict.FAIL, Verdict.OK]
    assert found[0].detail == "the token works: 5000 of 5000 API calls left this hour"
    assert "GET /orgs/pytorch/actions/runners: GitHub answered 403" in found[1].detail
    assert '"Self-hosted runners" (read)' in found[1].fix and "admin:org" in found[1].fix
    assert found[2].detail == "pytorch/pytorch: workflow runs listed (0 queued)"


async def test_check_says_what_a_reading_costs_on_a_busy_fleet_and_how_often_the_share_allows_it(
    settings_for: Callable[..., Settings],
) -> None:
    gh = BusyGithub(clock=Clock(time.time() - LIVED * 60))  # its last ten minutes lived: now
    with serve_in_thread(one_github(gh.actions, gh.issues)) as server:
        gh.actions.base_url = server.url
        settings = settings_for(
            metrics_backend="github",
            github_token=TOKEN,
            github_api_url=server.url,
            github_org="pytorch",
            github_repos=REPO,
        )
        said = render(of(await probe_all(settings, {}), "github")).splitlines()

    assert said[-1] == (
        "ok    github     300 runs queued or in progress: a reading costs about 208 requests (6 "
        "listing pages and the runs that changed since the last; the first after a start reads "
        "every run's jobs, 306); GITHUB_READING_SHARE 0.6 of GitHub's hour allows a reading "
        "every 4 min"
    )
    assert not [call for call in gh.actions.calls if "/jobs" in call]  # no run's jobs read

    with serve_in_thread(one_github(gh.actions, gh.issues)) as server:
        gh.actions.base_url = server.url
        fed = settings.model_copy(
            update={"github_api_url": server.url, "github_webhook_secret": SecretStr("s")}
        )
        said = render(of(await probe_all(fed, {}), "github")).splitlines()
    assert said[-1] == (
        "ok    github     300 runs queued or in progress: with GITHUB_WEBHOOK_SECRET the readings "
        "come from GitHub's workflow_job deliveries at no request (every 60 s); polling only "
        "reconciles, every 10 min, about 6 listing pages and the runs a missed delivery left "
        "wrong (the first reads every run's jobs once, 306)"
    )


async def test_a_hud_token_it_refuses_fails(settings_for: Callable[..., Settings]) -> None:
    hud = FakeHud(rows={"queued_jobs": []})
    with serve_in_thread(hud.app) as server:
        settings = settings_for(jobs_backend="hud", hud_url=server.url, hud_token="wrong")
        found = of(await probe_all(settings, {}), "hud")
        hud.token = "wrong"
        again = of(await probe_all(settings, {}), "hud")

    assert verdicts(found) == [Verdict.FAIL]
    assert "The HUD answered 403" in found[0].detail and "x-hud-internal-bot" in found[0].fix
    assert [f.detail for f in again] == ["queued_jobs: 0 jobs queued now"]


# -- AWS, through moto's server --------------------------------------------------------------------


@pytest.fixture(scope="module")
def aws() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")


async def test_the_scale_up_queue_is_read_and_a_missing_one_fails(
    settings_for: Callable[..., Settings], aws: str
) -> None:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=aws)
    url = sqs.create_queue(QueueName=f"ghci-lf-queued-builds-{free_port()}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="{}")

    def settings(queue_url: str) -> Settings:
        return settings_for(
            scaler_backend="sqs",
            scaler_sqs_queue_url=queue_url,
            scaler_sqs_repository="pytorch/pytorch",
            scaler_targets=json.dumps({"linux.2xlarge": "lf.linux.2xlarge"}),
            aws_endpoint_url=aws,
            aws_region=REGION,
        )

    [found] = of(await probe_all(settings(url), {}), "sqs")
    [missing] = of(await probe_all(settings(url + "-gone"), {}), "sqs")

    assert found.verdict is Verdict.OK
    assert found.detail.endswith(": readable, 1 messages waiting")
    assert missing.verdict is Verdict.FAIL
    assert "NonExistentQueue" in missing.detail and "SCALER_SQS_QUEUE_URL" in missing.fix


async def test_auto_scaling_groups_exist_within_their_sizes(
    settings_for: Callable[..., Settings], aws: str
) -> None:
    autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=aws)
    name = f"gpu-{free_port()}"
    autoscaling.create_launch_configuration(
        LaunchConfigurationName=name, ImageId="ami-12c6146b", InstanceType="t2.micro"
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchConfigurationName=name,
        MinSize=1,
        MaxSize=6,
        DesiredCapacity=2,
        AvailabilityZones=[f"{REGION}a"],
    )
    settings = settings_for(
        scaler_backend="aws-asg",
        scaler_targets=json.dumps({"linux.gpu": name, "linux.gone": "no-such-group"}),
        aws_endpoint_url=aws,
        aws_region=REGION,
    )

    found = of(await probe_all(settings, {}), "aws-asg")

    assert [(f.verdict, f.detail) for f in found] == [
        (Verdict.OK, f"{name} (linux.gpu): desired 2, min 1, max 6"),
        (Verdict.FAIL, "no-such-group (linux.gone): no Auto Scaling group named no-such-group"),
    ]


# -- Slack: Socket Mode's app-level token ----------------------------------------------------------


async def test_socket_modes_app_token_is_asked_for_a_connection(
    settings_for: Callable[..., Settings], redis_url: str
) -> None:
    from sandbox.slack_api import SlackEmulator
    from tests.support.slack import BOT_TOKEN, CHANNEL

    token = "xapp-1-A0QUEUEBOT-1-checkcheck"
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), app_token=token)
    with serve_in_thread(emulator.app) as server:
        base = {"slack_api_url": f"{server.url}/api/", "slack_signing_secret": None}
        good = of(await probe_all(settings_for(**base, slack_app_token=token), {}), "slack")
        bad = of(
            await probe_all(settings_for(**base, slack_app_token="xapp-1-A0-1-wrong"), {}),
            "slack",
        )

    opens = "Socket Mode: the app-level token opens connections"
    assert good[-1] == Finding(Verdict.OK, "slack", opens)
    assert bad[-1].verdict is Verdict.FAIL
    assert "refused SLACK_APP_TOKEN: invalid_auth" in bad[-1].detail
    assert "App-Level Tokens" in bad[-1].fix and "connections:write" in bad[-1].fix


async def test_the_check_names_each_channel_as_slack_names_it(
    settings_for: Callable[..., Settings], redis_url: str
) -> None:
    """`conversations.info` gives the channel's name: the demo's `check` says the one its page
    shows, not its ID in lower case."""
    from sandbox.slack_api import SlackEmulator
    from tests.support.slack import BOT_TOKEN, CHANNEL

    names = {CHANNEL: "ci-queue-incidents"}
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), channel_names=names)
    with serve_in_thread(emulator.app) as server:
        base = {"slack_api_url": f"{server.url}/api/", "slack_signing_secret": None}
        found = of(await probe_all(settings_for(**base), {}), "slack")

    said = [f.detail for f in found if f.verdict is Verdict.OK]
    assert any(d.startswith(f"in channel #ci-queue-incidents ({CHANNEL}) [") for d in said), said


# -- the report ------------------------------------------------------------------------------------


async def test_a_probe_that_never_answers_fails_at_its_deadline_and_the_others_report() -> None:
    async def never() -> list[Finding]:
        await asyncio.Event().wait()
        return []

    async def broken() -> list[Finding]:
        raise ValueError("a defect")

    found = await asyncio.gather(bounded("hud", never, 0.05), bounded("sqs", broken, 1))

    assert found == [
        [
            Finding(
                Verdict.FAIL,
                "hud",
                "no answer within 0.05 s",
                "make it reachable from here (its URL setting), or raise BACKEND_TIMEOUT_SECONDS",
            )
        ],
        [Finding(Verdict.FAIL, "sqs", "the check itself failed: ValueError: a defect")],
    ]


def test_a_line_per_finding_with_its_fix_and_no_secret() -> None:
    findings = [
        Finding(Verdict.OK, "slack", "auth.test: @queuepilot (U1) in Acme (T1)"),
        Finding(Verdict.FAIL, "redis", "unreachable at redis://:hunter22@db:6379", "start it"),
    ]

    shown = render(findings, secrets=["hunter22"])

    assert shown.splitlines() == [
        "ok    slack      auth.test: @queuepilot (U1) in Acme (T1)",
        "FAIL  redis      unreachable at redis://:•••@db:6379 — fix: start it",
    ]
    assert "\033[" not in shown, "no colours unless asked (a terminal)"
    assert "\033[31mFAIL" in render(findings, color=True)


def test_a_subject_longer_than_the_column_is_still_set_apart_from_its_detail() -> None:
    findings = [
        Finding(Verdict.OK, "slack", "auth.test: @queuepilot (U1) in Acme (T1)"),
        Finding(Verdict.OK, "github issues", "pytorch/ci-queue-alerts: 0 open issues"),
    ]

    assert render(findings).splitlines() == [
        "ok    slack         auth.test: @queuepilot (U1) in Acme (T1)",
        "ok    github issues pytorch/ci-queue-alerts: 0 open issues",
    ]


def test_slack_scopes_the_emulator_sees_match_the_map(slack: Slack) -> None:
    """Every scope the bot may need is one the emulator knows: a test can grant or withhold it."""
    from bot.checks import slack as slack_check
    from sandbox.slack_methods import ALL_SCOPES

    assert {
        *slack_check.ALWAYS,
        *slack_check.PUBLIC_CHANNELS,
        *slack_check.OPTIONAL,
    } <= ALL_SCOPES


async def test_a_refused_sources_probe_is_a_warning_not_every_source_scraped(
    settings_for: Callable[..., Settings],
) -> None:
    """A Prometheus that times out on the probe of which series exist (a big cluster): `check`
    warns with the fix, never says the sources are scraped."""

    async def query(request: Request) -> JSONResponse:
        if request.query_params.get("query", "").startswith("count by (__name__)"):
            timeout = "query timed out in expression evaluation"  # Prometheus's 503 body
            body = {"status": "error", "errorType": "timeout", "error": timeout}
            return JSONResponse(body, status_code=503)
        empty = {"resultType": "vector", "result": []}
        return JSONResponse({"status": "success", "data": empty})

    server = serve_in_thread(Starlette(routes=[Route("/api/v1/query", query)]))
    try:
        settings = settings_for(metrics_backend="prometheus", prometheus_url=server.url)
        found = of(await probe_all(settings, {}), "prometheus")
    finally:
        server.stop()
    pods = [f for f in found if f.detail.startswith("runner pods")]
    assert [f.verdict for f in pods] == [Verdict.WARN]
    assert "could not say which of their series it has" in pods[0].detail
    assert "--query.timeout" in pods[0].fix
    assert not any("scraped" in f.detail and f.verdict is Verdict.OK for f in found)


async def test_a_source_scraped_without_one_of_its_series_says_which_it_cannot_see(
    settings_for: Callable[..., Settings],
) -> None:
    """node-exporter scraped with its vmstat collector off: its disks are read, the OOM kills on
    the nodes are not, and `check` says so, as diagnostics do."""
    present = sorted({s for r in NEEDS for s, _ in NEEDS[r]} - {"node_vmstat_oom_kill"})

    async def query(request: Request) -> JSONResponse:
        result = []
        if request.query_params.get("query", "").startswith("count by (__name__)"):
            result = [{"metric": {"__name__": name}, "value": [0, "1"]} for name in present]
        return JSONResponse(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    server = serve_in_thread(Starlette(routes=[Route("/api/v1/query", query)]))
    try:
        settings = settings_for(metrics_backend="prometheus", prometheus_url=server.url)
        found = of(await probe_all(settings, {}), "prometheus")
    finally:
        server.stop()
    node = next(f.detail for f in found if f.detail.startswith("runner pods: node-exporter"))
    assert node.endswith(
        ", but not OOM kills on the nodes (node_vmstat_oom_kill is not scraped)"
    ), node
