"""queuepilot's settings: one validated object, read once at start and passed down."""

from bot.config.loading import Startup as Startup
from bot.config.loading import known_variables as known_variables
from bot.config.loading import load_settings as load_settings
from bot.config.loading import read_settings as read_settings
from bot.config.loading import read_startup as read_startup
from bot.config.loading import unknown_variables as unknown_variables
from bot.config.serve import check_serve as check_serve
from bot.config.settings import JobsBackend as JobsBackend
from bot.config.settings import MetricsBackend as MetricsBackend
from bot.config.settings import ScalerBackend as ScalerBackend
from bot.config.settings import Settings as Settings
from bot.config.settings import SettingsError as SettingsError
from bot.config.settings import SilenceBackend as SilenceBackend
