"""Backends from settings: which silence, scale and metrics implementations this replica uses.

Part of the composition root: the one place that turns `Settings` into the small config objects
each backend takes, so no backend reads settings or the environment itself.
"""

from __future__ import annotations

from bot.backends.silence import Silencer
from bot.backends.silence.alertmanager import alertmanager_silencer
from bot.backends.silence.grafana import grafana_silencer
from bot.config import Settings, SilenceBackend


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
