"""Part of the composition root: the one place that picks each backend for the settings, and
hands it `counted`, where it counts its calls (the serving app's telemetry; `queuepilot check`,
with no /metrics, passes nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.backends.github_api import AppInstallationToken, GithubApi
from bot.backends.http import Counted, uncounted
from bot.backends.issues import GithubIssues
from bot.backends.kube import kube_access
from bot.backends.metrics import AlertMetrics, QueuedJobs, QueueMetrics
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.scale import Scaler
from bot.backends.scale.arc import ArcScaler
from bot.backends.scale.aws import AsgScaler, SqsScaler
from bot.backends.scale.webhook import WebhookScaler
from bot.backends.silence import Silencer, alertmanager_silencer, grafana_silencer
from bot.config import (
    JobsBackend,
    MetricsBackend,
    ScalerBackend,
    Settings,
    SilenceBackend,
)
from bot.config.memory import DEFAULT_CACHES, Cache
from bot.domain.scale.scaling import Policy, ScaleTarget

Auth = AppInstallationToken | None
Caches = Mapping[Cache, int]


@dataclass(frozen=True)
class Backends:
    """Every backend the settings pick; None where none is configured."""

    metrics: QueueMetrics
    jobs: QueuedJobs | None  # the jobs behind the queue
    issues: GithubIssues | None
    silencer: Silencer | None
    scaler: Scaler | None
    targets: dict[str, ScaleTarget]  # what the scaler may scale, and how far


def build_backends(
    settings: Settings, environ: Mapping[str, str], counted: Counted, caches: Caches
) -> Backends:
    # One token source for both GitHub readers: an App's installation token is minted once.
    github = github_auth(settings, counted=counted)
    metrics = build_metrics(settings, github, counted=counted, caches=caches)
    return Backends(
        metrics=metrics,
        jobs=build_jobs_source(settings, metrics, github, counted=counted, caches=caches),
        issues=build_issues(settings, github, counted=counted, caches=caches),
        silencer=build_silencer(settings, counted=counted),
        scaler=build_scaler(settings, environ, counted=counted),
        targets=scale_targets(settings),
    )


def build_silencer(settings: Settings, *, counted: Counted = uncounted) -> Silencer | None:
    backend, timeout = settings.silence_backend, settings.backend_timeout_seconds
    if backend is SilenceBackend.ALERTMANAGER and settings.alertmanager_url:
        return alertmanager_silencer(settings.alertmanager_url, timeout_s=timeout, counted=counted)
    if backend is SilenceBackend.GRAFANA and settings.grafana_url and settings.grafana_token:
        token = settings.grafana_token.get_secret_value()
        return grafana_silencer(settings.grafana_url, token, timeout_s=timeout, counted=counted)
    return None


def scale_targets(settings: Settings) -> dict[str, ScaleTarget]:
    """SCALER_TARGETS; with arc, a target left out is `SCALER_ARC_NAMESPACE/<the scale set>`."""
    names, targets = settings.runner_names, {}
    for runner_type, entry in settings.scaler_targets.items():
        target, policy = entry.target or "", None
        if not target and settings.scaler_backend is ScalerBackend.ARC:
            # Settings that name no scale set for it are refused before (`serve_problems`).
            target = f"{settings.scaler_arc_namespace}/{names.scale_set(runner_type)}"
        if (pilot := entry.pilot) is not None:
            seconds = (pilot.hold_seconds, pilot.cooldown_seconds, pilot.period_seconds)
            policy = Policy(pilot.up_to, pilot.step, *seconds, pilot.mode == "dry-run")
        cap = entry.cap or settings.scale_default_cap
        targets[runner_type] = ScaleTarget(runner_type, target, cap, entry.ceiling, policy)
    return targets


def build_scaler(
    settings: Settings, environ: Mapping[str, str], *, counted: Counted = uncounted
) -> Scaler | None:
    backend = settings.scaler_backend
    if backend is ScalerBackend.WEBHOOK and settings.scaler_webhook_url:
        return WebhookScaler(settings, counted=counted)
    if backend is ScalerBackend.ARC:
        access = kube_access(settings.scaler_kubeconfig, environ)
        return ArcScaler(settings, access, counted=counted)
    if backend is ScalerBackend.SQS and settings.scaler_sqs_queue_url:
        return SqsScaler(settings, counted=counted)
    if backend is ScalerBackend.AWS_ASG:
        return AsgScaler(settings, counted=counted)
    return None


def github_auth(settings: Settings, *, counted: Counted = uncounted) -> Auth:
    """The GitHub App's installation token (None with GITHUB_TOKEN, which each client reads from
    the settings): one per process, shared by every GitHub reader, so that it is minted and
    renewed once."""
    if settings.github_token is not None or not settings.github_app:
        return None
    return AppInstallationToken(settings, counted=counted)


def build_metrics(
    settings: Settings,
    auth: Auth = None,
    *,
    counted: Counted = uncounted,
    caches: Caches = DEFAULT_CACHES,
) -> QueueMetrics:
    backend = settings.metrics_backend
    if backend is MetricsBackend.PROMETHEUS and settings.prometheus_url:
        return PrometheusMetrics(settings, counted=counted)
    if backend is MetricsBackend.GITHUB and settings.has_github_credential:
        return _github(settings, auth, counted, caches)
    if backend is MetricsBackend.HUD and settings.hud_url:
        return HudMetrics(settings, counted=counted)
    return AlertMetrics()


def build_jobs_source(
    settings: Settings,
    metrics: QueueMetrics,
    auth: Auth = None,
    *,
    counted: Counted = uncounted,
    caches: Caches = DEFAULT_CACHES,
) -> QueuedJobs | None:
    """`JOBS_BACKEND`, else the metrics backend when it can list the jobs behind the queue."""
    backend = settings.jobs_backend
    if backend is JobsBackend.NONE:
        return None
    if backend is JobsBackend.GITHUB and not isinstance(metrics, GithubMetrics):
        return _github(settings, auth, counted, caches)
    if backend is JobsBackend.HUD and not isinstance(metrics, HudMetrics):
        return HudMetrics(settings, counted=counted)
    return metrics if isinstance(metrics, QueuedJobs) else None


def build_issues(
    settings: Settings,
    auth: Auth = None,
    *,
    counted: Counted = uncounted,
    caches: Caches = DEFAULT_CACHES,
) -> GithubIssues | None:
    if not (settings.github_issues_repo and settings.has_github_credential):
        return None
    # GitHub asks for one call at a time from one client (secondary limits).
    auth = auth or github_auth(settings, counted=counted)
    size = caches["github_issues"]
    api = GithubApi(settings, auth=auth, concurrency=1, counted=counted, cache_size=size)
    return GithubIssues(api, settings.github_issues_repo)


def _github(settings: Settings, auth: Auth, counted: Counted, caches: Caches) -> GithubMetrics:
    auth = auth or github_auth(settings, counted=counted)
    size = caches["github_readings"]
    return GithubMetrics(settings, GithubApi(settings, auth=auth, counted=counted, cache_size=size))
