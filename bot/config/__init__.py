"""queuepilot's settings: one validated object, read once at start and passed down."""

from bot.config.loading import (
    Startup,
    known_variables,
    load_settings,
    read_settings,
    read_startup,
    unknown_variables,
)
from bot.config.serve import check_serve
from bot.config.settings import (
    JobsBackend,
    MetricsBackend,
    ScalerBackend,
    Settings,
    SettingsError,
    SilenceBackend,
)

__all__ = [
    "JobsBackend",
    "MetricsBackend",
    "ScalerBackend",
    "Settings",
    "SettingsError",
    "SilenceBackend",
    "Startup",
    "check_serve",
    "known_variables",
    "load_settings",
    "read_settings",
    "read_startup",
    "unknown_variables",
]
