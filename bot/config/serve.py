"""What `serve` needs beyond valid values: the settings that only work together, every missing one
named at once, so that a deployment is fixed in one round."""

from __future__ import annotations

from bot.config.settings import (
    JobsBackend,
    MetricsBackend,
    ScalerBackend,
    Settings,
    SettingsError,
    SilenceBackend,
)
from bot.domain.incident.incident_fleet import absence_can_drain
from bot.domain.reading.fleet import FIELDS, unknown_fields
from bot.domain.reading.hud_queries import threshold_minutes

OR_APP = "GITHUB_TOKEN or a GitHub App (GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY)"
# A backend chosen, and what it cannot do without: "SILENCE_BACKEND=grafana needs GRAFANA_URL".
NEEDS = {
    ("silence_backend", SilenceBackend.ALERTMANAGER): ("alertmanager_url",),
    ("silence_backend", SilenceBackend.GRAFANA): ("grafana_url", "grafana_token"),
    ("scaler_backend", ScalerBackend.WEBHOOK): ("scaler_webhook_url", "scaler_webhook_secret"),
    ("scaler_backend", ScalerBackend.SQS): ("scaler_sqs_queue_url", "scaler_sqs_repository"),
    ("metrics_backend", MetricsBackend.PROMETHEUS): ("prometheus_url",),
    ("metrics_backend", MetricsBackend.HUD): ("hud_url",),
    ("metrics_backend", MetricsBackend.GITHUB): ("has_github_credential",),
    ("jobs_backend", JobsBackend.HUD): ("hud_url",),
}
SHOWN = {"has_github_credential": OR_APP}
NOTES = {"grafana_token": " (a service-account token allowed to create and remove silences)"}


def check_serve(settings: Settings) -> None:
    if problems := serve_problems(settings):
        raise SettingsError(problems)


def serve_problems(s: Settings) -> list[str]:
    """What would fail later, at the first alert."""
    problems: list[str] = []
    try:
        s.sentinel()
    except SettingsError as exc:
        problems += exc.problems
    problems += _slack(s) + _webhooks(s) + _scaler(s) + _github(s) + _needs(s) + _metrics(s)
    if s.github_issues_repo and not s.has_github_credential:
        problems.append(f"GITHUB_ISSUES_REPO needs {OR_APP}, with Issues: read and write")
    elif s.github_issues_open and not s.github_issues_repo:
        problems.append("GITHUB_ISSUES_OPEN=true needs GITHUB_ISSUES_REPO (owner/name)")
    return problems


def _needs(s: Settings) -> list[str]:
    problems = []
    for (name, value), needed in NEEDS.items():
        missing = [n for n in needed if not getattr(s, n)]
        if getattr(s, name) is value and missing:
            shown = " and ".join(SHOWN.get(n, n.upper()) for n in missing)
            note = "".join(NOTES.get(n, "") for n in needed)
            problems.append(f"{name.upper()}={value.value} needs {shown}{note}")
    return problems


def _github(s: Settings) -> list[str]:
    """One credential: a token, or an App whole (its ID with its key)."""
    if s.github_token is not None and (s.github_app_id or s.github_app_private_key):
        return [
            "GITHUB_TOKEN and a GitHub App (GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY) are both set: "
            "keep one (unset GITHUB_TOKEN to call as the App)"
        ]
    if s.github_app_id and s.github_app_private_key is None:
        return ["GITHUB_APP_ID needs GITHUB_APP_PRIVATE_KEY: the App's private key (PEM)"]
    if s.github_app_private_key is not None and not s.github_app_id:
        return ["GITHUB_APP_PRIVATE_KEY needs GITHUB_APP_ID: the App's ID or client ID"]
    if s.github_app_installation_id is not None and not s.github_app:
        return ["GITHUB_APP_INSTALLATION_ID needs GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY"]
    return []


def _has_webhook_credential(s: Settings) -> bool:
    basic = s.alert_webhook_basic_user is not None and s.alert_webhook_basic_password is not None
    return bool(s.alert_webhook_token or s.alert_webhook_hmac_secret or basic)


def serve_warnings(s: Settings) -> list[str]:
    warnings = [
        f"SLACK_ROUTES route {n}: {typo}"
        for n, route in enumerate(s.slack_routes, 1)
        for typo in route.typos
    ]
    lock = s.scale_cooldown_seconds
    for runner_type, target in s.scaler_targets.items():
        pilot = target.pilot
        if pilot is not None and pilot.mode == "on" and pilot.period_seconds < lock:
            warnings.append(
                f"SCALER_TARGETS[{runner_type!r}].pilot.period_seconds "
                f"{target.pilot.period_seconds} is shorter than SCALE_COOLDOWN_SECONDS {lock}: "
                "the type's lock refuses an act that comes sooner, so the pilot acts at most "
                f"every {lock} s; raise period_seconds to {lock} or lower SCALE_COOLDOWN_SECONDS"
            )
    if s.alert_webhook_allow_unauthenticated and not _has_webhook_credential(s):
        warnings.append(
            "alert endpoints accept unauthenticated notifications "
            "(ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED=true)"
        )
        return warnings
    header = s.alert_webhook_token is not None or s.alert_webhook_basic_user is not None
    hmac_only = s.alert_webhook_hmac_secret is not None and not header
    if hmac_only and not s.alert_webhook_allow_unauthenticated:
        warnings.append(
            "/alerts/alertmanager refuses everything: only ALERT_WEBHOOK_HMAC_SECRET is set "
            "and Alertmanager cannot sign (give it ALERT_WEBHOOK_TOKEN or basic auth)"
        )
    return warnings


def _slack(s: Settings) -> list[str]:
    required = {
        "slack_bot_token": "SLACK_BOT_TOKEN is required: the bot token (xoxb-…), from OAuth & "
        "Permissions",
        "slack_signing_secret": "SLACK_SIGNING_SECRET is required in HTTP mode: Basic Information "
        "→ Signing Secret (or set SLACK_APP_TOKEN for Socket Mode)",
        "slack_channel": "SLACK_CHANNEL is required: the ID (C…) of the channel where incidents "
        "open",
    }
    if s.socket_mode:
        del required["slack_signing_secret"]
    return [said for name, said in required.items() if not getattr(s, name)]


def _webhooks(s: Settings) -> list[str]:
    if (s.alert_webhook_basic_user is None) != (s.alert_webhook_basic_password is None):
        return ["ALERT_WEBHOOK_BASIC_USER and ALERT_WEBHOOK_BASIC_PASSWORD must be set together"]
    if not _has_webhook_credential(s) and not s.alert_webhook_allow_unauthenticated:
        return [
            "no alert webhook credential: set ALERT_WEBHOOK_TOKEN, ALERT_WEBHOOK_HMAC_SECRET "
            "or ALERT_WEBHOOK_BASIC_USER/ALERT_WEBHOOK_BASIC_PASSWORD "
            "(or ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED=true on a private network)"
        ]
    return []


def _scaler(s: Settings) -> list[str]:
    backend, problems = s.scaler_backend, []
    if backend is not ScalerBackend.NONE and not s.scaler_targets:
        problems.append(
            f"SCALER_BACKEND={backend.value} needs SCALER_TARGETS: a JSON map of runner type "
            'to target, e.g. {"linux.2xlarge": {"target": "...", "cap": 10}}'
        )
    if backend not in (ScalerBackend.NONE, ScalerBackend.ARC):
        problems += [
            f'SCALER_TARGETS["{name}"]: SCALER_BACKEND={backend.value} needs its "target" '
            "(only arc derives one)"
            for name, entry in s.scaler_targets.items()
            if not entry.target
        ]
    if backend in (ScalerBackend.WEBHOOK, ScalerBackend.SQS):
        problems += [
            f'SCALER_TARGETS["{name}"].pilot: SCALER_BACKEND={backend.value} cannot put a '
            "scale-up back, so the pilot's acts could have no Undo: remove the pilot, or scale "
            "with arc or aws-asg"
            for name, entry in s.scaler_targets.items()
            if entry.pilot is not None
        ]
    if backend is ScalerBackend.ARC:
        names = s.runner_names
        problems += [
            f'SCALER_TARGETS["{name}"]: no scale set can be derived from this name: give its '
            '"target" (or a RUNNER_SCALE_SETS entry)'
            for name, entry in s.scaler_targets.items()
            if not entry.target and not names.scale_set(name)
        ]
    return problems


def _metrics(s: Settings) -> list[str]:
    backend, problems = s.metrics_backend, []
    if backend is MetricsBackend.GITHUB and not (s.github_org or s.github_repos):
        problems.append("METRICS_BACKEND=github needs GITHUB_ORG and/or GITHUB_REPOS")
    if backend is MetricsBackend.HUD:
        problems += _hud_threshold(s)
    if s.jobs_backend is JobsBackend.GITHUB and not (s.has_github_credential and s.github_repos):
        problems.append(f"JOBS_BACKEND=github needs {OR_APP}, and GITHUB_REPOS")
    unknown = unknown_fields(s.prometheus_queries)
    if backend is MetricsBackend.PROMETHEUS and unknown:
        problems.append(f"PROMETHEUS_QUERIES: unknown fields {unknown}; known: {sorted(FIELDS)}")
    return problems


def _hud_threshold(s: Settings) -> list[str]:
    """Refused, not warned: the HUD lists only jobs queued past its threshold."""
    try:
        threshold = threshold_minutes(s.hud_query, s.hud_parameters)
    except ValueError as exc:
        return [str(exc)]
    if absence_can_drain(threshold, s.drain_max_wait_minutes):
        return []
    fix = "raise DRAIN_MAX_WAIT_MINUTES to at least that"
    if s.hud_query == "queued_jobs_aggregate":
        fix = "lower queuedThresholdMinutes in HUD_PARAMETERS or " + fix
    return [
        f"HUD_QUERY={s.hud_query} counts only jobs queued longer than {threshold} min, more "
        f"than DRAIN_MAX_WAIT_MINUTES ({s.drain_max_wait_minutes:g}): no incident could close "
        f"by drain; {fix}"
    ]
