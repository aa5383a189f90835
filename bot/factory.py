"""Backends from settings: which silence, scale and metrics implementations this replica uses.

Part of the composition root: the one place that turns `Settings` into the small config objects
each backend takes, so no backend reads settings or the environment itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pydantic import SecretStr

from bot.backends.errors import BackendError
from bot.backends.github_api import ApiConfig, GithubApi
from bot.backends.github_auth import AppConfig, AppInstallationToken, StaticToken, TokenSource
from bot.backends.issues import GithubIssues
from bot.backends.kube import KubeAccess, from_kubeconfig, in_cluster
from bot.backends.metrics import QueuedJobs, QueueMetrics
from bot.backends.metrics.alert import AlertMetrics
from bot.backends.metrics.github import GithubConfig, GithubMetrics
from bot.backends.metrics.hud import HudConfig, HudMetrics
from bot.backends.metrics.prometheus import PrometheusConfig, PrometheusMetrics
from bot.backends.scale import Scaler
from bot.backends.scale.arc import ArcScaler, ArcScalerConfig
from bot.backends.scale.asg import AsgScaler, AsgScalerConfig
from bot.backends.scale.aws import AwsConfig
from bot.backends.scale.sqs import SqsScaler, SqsScalerConfig
from bot.backends.scale.webhook import WebhookScaler, WebhookScalerConfig
from bot.backends.silence import Silencer
from bot.backends.silence.alertmanager import alertmanager_silencer
from bot.backends.silence.grafana import grafana_silencer
from bot.config import (
    JobsBackend,
    MetricsBackend,
    ScalerBackend,
    Settings,
    SettingsError,
    SilenceBackend,
)
from bot.domain.runner_names import RunnerNames
from bot.domain.scaling import ScaleTarget


def build_silencer(settings: Settings) -> Silencer | None:
    timeout = settings.backend_timeout_seconds
    if settings.silence_backend is SilenceBackend.ALERTMANAGER and settings.alertmanager_url:
        return alertmanager_silencer(settings.alertmanager_url, timeout_s=timeout)
    if (
        settings.silence_backend is SilenceBackend.GRAFANA
        and settings.grafana_url
        and settings.grafana_token
    ):
        token = settings.grafana_token.get_secret_value()
        return grafana_silencer(settings.grafana_url, token, timeout_s=timeout)
    return None


def runner_names(settings: Settings) -> RunnerNames:
    """Runner type <-> ARC scale set: RUNNER_SCALE_SETS' exceptions, else derived, for the
    types the bot knows (those and SCALER_TARGETS')."""
    return RunnerNames(settings.runner_scale_sets, known=settings.scaler_targets)


def scale_targets(settings: Settings) -> dict[str, ScaleTarget]:
    """SCALER_TARGETS as the scale action takes them. With arc, a target left out is
    `SCALER_ARC_NAMESPACE/<the type's scale set>`; other backends need theirs (`check_serve`
    says so)."""
    names = runner_names(settings)
    targets = {}
    for runner_type, entry in settings.scaler_targets.items():
        target = entry.target or ""
        if not target and settings.scaler_backend is ScalerBackend.ARC:
            scale_set = names.scale_set(runner_type)
            if not scale_set:
                raise SettingsError(
                    f'SCALER_TARGETS["{runner_type}"]: no scale set can be derived from this '
                    'name: give its "target" (or a RUNNER_SCALE_SETS entry)'
                )
            target = f"{settings.scaler_arc_namespace}/{scale_set}"
        cap = entry.cap or settings.scale_default_cap
        targets[runner_type] = ScaleTarget(runner_type, target, cap, entry.ceiling)
    return targets


def build_scaler(settings: Settings, environ: Mapping[str, str]) -> Scaler | None:
    """The configured scaler; `environ` is read only for the Kubernetes in-cluster service
    account's address and the default kubeconfig location, as kubectl does."""
    backend, timeout = settings.scaler_backend, settings.backend_timeout_seconds
    aws = AwsConfig(settings.aws_region, settings.aws_endpoint_url, timeout)
    if backend is ScalerBackend.WEBHOOK and settings.scaler_webhook_url:
        secret = _secret(settings.scaler_webhook_secret)
        return WebhookScaler(WebhookScalerConfig(settings.scaler_webhook_url, secret, timeout))
    if backend is ScalerBackend.ARC:
        config = ArcScalerConfig(kube_access(settings, environ), settings.scaler_arc_namespace)
        return ArcScaler(replace(config, timeout_s=timeout))
    if backend is ScalerBackend.SQS and settings.scaler_sqs_queue_url:
        return SqsScaler(
            SqsScalerConfig(
                settings.scaler_sqs_queue_url,
                settings.scaler_sqs_repository,
                settings.scaler_sqs_installation_id,
                aws,
            )
        )
    if backend is ScalerBackend.AWS_ASG:
        return AsgScaler(AsgScalerConfig(aws))
    return None


def kube_access(settings: Settings, environ: Mapping[str, str]) -> KubeAccess:
    """How the `arc` scaler reaches the API server: SCALER_KUBECONFIG, else the pod's service
    account, else kubectl's default kubeconfig."""
    try:
        if settings.scaler_kubeconfig:
            return from_kubeconfig(Path(settings.scaler_kubeconfig))
        host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
        if host and port:
            return in_cluster(host, port)
        default = environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        return from_kubeconfig(Path(default.split(os.pathsep)[0]))
    except (BackendError, OSError) as exc:
        raise SettingsError(f"SCALER_BACKEND=arc: no Kubernetes access: {exc}") from None


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def github_auth(settings: Settings) -> TokenSource | None:
    """Where the GitHub readers' token comes from: GITHUB_TOKEN, or the GitHub App's
    installation (GITHUB_APP_INSTALLATION_ID, else the one on GITHUB_ISSUES_REPO, else on the
    first of GITHUB_REPOS, else on GITHUB_ORG). One per process, for both readers: one token,
    minted and renewed once."""
    if settings.github_token is not None:
        return StaticToken(settings.github_token.get_secret_value())
    if not settings.github_app:
        return None
    repo = settings.github_issues_repo or next(iter(settings.github_repos), "")
    where = f"/repos/{repo}/installation" if repo else ""
    if not where and settings.github_org:
        where = f"/orgs/{settings.github_org}/installation"
    return AppInstallationToken(
        AppConfig(
            app_id=settings.github_app_id,
            private_key=_secret(settings.github_app_private_key),
            installation_id=settings.github_app_installation_id,
            installation_of=where,
            api_url=settings.github_api_url,
            timeout_s=settings.backend_timeout_seconds,
        )
    )


def build_metrics(settings: Settings, auth: TokenSource | None = None) -> QueueMetrics:
    """The configured metrics backend; `alert` when none is (the notifications' own numbers).
    `auth`: the GitHub readers' token source, shared (`github_auth`)."""
    backend, timeout = settings.metrics_backend, settings.backend_timeout_seconds
    if backend is MetricsBackend.PROMETHEUS and settings.prometheus_url:
        return PrometheusMetrics(
            PrometheusConfig(
                url=settings.prometheus_url,
                queries=settings.prometheus_queries,
                runner_type_label=settings.prometheus_runner_type_label,
                name_suffix=settings.prometheus_name_suffix,
                window=settings.prometheus_rate_window,
                timeout_s=timeout,
                bearer_token=_secret(settings.prometheus_token) or None,
                names=runner_names(settings),
            )
        )
    if backend is MetricsBackend.GITHUB and settings.has_github_credential:
        return _github(settings, auth)
    if backend is MetricsBackend.HUD and settings.hud_url:
        return _hud(settings)
    return AlertMetrics()


def build_jobs_source(
    settings: Settings, metrics: QueueMetrics, auth: TokenSource | None = None
) -> QueuedJobs | None:
    """Where the jobs behind the queue are listed: `JOBS_BACKEND`, else the metrics backend
    when it can list them (ARC's numbers from Prometheus with the jobs from the HUD, say)."""
    backend = settings.jobs_backend
    if backend is JobsBackend.NONE:
        return None
    if backend is JobsBackend.GITHUB:
        return metrics if isinstance(metrics, GithubMetrics) else _github(settings, auth)
    if backend is JobsBackend.HUD:
        return metrics if isinstance(metrics, HudMetrics) else _hud(settings)
    return metrics if isinstance(metrics, QueuedJobs) else None


def build_issues(settings: Settings, auth: TokenSource | None = None) -> GithubIssues | None:
    """The repository of the alert's GitHub issue (`GITHUB_ISSUES_REPO`), or None."""
    if not settings.github_issues_repo:
        return None
    auth = auth or github_auth(settings)
    if auth is None:
        return None
    api = GithubApi(
        ApiConfig(
            api_url=settings.github_api_url,
            timeout_s=settings.backend_timeout_seconds,
            # GitHub asks for one call at a time from one client (secondary limits).
            concurrency=1,
        ),
        auth=auth,
    )
    return GithubIssues(api, settings.github_issues_repo)


def _github(settings: Settings, auth: TokenSource | None) -> GithubMetrics:
    config = GithubConfig(
        api_url=settings.github_api_url,
        org=settings.github_org,
        repos=settings.github_repos,
        timeout_s=settings.backend_timeout_seconds,
    )
    return GithubMetrics(config, GithubApi(config.api, auth=auth or github_auth(settings)))


def _hud(settings: Settings) -> HudMetrics:
    return HudMetrics(
        HudConfig(
            url=settings.hud_url or "",
            token=_secret(settings.hud_token) or None,
            query=settings.hud_query,
            parameters=settings.hud_parameters,
            timeout_s=settings.backend_timeout_seconds,
        )
    )
