"""Settings: every knob in one validated object, read once at start and passed down.

Names are the environment variables of CONTRACT.md (case-insensitive); an optional `.env` in the
working directory is read too. A missing or malformed value stops `serve` with one line naming it.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.domain.capacity import Schedule, parse_schedule
from bot.domain.message import ChartStyle
from bot.domain.routes import Route, parse_routes
from bot.storage.connection import (
    SENTINEL_SCHEME,
    RedisSetupError,
    SentinelTarget,
    parse_sentinel_url,
    parse_sentinels,
)

MAX_REVERT_AFTER_S = 30 * 86_400
_SPAN = re.compile(r"(?:([0-9]{1,6})d)?(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,9})s?)?")


def parse_span(text: str) -> int:
    """A duration setting as seconds: "4h", "1h30m", "90m", "1d", "3600", "off"/"0" -> 0.
    Between 1 minute and 30 days, or off."""
    shown = text.strip().lower()
    if shown in ("off", "0", "none", "never"):
        return 0
    match = _SPAN.fullmatch(shown)
    if not shown or match is None or not any(match.groups()):
        raise ValueError(f"{text[:40]!r} is not a duration: use e.g. 30m, 4h, 1h30m, 1d or off")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = days * 86_400 + hours * 3600 + minutes * 60 + seconds
    if not 60 <= total <= MAX_REVERT_AFTER_S:
        raise ValueError("must be between 1 minute and 30 days, or off")
    return total


class SettingsError(Exception):
    """Configuration that cannot work; the message names the variable and what is wrong."""


class SilenceBackend(StrEnum):
    GRAFANA = "grafana"
    ALERTMANAGER = "alertmanager"


class ScalerBackend(StrEnum):
    NONE = "none"
    WEBHOOK = "webhook"
    ARC = "arc"
    SQS = "sqs"
    AWS_ASG = "aws-asg"


class MetricsBackend(StrEnum):
    ALERT = "alert"
    PROMETHEUS = "prometheus"
    GITHUB = "github"
    HUD = "hud"


class JobsBackend(StrEnum):
    """Where the jobs behind the queue are listed (`/queue jobs`, diagnostics)."""

    AUTO = "auto"  # the metrics backend, when it can list them
    GITHUB = "github"
    HUD = "hud"
    NONE = "none"


class ScaleTargetSetting(BaseModel):
    """One runner type's entry of SCALER_TARGETS."""

    model_config = ConfigDict(extra="forbid")

    target: str = Field(min_length=1, max_length=300)
    cap: int | None = Field(default=None, ge=1, le=10_000)
    ceiling: int | None = Field(default=None, ge=1, le=1_000_000)

    @model_validator(mode="before")
    @classmethod
    def _bare_target(cls, value: object) -> object:
        """`"linux.2xlarge": "arc-runners/x"` is short for `{"target": "arc-runners/x"}`."""
        return {"target": value} if isinstance(value, str) else value


class Settings(BaseSettings):
    """queuepilot's configuration, from the environment and `.env`."""

    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", case_sensitive=False, env_ignore_empty=True
    )

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_channel: str = ""
    # Team channels: a JSON list of {"matchers": [...], "channel": "C..."}, tried in order, the
    # first whose matchers all hold takes the incident; SLACK_CHANNEL takes the rest.
    slack_routes: Annotated[tuple[Route, ...], NoDecode] = ()
    slash_command: str = "/queue"
    # Slack allows about one message per second per channel, and chat.update is Tier 3 (~50/min);
    # pacing below those keeps bursts of alerts from ever meeting a 429.
    slack_post_interval_ms: int = Field(default=1000, ge=0, le=60_000)
    slack_update_interval_ms: int = Field(default=1200, ge=0, le=60_000)
    # Slack lets a channel take a short burst above one post per second; the sender's token
    # bucket holds this many posts, refilled one per SLACK_POST_INTERVAL_MS.
    slack_post_burst: int = Field(default=3, ge=1, le=20)
    # A Slack call not answered within this long is treated as uncertain: a post is looked up
    # (by its metadata) before it is sent again.
    slack_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # One root message is edited at most this often; changes in between are folded into one edit.
    root_edit_interval_ms: int = Field(default=2000, ge=0, le=600_000)

    # A storm: this many new alert groups waiting for their root post at once in a channel.
    # Then one digest message lists them all at once (0 turns the digest off).
    storm_digest_threshold: int = Field(default=5, ge=0, le=10_000)
    # The storm is over, and its digest becomes a summary, after this long without a new group.
    storm_quiet_seconds: float = Field(default=60.0, gt=0, le=86_400)

    redis_url: str = "redis://localhost:6379/0"
    # High availability: the Sentinels (host:port,…) that watch the master named below. The
    # master's password and database come from REDIS_URL. (Or REDIS_URL=redis+sentinel://…)
    redis_sentinels: str | None = None
    redis_sentinel_master: str = "mymaster"
    redis_sentinel_password: SecretStr | None = None
    # A notification is answered 202 only once this many replicas have it, so a failover never
    # loses an accepted one. Default: 1 with Sentinel, 0 for a single Redis.
    redis_wait_replicas: int | None = Field(default=None, ge=0, le=10)
    redis_prefix: str = "qp"
    port: int = Field(default=3000, ge=1, le=65535)
    host: str = "0.0.0.0"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

    alert_webhook_token: SecretStr | None = None
    # Alert endpoints are closed by default: without any credential `serve` refuses to start,
    # unless the operator says the network is private.
    alert_webhook_allow_unauthenticated: bool = False
    alert_webhook_hmac_secret: SecretStr | None = None
    # A signature of the body alone can be replayed forever; only for Grafana versions that
    # cannot send the timestamp header.
    alert_webhook_hmac_allow_no_timestamp: bool = False
    alert_webhook_basic_user: str | None = None
    alert_webhook_basic_password: SecretStr | None = None
    alert_max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)

    silence_backend: SilenceBackend | None = None
    grafana_url: str | None = None
    grafana_token: SecretStr | None = None
    alertmanager_url: str | None = None
    # Every backend call (silences, scalers, metrics) gives up after this long: a responder is
    # waiting, and the answer "it did not answer" is better than none.
    backend_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # How often the tick asks the silence backend whether a silence made from Slack still holds.
    silence_check_seconds: int = Field(default=60, ge=5, le=3600)
    metrics_backend: MetricsBackend = MetricsBackend.ALERT
    # The fleet is read at most this often, by one replica, for every open incident.
    metrics_interval_seconds: int = Field(default=60, ge=1, le=3600)
    prometheus_url: str | None = None
    prometheus_token: SecretStr | None = None
    # Field of a runner type's reading -> PromQL, replacing the ARC defaults (see the README).
    prometheus_queries: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    prometheus_runner_type_label: str = "name"
    # Stripped from the label's value: ARC 0.14 runner sets are "<scale set>-<5 chars>".
    prometheus_name_suffix: str = "-[bcdfghjklmnpqrstvwxz2456789]{5}$"
    prometheus_rate_window: str = Field(default="10m", pattern=r"^[0-9]+[smhd]$")
    github_token: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    github_org: str = ""
    # owner/name, comma-separated: the repositories whose queued jobs are counted.
    github_repos: Annotated[tuple[str, ...], NoDecode] = ()
    hud_url: str | None = None
    hud_token: SecretStr | None = None
    hud_query: Literal["queued_jobs_aggregate", "queued_jobs_by_label"] = "queued_jobs_aggregate"
    # The query's parameters as JSON, over the defaults (queuedThresholdMinutes 5, as PyTorch's
    # own queue alert counts).
    hud_parameters: Annotated[dict[str, object], NoDecode] = Field(default_factory=dict)
    # Where the jobs behind the queue come from: with ARC's numbers from Prometheus, the HUD or
    # GitHub can still say which workflows queue.
    jobs_backend: JobsBackend = JobsBackend.AUTO
    # How long a new runner may take to register; runners asked for longer than this and still
    # missing are a cause diagnostics name ("runners not registering").
    runner_boot_minutes: float = Field(default=5.0, gt=0, le=240)
    # Early warning: a channel message when a runner type's queue is forecast to cross the
    # alert's thresholds within this many minutes (0: off). The thresholds are the latest
    # incident's (what the alert rule said), else these.
    early_warning_minutes: float = Field(default=15.0, ge=0, le=240)
    # When the weekly capacity report is posted in SLACK_CHANNEL, e.g. "mon 09:00 Europe/London";
    # unset: only `/queue report`.
    report_schedule: Annotated[Schedule | None, NoDecode] = None
    early_warning_queued: float | None = Field(default=None, gt=0)
    early_warning_wait_minutes: float | None = Field(default=None, gt=0)
    # ARC's assigned jobs unchanged this long while runners idle: "listener stalled" (PyTorch's
    # ARCListenerStall rule uses 15 minutes).
    listener_stall_minutes: float = Field(default=15.0, gt=0, le=240)
    # The queue counts as drained when every runner type has at most DRAIN_MAX_QUEUED jobs
    # waiting, none longer than DRAIN_MAX_WAIT_MINUTES, for DRAIN_CHECKS checks in a row
    # (DRAIN_CHECK_SECONDS apart once the first one found it drained).
    drain_checks: int = Field(default=3, ge=1, le=100)
    drain_max_queued: float = Field(default=0, ge=0)
    drain_max_wait_minutes: float = Field(default=5, ge=0)
    drain_check_seconds: int = Field(default=60, ge=1, le=3600)
    # Forecasts say how many runners would drain the queue within this long.
    drain_target_minutes: float = Field(default=30, gt=0, le=1440)
    # native: Slack draws the trend in the status replies and the summary (no upload, no
    # files:write); image: a PNG uploaded with every Nth status, also the fallback when the
    # workspace refuses the block.
    chart_style: ChartStyle = ChartStyle.NATIVE
    # As pictures, the trend chart goes with every Nth new status reply (0: only the summary's).
    status_chart_every: int = Field(default=3, ge=0, le=100)
    scaler_backend: ScalerBackend = ScalerBackend.NONE
    # Runner type -> what the backend scales, as JSON: {"linux.2xlarge": "arc-runners/x"} or
    # {"linux.2xlarge": {"target": "arc-runners/x", "cap": 20, "ceiling": 200}}. Only the types
    # listed here can be scaled from Slack.
    scaler_targets: Annotated[dict[str, ScaleTargetSetting], NoDecode] = Field(default_factory=dict)
    # The most runners one request may add, for targets that name no cap of their own.
    scale_default_cap: int = Field(default=10, ge=1, le=10_000)
    # After a scale-up of a runner type, another one waits this long (a double submit, two
    # people reacting to the same alert); the refusal says who scaled it and when.
    scale_cooldown_seconds: int = Field(default=60, ge=0, le=3600)
    # A scale-up from Slack is put back when its incident resolves (drained or by hand), and at
    # the latest this long after it, so a forgotten one does not run for days: 4h covers a
    # typical queue incident, and a longer one gets a thread reply and can be scaled again (or
    # kept, `/queue scale … keep`). "30m", "4h", "1h30m", "1d", plain seconds, or "off" (only
    # when the incident resolves), as seconds.
    scale_revert_after: int = Field(default=4 * 3600, ge=0, le=MAX_REVERT_AFTER_S)
    scaler_webhook_url: str | None = None
    scaler_webhook_secret: SecretStr | None = None
    # arc: a kubeconfig file; without one, the pod's service account (in-cluster).
    scaler_kubeconfig: str | None = None
    scaler_arc_namespace: str = "arc-runners"
    scaler_sqs_queue_url: str | None = None
    scaler_sqs_repository: str = ""
    scaler_sqs_installation_id: str = ""
    aws_region: str | None = None
    aws_endpoint_url: str | None = None
    scale_allowed_users: Annotated[tuple[str, ...], NoDecode] = ()

    status_interval_seconds: int = Field(default=600, ge=1, le=86_400)
    # Each replica looks for due status posts this often; the due times live in Redis.
    status_tick_seconds: float = Field(default=5.0, gt=0, le=300)
    # A group that fires again this soon after resolving reopens its thread instead of a new one.
    reopen_window_seconds: int = Field(default=3600, ge=0, le=7 * 86_400)
    # Resolved incidents (state, timeline, thread location) are forgotten this long after.
    incident_retention_days: int = Field(default=30, ge=1, le=3650)
    # Entries a dead replica left unacknowledged are taken over after this long.
    intake_reclaim_idle_ms: int = Field(default=30_000, ge=100, le=3_600_000)
    intake_max_attempts: int = Field(default=10, ge=1, le=1000)

    @field_validator("scale_allowed_users", "github_repos", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("scaler_targets", "prometheus_queries", "hud_parameters", mode="before")
    @classmethod
    def _json_map(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"must be a JSON object: {exc}") from None
        return value

    @field_validator("report_schedule", mode="before")
    @classmethod
    def _schedule(cls, value: object) -> object:
        return parse_schedule(value) if isinstance(value, str) else value

    @field_validator("slack_routes", mode="before")
    @classmethod
    def _routes(cls, value: object) -> object:
        return parse_routes(value) if isinstance(value, str) else value

    @field_validator("scale_revert_after", mode="before")
    @classmethod
    def _span(cls, value: object) -> object:
        return parse_span(value) if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        # slack_sdk joins base_url and method name by plain concatenation.
        return value if value.endswith("/") else value + "/"

    def sentinel(self) -> SentinelTarget | None:
        """Where Sentinel is, from REDIS_SENTINELS or a redis+sentinel:// REDIS_URL."""
        try:
            if self.redis_url.startswith(f"{SENTINEL_SCHEME}://"):
                target = parse_sentinel_url(self.redis_url)
            elif self.redis_sentinels:
                parts = urlsplit(self.redis_url)
                db = parts.path.strip("/")
                target = SentinelTarget(
                    parse_sentinels(self.redis_sentinels),
                    self.redis_sentinel_master,
                    int(db) if db.isdigit() else 0,
                    unquote(parts.password) if parts.password else None,
                )
            else:
                return None
        except (RedisSetupError, ValueError) as exc:
            raise SettingsError(str(exc)) from None
        password = self.redis_sentinel_password
        if password is not None:
            target = replace(target, sentinel_password=password.get_secret_value())
        return target

    @property
    def wait_replicas(self) -> int:
        if self.redis_wait_replicas is not None:
            return self.redis_wait_replicas
        return 1 if self.sentinel() is not None else 0

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def has_webhook_credential(self) -> bool:
        basic = self.alert_webhook_basic_user is not None and (
            self.alert_webhook_basic_password is not None
        )
        return bool(self.alert_webhook_token or self.alert_webhook_hmac_secret or basic)

    def check_serve(self) -> None:
        """Refuse to serve with settings that would fail later, at the first alert."""
        self.sentinel()
        if self.slack_bot_token is None:
            raise SettingsError("SLACK_BOT_TOKEN is required (the bot token, xoxb-…)")
        if not self.socket_mode and self.slack_signing_secret is None:
            raise SettingsError("SLACK_SIGNING_SECRET is required in HTTP mode")
        if not self.slack_channel:
            raise SettingsError("SLACK_CHANNEL is required (the channel ID where incidents open)")
        if (self.alert_webhook_basic_user is None) != (self.alert_webhook_basic_password is None):
            raise SettingsError(
                "ALERT_WEBHOOK_BASIC_USER and ALERT_WEBHOOK_BASIC_PASSWORD must be set together"
            )
        if not self.has_webhook_credential and not self.alert_webhook_allow_unauthenticated:
            raise SettingsError(
                "no alert webhook credential: set ALERT_WEBHOOK_TOKEN, ALERT_WEBHOOK_HMAC_SECRET "
                "or ALERT_WEBHOOK_BASIC_USER/ALERT_WEBHOOK_BASIC_PASSWORD "
                "(or ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED=true on a private network)"
            )
        self._check_silences()
        self._check_scaler()
        self._check_metrics()

    def _check_metrics(self) -> None:
        backend = self.metrics_backend
        needs = {
            MetricsBackend.PROMETHEUS: ("prometheus_url",),
            MetricsBackend.GITHUB: ("github_token",),
            MetricsBackend.HUD: ("hud_url",),
        }.get(backend, ())
        missing = [name.upper() for name in needs if not getattr(self, name)]
        if missing:
            raise SettingsError(f"METRICS_BACKEND={backend.value} needs {' and '.join(missing)}")
        if backend is MetricsBackend.GITHUB and not (self.github_org or self.github_repos):
            raise SettingsError("METRICS_BACKEND=github needs GITHUB_ORG and/or GITHUB_REPOS")
        bad = [repo for repo in self.github_repos if repo.count("/") != 1]
        if bad:
            raise SettingsError(f"GITHUB_REPOS must list owner/name, not {bad[0]!r}")
        if backend is MetricsBackend.HUD:
            self._check_hud_threshold()
        jobs = self.jobs_backend
        if jobs is JobsBackend.GITHUB and not (self.github_token and self.github_repos):
            raise SettingsError("JOBS_BACKEND=github needs GITHUB_TOKEN and GITHUB_REPOS")
        if jobs is JobsBackend.HUD and not self.hud_url:
            raise SettingsError("JOBS_BACKEND=hud needs HUD_URL")
        if backend is MetricsBackend.PROMETHEUS:
            from bot.domain.fleet import FIELDS, unknown_fields

            unknown = unknown_fields(self.prometheus_queries)
            if unknown:
                raise SettingsError(
                    f"PROMETHEUS_QUERIES: unknown fields {unknown}; known: {sorted(FIELDS)}"
                )

    def _check_hud_threshold(self) -> None:
        """Refused, not warned: the HUD lists only jobs queued longer than its threshold, so
        with a threshold past the drain's wait limit no incident could ever close by drain (a
        label it lists has waited too long; one it lacks may have waited 29 minutes of 30)."""
        from bot.domain.hud_queries import threshold_minutes
        from bot.domain.incident_fleet import absence_can_drain

        try:
            threshold = threshold_minutes(self.hud_query, self.hud_parameters)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        if not absence_can_drain(threshold, self.drain_max_wait_minutes):
            fix = "raise DRAIN_MAX_WAIT_MINUTES to at least that"
            if self.hud_query == "queued_jobs_aggregate":
                fix = "lower queuedThresholdMinutes in HUD_PARAMETERS or " + fix
            raise SettingsError(
                f"HUD_QUERY={self.hud_query} counts only jobs queued longer than {threshold} "
                f"min, more than DRAIN_MAX_WAIT_MINUTES ({self.drain_max_wait_minutes:g}): no "
                f"incident could close by drain; {fix}"
            )

    def _check_silences(self) -> None:
        if self.silence_backend is SilenceBackend.ALERTMANAGER and not self.alertmanager_url:
            raise SettingsError("SILENCE_BACKEND=alertmanager needs ALERTMANAGER_URL")
        if self.silence_backend is SilenceBackend.GRAFANA and not (
            self.grafana_url and self.grafana_token
        ):
            raise SettingsError(
                "SILENCE_BACKEND=grafana needs GRAFANA_URL and GRAFANA_TOKEN "
                "(a service-account token allowed to create and remove silences)"
            )

    def _check_scaler(self) -> None:
        backend = self.scaler_backend
        if backend is ScalerBackend.NONE:
            return
        if not self.scaler_targets:
            raise SettingsError(
                f"SCALER_BACKEND={backend.value} needs SCALER_TARGETS: a JSON map of runner type "
                'to target, e.g. {"linux.2xlarge": {"target": "...", "cap": 10}}'
            )
        needs = {
            ScalerBackend.WEBHOOK: ("scaler_webhook_url", "scaler_webhook_secret"),
            ScalerBackend.SQS: ("scaler_sqs_queue_url", "scaler_sqs_repository"),
        }.get(backend, ())
        missing = [name.upper() for name in needs if not getattr(self, name)]
        if missing:
            raise SettingsError(f"SCALER_BACKEND={backend.value} needs {' and '.join(missing)}")
        if backend is ScalerBackend.SQS and "/" not in self.scaler_sqs_repository:
            raise SettingsError("SCALER_SQS_REPOSITORY must be owner/name, e.g. pytorch/pytorch")


def load_settings(**overrides: object) -> Settings:
    """Build Settings, turning pydantic's report into one line that names the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "_".join(str(part) for part in first["loc"]).upper() or "settings"
        raise SettingsError(f"{name}: {first['msg']}") from None
