"""Which backend lists the jobs behind the queue, from settings: `JOBS_BACKEND`, else the
metrics backend when it can; a setting that cannot work refuses to start, naming what it needs."""

from __future__ import annotations

import os

import pytest

from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings, SettingsError, check_serve, load_settings
from bot.config.memory import DEFAULT_LIMIT_MIB, cache_bytes
from bot.factory import build_issues, build_jobs_source, build_metrics, scale_targets


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in Settings.model_fields:
            monkeypatch.delenv(name)


PROMETHEUS = {"metrics_backend": "prometheus", "prometheus_url": "http://prom:9090"}
HUD = {"hud_url": "https://hud.example"}
GITHUB = {"github_token": "ghp-1", "github_repos": "pytorch/pytorch"}
SERVING = {
    "slack_bot_token": "xoxb-1",
    "slack_signing_secret": "s3cret",
    "slack_channel": "C0QUEUE",
    "alert_webhook_token": "hook-token",
}


@pytest.mark.parametrize(
    ("values", "source"),
    [
        # ARC's numbers from Prometheus; its counters name workflows when labelled.
        (PROMETHEUS, PrometheusMetrics),
        # ARC's numbers from Prometheus, the jobs from the HUD or GitHub.
        ({**PROMETHEUS, **HUD, "jobs_backend": "hud"}, HudMetrics),
        ({**PROMETHEUS, **GITHUB, "jobs_backend": "github"}, GithubMetrics),
        ({"metrics_backend": "hud", **HUD}, HudMetrics),
        ({"metrics_backend": "github", **GITHUB}, GithubMetrics),
        # The alert carries no jobs; none wanted.
        ({}, None),
        ({**PROMETHEUS, "jobs_backend": "none"}, None),
    ],
)
def test_the_jobs_come_from_the_configured_source(
    values: dict[str, str], source: type | None
) -> None:
    settings = load_settings(_env_file=None, **values)
    metrics = build_metrics(settings)
    jobs = build_jobs_source(settings, metrics)
    assert (type(jobs) if jobs is not None else None) is source
    if isinstance(jobs, type(metrics)):
        assert jobs is metrics  # one client and one cache for both


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({**PROMETHEUS, "jobs_backend": "hud"}, "JOBS_BACKEND=hud needs HUD_URL"),
        (
            {**PROMETHEUS, "jobs_backend": "github", "github_token": "ghp-1"},
            "JOBS_BACKEND=github needs GITHUB_TOKEN or a GitHub App .*, and GITHUB_REPOS",
        ),
    ],
)
def test_a_jobs_source_without_what_it_needs_refuses_to_start(
    values: dict[str, str], says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        check_serve(load_settings(_env_file=None, **SERVING, **values))


# -- runner types and their ARC scale sets ----------------------------------------------------

GPU = "linux.g5.4xlarge.nvidia.gpu"


@pytest.mark.parametrize(
    ("values", "targets"),
    [
        # arc: a target left out is the type's scale set in SCALER_ARC_NAMESPACE, derived…
        (
            {"scaler_backend": "arc", "scaler_targets": '{"linux.2xlarge": {"cap": 3}}'},
            {"linux.2xlarge": "arc-runners/linux-2xlarge"},
        ),
        # … or named in RUNNER_SCALE_SETS; a target given is the target.
        (
            {
                "scaler_backend": "arc",
                "scaler_arc_namespace": "ci",
                "scaler_targets": f'{{"{GPU}": {{}}, "linux.2xlarge": "other/linux-large"}}',
                "runner_scale_sets": f'{{"{GPU}": "gpu-a10g"}}',
            },
            {GPU: "ci/gpu-a10g", "linux.2xlarge": "other/linux-large"},
        ),
        # Other backends derive nothing (check_serve asks for the target).
        ({"scaler_targets": '{"linux.2xlarge": {"cap": 3}}'}, {"linux.2xlarge": ""}),
    ],
)
def test_an_arc_target_left_out_is_the_runner_types_scale_set(
    values: dict[str, str], targets: dict[str, str]
) -> None:
    settings = load_settings(_env_file=None, **values)
    assert {t: target.target for t, target in scale_targets(settings).items()} == targets


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"runner_scale_sets": f'{{"{GPU}": 7}}'}, f'RUNNER_SCALE_SETS\\["{GPU}"\\]'),
        ({"runner_scale_sets": f'{{"{GPU}": ""}}'}, f'RUNNER_SCALE_SETS\\["{GPU}"\\]'),
        (
            {"scaler_backend": "arc", "scaler_targets": '{"…": {"cap": 1}}'},
            'SCALER_TARGETS\\["…"\\]: no scale set can be derived',
        ),
    ],
)
def test_a_scale_set_that_cannot_be_named_refuses_to_start(
    values: dict[str, str], says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        check_serve(load_settings(_env_file=None, **values))


async def test_prometheus_names_its_series_for_the_runner_types_the_bot_knows() -> None:
    settings = load_settings(
        _env_file=None,
        **PROMETHEUS,
        scaler_targets='{"linux.2xlarge": {"cap": 3}}',
        runner_scale_sets=f'{{"{GPU}": "gpu-a10g"}}',
    )
    metrics = build_metrics(settings)
    assert isinstance(metrics, PrometheusMetrics)
    try:
        named = [metrics.runner_type({"name": n}) for n in ("linux-2xlarge-x7q2k", "gpu-a10g")]
        assert named == ["linux.2xlarge", GPU]
        assert metrics.runner_type({"name": "linux-4xlarge-d4zt9"}) == "linux-4xlarge"
    finally:
        await metrics.aclose()
    assert settings.runner_names.table() == [
        (GPU, "gpu-a10g", True),
        ("linux.2xlarge", "linux-2xlarge", False),
    ]


async def test_each_github_client_takes_its_share_of_the_memory_limit() -> None:
    """The readings' pages and the alert issue's each get the share `bot.config.memory` gives
    them of the limit the serving app resolved: a larger pod caches more."""
    settings = load_settings(
        **GITHUB, metrics_backend="github", github_issues_repo="pytorch/alerting-issues"
    )
    for limit in (320, 1024):
        caches = cache_bytes(limit)
        metrics = build_metrics(settings, caches=caches)
        issues = build_issues(settings, caches=caches)
        assert isinstance(metrics, GithubMetrics) and issues is not None
        try:
            assert metrics.api.etags.max_bytes == caches["github_readings"]
            assert issues.api.etags.max_bytes == caches["github_issues"]
        finally:
            await metrics.aclose()
            await issues.api.aclose()
    # Given none (`queuepilot check`, which reads each page once), the chart's limit's.
    metrics = build_metrics(settings)
    assert isinstance(metrics, GithubMetrics)
    assert metrics.api.etags.max_bytes == cache_bytes(DEFAULT_LIMIT_MIB)["github_readings"]
    await metrics.aclose()
