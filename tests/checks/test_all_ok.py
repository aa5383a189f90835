"""A deployment configured right, end to end: `queuepilot check` against the Slack emulator, a
Redis that keeps its data, a real Prometheus scraping two ARC listeners, a real Alertmanager, the
Kubernetes stand-in holding both scale sets and GitHub's listing the jobs. Every line is ok and
it exits 0; a scale target Prometheus has no series for is then the one warning."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.checks import Verdict
from bot.checks import prometheus as prometheus_check
from bot.config import load_settings
from sandbox.serve import RunningServer, serve_in_thread
from tests.checks.conftest import check_env, lines, run_check
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.fakes.github_api import FakeGithub
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import eventually
from tests.support.servers import Alertmanager
from tests.support.slack import Slack


@pytest.fixture(scope="module")
def arc_fleet() -> Iterator[ArcFleet]:
    fleet = ArcFleet()
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[Alertmanager]:
    server = Alertmanager("http://127.0.0.1:9/unused")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def github() -> Iterator[tuple[FakeGithub, RunningServer]]:
    fake = FakeGithub()
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    job = fake.job(11, ["self-hosted", QUEUEING], "queued", datetime.now(UTC).isoformat())
    fake.run("pytorch/pytorch", 7, "queued", [job])
    try:
        yield fake, server
    finally:
        server.stop()


def deployment(
    tmp_path: Path,
    arc_fleet: ArcFleet,
    alertmanager: Alertmanager,
    kube: FakeKubeApi,
    github: tuple[FakeGithub, RunningServer],
    **targets: Any,
) -> dict[str, str]:
    """The settings of a deployment of all of it, as environment variables."""
    healthy = copy.deepcopy(kube.add_from_fixture(minRunners=0, maxRunners=120))
    healthy["metadata"]["name"] = HEALTHY
    healthy["spec"].update(minRunners=2, maxRunners=200)
    kube.add(healthy)
    kubeconfig = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    fake, server = github
    # Each with a ceiling, as the chart's admission policy needs: `check` warns of one without.
    ceiled = {t: {"target": f"arc-runners/{t}", "ceiling": 200} for t in (QUEUEING, HEALTHY)}
    targets = targets or ceiled
    return {
        "METRICS_BACKEND": "prometheus",
        "PROMETHEUS_URL": arc_fleet.prometheus.url,
        "PROMETHEUS_RATE_WINDOW": "30s",
        "SILENCE_BACKEND": "alertmanager",
        "ALERTMANAGER_URL": alertmanager.url,
        "SCALER_BACKEND": "arc",
        "SCALER_KUBECONFIG": str(kubeconfig),
        "SCALER_TARGETS": json.dumps(targets),
        "SCALE_ALLOWED_USERS": "U0ONCALL",
        "JOBS_BACKEND": "github",
        "GITHUB_TOKEN": fake.token,
        "GITHUB_API_URL": server.url,
        "GITHUB_REPOS": "pytorch/pytorch",
    }


async def scraped_with_jobs(arc_fleet: ArcFleet, env: dict[str, str]) -> None:
    """Until Prometheus has ARC's job metrics too (they appear with a listener's first job
    event, and a rate needs two scrapes that differ)."""
    settings = load_settings(_env_file=None, **{k.lower(): v for k, v in env.items()})

    async def complete() -> bool:
        arc_fleet.queueing.start(waited_s=600, count=2)
        arc_fleet.queueing.complete(took_s=1500, count=2)
        found = await prometheus_check.probe(settings)
        return all(f.verdict is Verdict.OK for f in found)

    await eventually(complete, what="ARC's job metrics scraped", timeout=60)


async def test_a_deployment_configured_right_is_all_ok(
    tmp_path: Path,
    slack: Slack,
    persistent_redis: str,
    arc_fleet: ArcFleet,
    alertmanager: Alertmanager,
    kube: FakeKubeApi,
    github: tuple[FakeGithub, RunningServer],
) -> None:
    settings = deployment(tmp_path, arc_fleet, alertmanager, kube, github)
    env = check_env(slack, persistent_redis, **settings)
    await scraped_with_jobs(arc_fleet, env)

    result = run_check(env, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result, "ok") == lines(result), result.stdout
    subjects = {line.split()[1] for line in lines(result)}
    every = {"settings", "runners", "slack", "redis", "prometheus", "silences", "kubernetes"}
    every.add("github")
    assert subjects == every
    said = result.stdout
    gauges = "queued, assigned, registered, busy, idle, minimum, maximum, desired"
    assert f"{gauges}: 2 runner types ({HEALTHY}, {QUEUEING})" in said
    assert "persistence: AOF (appendfsync everysec)" in said
    assert f"arc-runners/{QUEUEING} ({QUEUEING}): get and patch allowed; minRunners 0" in said
    assert f"arc-runners/{HEALTHY} ({HEALTHY}): get and patch allowed; minRunners 2" in said
    for runner_type in (QUEUEING, HEALTHY):
        assert (
            f"runners    {runner_type} → scale set {runner_type} (derived); "
            f"scales arc-runners/{runner_type}"
        ) in said
    assert "Alertmanager 0.2" in said and "reads silences (0 active)" in said
    assert "pytorch/pytorch: workflow runs listed (1 queued)" in said
    assert said.splitlines()[-1].endswith(" ok, 0 warnings, 0 failed")


async def test_a_scale_target_prometheus_has_no_series_for_is_a_warning(
    tmp_path: Path,
    slack: Slack,
    persistent_redis: str,
    arc_fleet: ArcFleet,
    alertmanager: Alertmanager,
    kube: FakeKubeApi,
    github: tuple[FakeGithub, RunningServer],
) -> None:
    targets: dict[str, Any] = {QUEUEING: f"arc-runners/{QUEUEING}", "linux.2xlarge": HEALTHY}
    settings = deployment(tmp_path, arc_fleet, alertmanager, kube, github, **targets)
    env = check_env(slack, persistent_redis, **settings)
    # The module's Prometheus scraped as for the deployment configured right (whichever of the
    # two ran first, on whichever worker): only the scale target's name differs.
    both = {t: f"arc-runners/{t}" for t in (QUEUEING, HEALTHY)}
    await scraped_with_jobs(arc_fleet, {**env, "SCALER_TARGETS": json.dumps(both)})

    result = run_check(env, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    warned = [line for line in lines(result, "warn") if "scale target" in line]
    assert warned == [
        "warn  prometheus scale target 'linux.2xlarge' has no series in Prometheus — fix: its "
        "scale set's series are named by the 'name' label (less PROMETHEUS_NAME_SUFFIX, "
        "-[bcdfghjklmnpqrstvwxz2456789]{5}$): give its scale set in RUNNER_SCALE_SETS if its "
        f"name is not the derived one; the series seen are {HEALTHY}, {QUEUEING}"
    ]
