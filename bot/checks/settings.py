"""The settings, read as `serve` reads them, and the runner types they name; nothing is probed
until the settings have no problem (a probe of a half-configured backend would only repeat it)."""

from __future__ import annotations

from collections.abc import Mapping

from bot.checks import Finding, fail, ok
from bot.config import (
    MetricsBackend,
    ScalerBackend,
    Settings,
    SettingsError,
    read_settings,
    unknown_variables,
)
from bot.factory import scale_targets

SUBJECT, RUNNERS = "settings", "runners"


def read(environ: Mapping[str, str]) -> tuple[Settings | None, list[Finding]]:
    """The settings (None when `serve` would refuse them) and what was found about them. A near
    miss (METRIC_BACKEND) fails here, where `serve` only warns: the setting meant is at its
    default without a word."""
    near_misses = [fail(SUBJECT, problem) for problem in unknown_variables(environ)]
    try:
        settings = read_settings()
    except SettingsError as exc:
        return None, near_misses + [fail(SUBJECT, problem) for problem in exc.problems]
    return settings, [*near_misses, ok(SUBJECT, summary(settings)), *runner_types(settings)]


def summary(settings: Settings) -> str:
    """What the settings turn on, in one line."""
    mode = "Socket Mode" if settings.socket_mode else "HTTP (/slack/events)"
    routes = len(settings.slack_routes)
    where = f"incidents in {settings.slack_channel}"
    if routes:
        where += f" and {routes} route{'s' if routes != 1 else ''}"
    silences = settings.silence_backend.value if settings.silence_backend else "off"
    return (
        f"Slack over {mode}, {where}; metrics {settings.metrics_backend.value}, "
        f"silences {silences}, scaler {settings.scaler_backend.value}"
    )


def runner_types(settings: Settings) -> list[Finding]:
    """Each runner type the bot knows with the ARC scale set it stands for, where scale sets
    matter (Prometheus's ARC metrics, the arc scaler): a name that does not agree across the
    three is found here, not during an incident."""
    arc = settings.scaler_backend is ScalerBackend.ARC
    if not arc and settings.metrics_backend is not MetricsBackend.PROMETHEUS:
        return []
    targets = scale_targets(settings) if arc else {}
    lines = []
    for row in settings.runner_names.table():
        how = "RUNNER_SCALE_SETS" if row.explicit else "derived"
        detail = f"{row.runner_type} → scale set {row.scale_set} ({how})"
        if row.runner_type in targets:
            detail += f"; scales {targets[row.runner_type].target}"
        lines.append(ok(RUNNERS, detail))
    return lines
