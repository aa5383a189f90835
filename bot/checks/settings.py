"""The settings, read as `serve` reads them: every problem at once, and nothing probed until there
are none (a probe of a half-configured backend would only repeat the settings' problem)."""

from __future__ import annotations

from collections.abc import Mapping

from bot.checks import Finding, fail, ok
from bot.config import Settings, SettingsError, read_settings, unknown_variables

SUBJECT = "settings"


def read(environ: Mapping[str, str]) -> tuple[Settings | None, list[Finding]]:
    """The settings (None when `serve` would refuse them) and what was found about them.

    A variable that looks like one of ours but is none (METRIC_BACKEND) is a failure here, where
    `serve` only warns: the setting meant stays at its default without a word. The dependencies
    are still probed then, as the settings stand."""
    near_misses = [fail(SUBJECT, problem) for problem in unknown_variables(environ)]
    try:
        settings = read_settings()
    except SettingsError as exc:
        return None, near_misses + [fail(SUBJECT, problem) for problem in exc.problems]
    return settings, [*near_misses, ok(SUBJECT, summary(settings))]


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
