"""Which backend lists the jobs behind the queue, from settings: `JOBS_BACKEND`, else the
metrics backend when it can; a setting that cannot work refuses to start, naming what it needs."""

from __future__ import annotations

import os

import pytest

from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings, SettingsError, load_settings
from bot.factory import build_jobs_source, build_metrics


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
            "JOBS_BACKEND=github needs GITHUB_TOKEN and GITHUB_REPOS",
        ),
    ],
)
def test_a_jobs_source_without_what_it_needs_refuses_to_start(
    values: dict[str, str], says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        load_settings(_env_file=None, **SERVING, **values).check_serve()
