"""Settings: every knob in one validated object, read once at start and passed down.

Each field is an environment variable of the same name, upper-cased (read by
`bot.config.loading`, with an optional `.env` in the working directory). Its default,
description, group and whether an operator needs it at all (`advanced`: Slack's own limits and
internal tuning) live beside it, and the reference in docs/configuration.md is generated from
them, so the two cannot drift. Every part of the bot takes this one object and reads the fields
it uses by their names, so a variable's readers are found by its name; a test builds it with
only the values it sets (`Settings(storm_digest_threshold=2)`), the rest at their defaults.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode

from bot.config.values import (
    Days,
    FractionalSeconds,
    HttpUrl,
    Milliseconds,
    Minutes,
    OptionalHttpUrl,
    RedisUrl,
    Seconds,
    app_or_client_id,
    channel_id,
    owner_names,
    rsa_private_key,
    slack_member_ids,
    token_prefix,
)
from bot.domain.capacity import Schedule, parse_schedule
from bot.domain.early_warning import Thresholds
from bot.domain.incident_fleet import DrainRule
from bot.domain.message import ChartStyle
from bot.domain.routes import Route, Routing, parse_routes
from bot.domain.runner_names import RunnerNames, scale_set_problem
from bot.storage.connection import (
    SENTINEL_SCHEME,
    RedisSetupError,
    SentinelTarget,
    parse_sentinel_url,
    parse_sentinels,
)

MAX_REVERT_AFTER_S = 30 * 86_400

SLACK = "Slack"
REDIS = "Redis"
WEBHOOKS = "Alert webhooks"
INCIDENTS = "Incidents"
SILENCES = "Silences"
SCALING = "Scaling"
METRICS = "Live queue metrics"
FORECASTS = "Early warning and the capacity report"
ISSUES = "The alert's GitHub issue"
SERVER = "Server"
GROUPS = (
    SLACK, REDIS, WEBHOOKS, SERVER, INCIDENTS, SILENCES, SCALING, METRICS, FORECASTS, ISSUES
)  # fmt: skip


def setting(
    default: Any = None,
    doc: str = "",
    *,
    group: str,
    advanced: bool = False,
    example: str | None = None,
    factory: Any = None,
    **constraints: Any,
) -> Any:
    """A field with what the reference says of it."""
    extra: dict[str, Any] = {"group": group, "advanced": advanced}
    if example is not None:
        extra["example"] = example
    if factory is not None:
        return Field(
            default_factory=factory, description=doc, json_schema_extra=extra, **constraints
        )
    return Field(default, description=doc, json_schema_extra=extra, **constraints)


class SettingsError(Exception):
    """Configuration that cannot work: every problem, each naming its variable and the fix."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


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

    # None: derived where the backend can (arc: the runner type's scale set).
    target: str | None = Field(default=None, min_length=1, max_length=300)
    cap: int | None = Field(default=None, ge=1, le=10_000)
    ceiling: int | None = Field(default=None, ge=1, le=1_000_000)

    @model_validator(mode="before")
    @classmethod
    def _bare_target(cls, value: object) -> object:
        """`"linux.2xlarge": "arc-runners/x"` is short for `{"target": "arc-runners/x"}`."""
        return {"target": value} if isinstance(value, str) else value


def _json_object(value: object) -> object:
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"must be a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("must be a JSON object ({...})")
        return parsed
    return value


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


JsonObject = Annotated[dict[str, Any], NoDecode]


def _scale_set_name(name: str) -> str:
    problem = scale_set_problem(name)
    if problem:
        raise ValueError(problem)
    return name


ScaleSet = Annotated[str, AfterValidator(_scale_set_name)]
AppPrivateKey = Annotated[SecretStr | None, AfterValidator(rsa_private_key)]


class Settings(BaseModel):
    """queuepilot's configuration: what the environment gave, or a test."""

    # A name that is no setting is a mistake in the code that built it (the environment's
    # reader ignores other variables: `bot.config.loading`).
    model_config = ConfigDict(extra="forbid", validate_default=True)

    # -- Slack --------------------------------------------------------------------------------
    slack_bot_token: Annotated[
        SecretStr | None, AfterValidator(token_prefix("xoxb-", "a bot token"))
    ] = setting(
        doc="The bot token (xoxb-…): OAuth & Permissions → Bot User OAuth Token. Required.",
        group=SLACK,
    )
    slack_signing_secret: SecretStr | None = setting(
        doc="Basic Information → Signing Secret: verifies every request Slack sends to "
        "/slack/events. Required in HTTP mode.",
        group=SLACK,
    )
    slack_app_token: Annotated[
        SecretStr | None, AfterValidator(token_prefix("xapp-", "an app-level token"))
    ] = setting(
        doc="An app-level token (xapp-…, scope connections:write): Socket Mode instead of HTTP, "
        "so Slack needs no public URL.",
        group=SLACK,
    )
    slack_channel: Annotated[str, AfterValidator(channel_id)] = setting(
        "",
        "The ID of the channel where incident threads open (C… or G…, not #name); invite the "
        "bot there. Required.",
        group=SLACK,
        example="C0123456789",
    )
    slack_routes: Annotated[tuple[Route, ...], NoDecode] = setting(
        (),
        "Team channels: a JSON list of routes tried in order, "
        '`[{"match": ["team=rocm"], "channel": "C…"}]`; the first whose label matchers '
        "(Alertmanager's syntax, RE2 regexes) all hold takes the incident, SLACK_CHANNEL the "
        "rest. Labels: the group's labels, team, priority and runner_type.",
        group=SLACK,
        example='[{"match": ["team=rocm"], "channel": "C0ROCMQ"}]',
    )
    slack_api_url: HttpUrl = setting(
        "https://slack.com/api/",
        "Slack's Web API base URL; the demo and tests point it at the local emulator.",
        group=SLACK,
        advanced=True,
    )
    slash_command: str = setting(
        "/queue", "The slash command the bot answers, as named in the Slack app.", group=SLACK
    )
    home_numbers_seconds: Seconds = setting(
        300,
        "An open App Home's numbers (queues, waits, busy runners) are published again at most "
        "this often; a change of state (an incident opened, acknowledged, resolved; a warning) "
        "at once, and a person opening the Home sees the numbers of now.",
        group=SLACK,
        advanced=True,
        ge=30,
        le=86_400,
    )
    slack_post_interval_ms: Milliseconds = setting(
        1000,
        "Posts to one channel are paced one per this long (Slack allows about one a second).",
        group=SLACK,
        advanced=True,
        ge=0,
        le=60_000,
    )
    slack_update_interval_ms: Milliseconds = setting(
        1200,
        "Edits (chat.update, Tier 3: about 50 a minute) are spaced this far apart, app-wide.",
        group=SLACK,
        advanced=True,
        ge=0,
        le=60_000,
    )
    slack_post_burst: int = setting(
        3,
        "A channel's sender may post this many at once before pacing (Slack allows short bursts).",
        group=SLACK,
        advanced=True,
        ge=1,
        le=20,
    )
    slack_timeout_seconds: FractionalSeconds = setting(
        10.0,
        "A Slack call not answered within this long is uncertain: a post is looked up by its "
        "metadata before it is sent again.",
        group=SLACK,
        advanced=True,
        gt=0,
        le=120,
    )
    root_edit_interval_ms: Milliseconds = setting(
        2000,
        "One root message is edited at most this often; changes in between become one edit.",
        group=SLACK,
        advanced=True,
        ge=0,
        le=600_000,
    )

    # -- Redis --------------------------------------------------------------------------------
    redis_url: RedisUrl = setting(
        "redis://localhost:6379/0",
        "Where incidents, the notification stream and every claim live (redis://, rediss://, "
        "unix:// or redis+sentinel://host:26379,host:26379/master/0). Needs persistence and "
        "maxmemory-policy noeviction.",
        group=REDIS,
    )
    redis_sentinels: str | None = setting(
        None,
        "High availability: the Sentinels (host:port,…) watching REDIS_SENTINEL_MASTER; the "
        "master's password and database come from REDIS_URL.",
        group=REDIS,
    )
    redis_sentinel_master: str = setting(
        "mymaster", "The master's name the Sentinels know.", group=REDIS
    )
    redis_sentinel_password: SecretStr | None = setting(
        None, "The Sentinels' own password, if they have one.", group=REDIS
    )
    redis_wait_replicas: int | None = setting(
        None,
        "A notification is answered 202 only once this many Redis replicas have it, so a "
        "failover never loses one. Default: 1 with Sentinel, else 0.",
        group=REDIS,
        ge=0,
        le=10,
    )
    redis_prefix: str = setting(
        "qp", "Key prefix, to share one Redis between deployments.", group=REDIS, advanced=True
    )

    # -- Server -------------------------------------------------------------------------------
    port: int = setting(3000, "The HTTP port of every endpoint.", group=SERVER, ge=1, le=65535)
    host: str = setting("0.0.0.0", "The address to listen on.", group=SERVER)
    leader_lease_ms: Milliseconds = setting(
        6000,
        "One replica at a time does the work (applies, sends to Slack, runs the periodic jobs): "
        "the one holding this lease in Redis. A leader that died is replaced within this long; "
        "a shorter lease costs Redis a renewal every third of it.",
        group=SERVER,
        advanced=True,
        ge=1000,
        le=120_000,
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = setting(
        "INFO", "DEBUG, INFO, WARNING, ERROR or CRITICAL.", group=SERVER
    )

    # -- Alert webhooks -----------------------------------------------------------------------
    alert_webhook_token: SecretStr | None = setting(
        None,
        "Alert endpoints require `Authorization: Bearer <token>`. At least one credential "
        "(this, the HMAC secret or basic auth) is required, or serve refuses to start.",
        group=WEBHOOKS,
    )
    alert_webhook_allow_unauthenticated: bool = setting(
        False,
        "true lets serve start with alert endpoints open to anyone: a private network only.",
        group=WEBHOOKS,
    )
    alert_webhook_hmac_secret: SecretStr | None = setting(
        None,
        "/alerts/grafana requires Grafana's HMAC signature (X-Grafana-Alerting-Signature of "
        "`<timestamp>:<body>`, timestamps within 5 minutes).",
        group=WEBHOOKS,
    )
    alert_webhook_hmac_allow_no_timestamp: bool = setting(
        False,
        "Also accept a signature of the body alone (a Grafana that sends no timestamp "
        "header). Such a signature can be replayed forever.",
        group=WEBHOOKS,
    )
    alert_webhook_basic_user: str | None = setting(
        None, "HTTP basic auth instead of the bearer token (with the password).", group=WEBHOOKS
    )
    alert_webhook_basic_password: SecretStr | None = setting(
        None, "The basic auth password.", group=WEBHOOKS
    )
    alert_max_body_bytes: int = setting(
        1024 * 1024,
        "The largest notification accepted, in bytes (413 past it).",
        group=WEBHOOKS,
        advanced=True,
        ge=1024,
        le=64 * 1024 * 1024,
    )

    # -- Incidents ----------------------------------------------------------------------------
    status_interval_seconds: Seconds = setting(
        600,
        "How often an open incident's thread gets a status reply.",
        group=INCIDENTS,
        ge=1,
        le=86_400,
    )
    storm_digest_threshold: int = setting(
        5,
        "A storm: this many new alert groups waiting for their root post at once in a channel "
        "get one digest message instead (0: off).",
        group=INCIDENTS,
        ge=0,
        le=10_000,
    )
    storm_quiet_seconds: FractionalSeconds = setting(
        60.0,
        "A storm is over, and its digest becomes a summary, after this long without a new group.",
        group=INCIDENTS,
        advanced=True,
        gt=0,
        le=86_400,
    )
    reopen_window_seconds: Seconds = setting(
        3600,
        "A group that fires again this soon after resolving reopens its thread instead of a "
        "new one.",
        group=INCIDENTS,
        ge=0,
        le=7 * 86_400,
    )
    incident_retention_days: Days = setting(
        30,
        "Resolved incidents (state, timeline, thread location) are forgotten this long after.",
        group=INCIDENTS,
        ge=1,
        le=3650,
    )
    drain_checks: int = setting(
        3,
        "The queue counts as drained, and the incident resolves by itself, after this many "
        "checks in a row find every runner type at or under both drain thresholds.",
        group=INCIDENTS,
        ge=1,
        le=100,
    )
    drain_max_queued: float = setting(
        0, "Drained: at most this many jobs waiting per runner type.", group=INCIDENTS, ge=0
    )
    drain_max_wait_minutes: Minutes = setting(
        5, "Drained: no job waiting longer than this.", group=INCIDENTS, ge=0
    )
    drain_check_seconds: Seconds = setting(
        60,
        "The checks after the first that found the queue drained come this far apart.",
        group=INCIDENTS,
        advanced=True,
        ge=1,
        le=3600,
    )
    drain_target_minutes: Minutes = setting(
        30,
        "Runners are recommended to drain the queue within this long: the one recommendation "
        "of the root, the statuses, `/queue`, diagnostics, the scale modal and the early "
        "warnings.",
        group=INCIDENTS,
        gt=0,
        le=1440,
    )
    chart_style: ChartStyle = setting(
        ChartStyle.NATIVE,
        "native: Slack draws the trend in the status replies and the summary (no upload, no "
        "files:write); image: a PNG uploaded with every Nth status (needs files:write), also "
        "the fallback when a workspace refuses the chart block.",
        group=INCIDENTS,
    )
    status_chart_every: int = setting(
        3,
        "As pictures, the trend chart goes with every Nth status reply (0: only the summary's).",
        group=INCIDENTS,
        ge=0,
        le=100,
    )
    status_tick_seconds: FractionalSeconds = setting(
        5.0,
        "Each replica looks for due status replies this often; the due times live in Redis.",
        group=INCIDENTS,
        advanced=True,
        gt=0,
        le=300,
    )
    intake_reclaim_idle_ms: Milliseconds = setting(
        30_000,
        "Notifications and Slack requests a crashed replica left half-done are taken over "
        "after this long.",
        group=INCIDENTS,
        advanced=True,
        ge=100,
        le=3_600_000,
    )
    intake_max_attempts: int = setting(
        10,
        "Failures before a notification that can never be applied, or a Slack request that "
        "can never be done, is dead-lettered (Slack outages and Redis errors never count).",
        group=INCIDENTS,
        advanced=True,
        ge=1,
        le=1000,
    )

    # -- Silences -----------------------------------------------------------------------------
    silence_backend: SilenceBackend | None = setting(
        None,
        "Where Silence makes a real silence: grafana or alertmanager. Unset: silencing says "
        "how to set it up.",
        group=SILENCES,
    )
    grafana_url: OptionalHttpUrl = setting(None, "Grafana's base URL.", group=SILENCES)
    grafana_token: SecretStr | None = setting(
        None,
        "A Grafana service-account token allowed to read, create and expire silences.",
        group=SILENCES,
    )
    alertmanager_url: OptionalHttpUrl = setting(
        None, "Alertmanager's base URL.", group=SILENCES, example="http://alertmanager:9093"
    )
    silence_check_seconds: Seconds = setting(
        60,
        "How often the bot asks whether a silence made from Slack still holds.",
        group=SILENCES,
        advanced=True,
        ge=5,
        le=3600,
    )
    backend_timeout_seconds: FractionalSeconds = setting(
        10.0,
        "Every backend call (silences, scalers, metrics) gives up after this long: a "
        "responder is waiting.",
        group=SILENCES,
        gt=0,
        le=120,
    )

    # -- Scaling ------------------------------------------------------------------------------
    scaler_backend: ScalerBackend = setting(
        ScalerBackend.NONE,
        "What Scale up calls: none, webhook, arc, sqs or aws-asg.",
        group=SCALING,
    )
    scaler_targets: Annotated[dict[str, ScaleTargetSetting], NoDecode] = setting(
        doc="The runner types that may be scaled, as JSON: runner type → {target, cap, "
        "ceiling}, or runner type → target. With arc the target may be left out: it is "
        "SCALER_ARC_NAMESPACE/<the type's scale set>. cap: the most one request may add; "
        "ceiling: the largest capacity queuepilot may set.",
        group=SCALING,
        factory=dict,
        example='{"linux.2xlarge": {"cap": 10, "ceiling": 200}}',
    )
    runner_scale_sets: Annotated[dict[str, ScaleSet], NoDecode] = setting(
        doc="Runner type (the alert's label) → the name of its ARC scale set (the "
        "AutoscalingRunnerSet, and the `name` of its listener metrics), only where it is not "
        "the derived one: lower-cased, every character outside a-z, 0-9 and - made -, no - at "
        "either end (linux.2xlarge → linux-2xlarge). `queuepilot check` shows the mapping.",
        group=SCALING,
        factory=dict,
        example='{"linux.g5.4xlarge.nvidia.gpu": "gpu-a10g"}',
    )
    scale_allowed_users: Annotated[tuple[str, ...], NoDecode, AfterValidator(slack_member_ids)] = (
        setting(
            (),
            "Comma-separated Slack member IDs (U…, W…) and user-group IDs (S…) allowed to scale. "
            "Empty: scaling is refused, with a message that says how to be allowed.",
            group=SCALING,
        )
    )
    scale_default_cap: int = setting(
        10,
        "The most runners one request may add, for targets that name no cap.",
        group=SCALING,
        ge=1,
        le=10_000,
    )
    scale_cooldown_seconds: Seconds = setting(
        60,
        "After a scale-up of a runner type, another waits this long (a double submit, two "
        "people reacting to one alert).",
        group=SCALING,
        ge=0,
        le=3600,
    )
    scale_revert_after: Seconds = setting(
        4 * 3600,
        "A scale-up from Slack is put back once its incident has resolved (and its queue "
        "settled: SCALE_REVERT_SETTLE), and at the latest this long after it (off: only after "
        "the incident). Between 1 minute and 30 days.",
        group=SCALING,
        ge=0,
        le=MAX_REVERT_AFTER_S,
    )
    scale_revert_settle: Seconds = setting(
        1800,
        "After its incident resolves, a scale-up goes back once the runner type's queue has "
        "stayed drained this long (a fleet queues again when capacity goes the instant an alert "
        "clears; without live numbers, this long after the resolve). 0: at the resolve.",
        group=SCALING,
        ge=0,
        le=MAX_REVERT_AFTER_S,
    )
    scaler_webhook_url: OptionalHttpUrl = setting(
        None, "webhook: where the signed scale request is POSTed.", group=SCALING
    )
    scaler_webhook_secret: SecretStr | None = setting(
        None, "webhook: the HMAC secret that signs it.", group=SCALING
    )
    scaler_kubeconfig: str | None = setting(
        None,
        "arc: a kubeconfig file; without one, the pod's service account (in-cluster).",
        group=SCALING,
    )
    scaler_arc_namespace: str = setting(
        "arc-runners", "arc: the scale sets' namespace.", group=SCALING
    )
    scaler_sqs_queue_url: OptionalHttpUrl = setting(
        None,
        "sqs: the autoscaler's scale-up queue (terraform-aws-github-runner's queued-builds "
        "queue, as PyTorch's CI runs it).",
        group=SCALING,
    )
    scaler_sqs_repository: str = setting(
        "", "sqs: owner/name the scale-up messages name.", group=SCALING
    )
    scaler_sqs_installation_id: str = setting(
        "", "sqs: the GitHub App installation ID the messages carry.", group=SCALING
    )
    aws_region: str | None = setting(
        None,
        "sqs and aws-asg: the region (else the queue URL's, or AWS's usual chain). Credentials "
        "come from AWS's usual chain.",
        group=SCALING,
    )
    aws_endpoint_url: OptionalHttpUrl = setting(
        None,
        "sqs and aws-asg: another AWS endpoint (a local AWS API).",
        group=SCALING,
        advanced=True,
    )

    # -- Live queue metrics -------------------------------------------------------------------
    metrics_backend: MetricsBackend = setting(
        MetricsBackend.ALERT,
        "Where the queue's numbers come from: alert (the notifications' own), prometheus, "
        "github or hud.",
        group=METRICS,
    )
    metrics_interval_seconds: Seconds = setting(
        60,
        "The fleet is read at most this often, by one replica, for every incident.",
        group=METRICS,
        ge=1,
        le=3600,
    )
    prometheus_url: OptionalHttpUrl = setting(
        None,
        "prometheus: the server's base URL.",
        group=METRICS,
        example="http://prometheus.monitoring:9090",
    )
    prometheus_token: SecretStr | None = setting(
        None, "prometheus: a bearer token, if the server wants one.", group=METRICS
    )
    prometheus_queries: JsonObject = setting(
        doc='prometheus: field → PromQL, replacing the ARC defaults ("" drops a field).',
        group=METRICS,
        factory=dict,
    )
    prometheus_runner_type_label: str = setting(
        "name",
        "prometheus: the label naming the runner type's series.",
        group=METRICS,
        advanced=True,
    )
    # The 5 chars come from Kubernetes' `utilrand.String` alphabet (no vowels, no 0/1/3): so
    # "linux-large" keeps its "-large".
    prometheus_name_suffix: str = setting(
        "-[bcdfghjklmnpqrstvwxz2456789]{5}$",
        "prometheus: a regex stripped from that label (ARC 0.14's runner sets are "
        "<scale set>-<5 chars>).",
        group=METRICS,
        advanced=True,
    )
    prometheus_rate_window: str = setting(
        "10m",
        "prometheus: the window of rates and means, in PromQL's syntax.",
        group=METRICS,
        advanced=True,
        pattern=r"^[0-9]+[smhd]$",
    )
    github_token: SecretStr | None = setting(
        None,
        "A GitHub token: github reads the runners and the queued jobs with it (Actions and "
        "Administration: read); GITHUB_ISSUES_REPO writes the alert's issue with it (Issues: "
        "read and write). Or a GitHub App instead: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY.",
        group=METRICS,
    )
    github_app_id: Annotated[str, AfterValidator(app_or_client_id)] = setting(
        "",
        "A GitHub App instead of GITHUB_TOKEN, for github and GITHUB_ISSUES_REPO alike: its App "
        "ID or client ID (the App's settings page). Its installation token is minted and renewed "
        "as needed.",
        group=METRICS,
    )
    github_app_private_key: AppPrivateKey = setting(
        None,
        "The GitHub App's private key: the .pem file's text (on one line, \\n for each line "
        "break). Needs the github-app extra (the image has it).",
        group=METRICS,
    )
    github_app_installation_id: int | None = setting(
        None,
        "The GitHub App's installation. Unset: the one on GITHUB_ISSUES_REPO, else on the "
        "first of GITHUB_REPOS, else on GITHUB_ORG.",
        group=METRICS,
        advanced=True,
        ge=1,
    )
    github_api_url: HttpUrl = setting(
        "https://api.github.com",
        "GitHub's REST base URL (GitHub Enterprise: https://HOST/api/v3).",
        group=METRICS,
    )
    github_org: str = setting("", "github: the organization whose runners count.", group=METRICS)
    github_repos: Annotated[tuple[str, ...], NoDecode, AfterValidator(owner_names)] = setting(
        (),
        "github: owner/name, comma-separated: the repositories whose queued jobs count.",
        group=METRICS,
    )
    github_issues_repo: str = setting(
        "",
        "owner/name where the alert's GitHub issue lives: an open issue that a pipeline such "
        "as pytorch/alerting-infra opened for the alert is found and linked both ways (the root "
        "links it; it gets the thread's link and a comment at each step that matters). Empty: "
        "no issue. Needs GITHUB_TOKEN or a GitHub App (Issues: read and write).",
        group=ISSUES,
        pattern=r"^([^/\s]+/[^/\s]+)?$",
    )
    github_issues_open: bool = setting(
        False,
        "Open an issue per incident when none is found (labels area:alerting, Pri:<priority>, "
        "Team:<team>, Source:<source>, as alerting-infra's); closed when the incident resolves, "
        "reopened if it fires again within REOPEN_WINDOW_SECONDS.",
        group=ISSUES,
    )
    github_issues_interval_ms: Milliseconds = setting(
        1000,
        "Calls to GitHub for the alert's issue, at most one per this long across replicas "
        "(GitHub asks for a second between writes, against its secondary limits).",
        group=ISSUES,
        advanced=True,
        ge=10,
        le=60_000,
    )
    hud_url: OptionalHttpUrl = setting(None, "hud: a PyTorch-style HUD's base URL.", group=METRICS)
    hud_token: SecretStr | None = setting(
        None, "hud: its bot token (sent as x-hud-internal-bot).", group=METRICS
    )
    hud_query: Literal["queued_jobs_aggregate", "queued_jobs_by_label"] = setting(
        "queued_jobs_aggregate", "hud: the saved query read.", group=METRICS
    )
    hud_parameters: JsonObject = setting(
        doc="hud: the query's parameters as JSON, over the defaults (queuedThresholdMinutes 5, "
        "as PyTorch's own queue alert counts).",
        group=METRICS,
        factory=dict,
    )
    jobs_backend: JobsBackend = setting(
        JobsBackend.AUTO,
        "Where /queue jobs and diagnostics list the jobs behind the queue: auto (the metrics "
        "backend, when it can), github (needs GITHUB_TOKEN or a GitHub App, and GITHUB_REPOS), "
        "hud or none.",
        group=METRICS,
    )
    runner_boot_minutes: Minutes = setting(
        5.0,
        "How long a new runner may take to register; runners asked for longer ago and still "
        "missing are a cause diagnostics name.",
        group=METRICS,
        gt=0,
        le=240,
    )
    listener_stall_minutes: Minutes = setting(
        15.0,
        'ARC\'s assigned jobs unchanged this long while runners idle: "listener stalled".',
        group=METRICS,
        gt=0,
        le=240,
    )

    # -- Early warning and the capacity report ------------------------------------------------
    early_warning_minutes: Minutes = setting(
        15.0,
        "A quiet channel message when a runner type's queue is forecast to cross the alert's "
        "thresholds within this long (off or 0: no warnings). Needs a live METRICS_BACKEND.",
        group=FORECASTS,
        ge=0,
        le=240,
    )
    early_warning_queued: float | None = setting(
        None,
        "Before any incident has said what the alert's thresholds are: the queued jobs that "
        "fire it.",
        group=FORECASTS,
        gt=0,
    )
    early_warning_wait_minutes: Minutes | None = setting(
        None, "... and the longest wait that fires it.", group=FORECASTS, gt=0
    )
    report_schedule: Annotated[Schedule | None, NoDecode] = setting(
        None,
        "When the weekly capacity report is posted: <day> HH:MM [IANA time zone]. Unset: only "
        "`/queue report`.",
        group=FORECASTS,
        example="mon 09:00 Europe/London",
    )

    @field_validator("scale_allowed_users", "github_repos", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        return _comma_list(value)

    @field_validator(
        "scaler_targets", "prometheus_queries", "hud_parameters", "runner_scale_sets", mode="before"
    )
    @classmethod
    def _json_map(cls, value: object) -> object:
        return _json_object(value)

    @field_validator("report_schedule", mode="before")
    @classmethod
    def _schedule(cls, value: object) -> object:
        return parse_schedule(value) if isinstance(value, str) else value

    @field_validator("slack_routes", mode="before")
    @classmethod
    def _routes(cls, value: object) -> object:
        return parse_routes(value) if isinstance(value, str) else value

    @field_validator("scale_revert_after")
    @classmethod
    def _revert_span(cls, value: int) -> int:
        if 0 < value < 60:
            raise ValueError("must be between 1 minute and 30 days, or off")
        return value

    @field_validator("prometheus_name_suffix")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("slash_command")
    @classmethod
    def _command(cls, value: str) -> str:
        if not re.fullmatch(r"/[a-z0-9_-]{1,31}", value):
            raise ValueError(
                f"{value[:40]!r} is not a slash command: write it as in the app, e.g. /queue"
            )
        return value

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinels(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_sentinels(value)
            except RedisSetupError as exc:
                raise ValueError(f"{exc}: list host:port, comma-separated") from None
        return value

    @field_validator("scaler_sqs_repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        return owner_names((value,))[0] if value else value

    @field_validator("scaler_arc_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise ValueError(f"{value[:70]!r} is not a Kubernetes namespace name")
        return value

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
    def routing(self) -> Routing:
        """SLACK_ROUTES with SLACK_CHANNEL, the channel of what no route takes."""
        return Routing(self.slack_routes, self.slack_channel)

    @property
    def runner_names(self) -> RunnerNames:
        """Runner type <-> ARC scale set: RUNNER_SCALE_SETS' exceptions, else derived, for the
        types the bot knows (those and SCALER_TARGETS')."""
        return RunnerNames(self.runner_scale_sets, known=self.scaler_targets)

    @property
    def scale_allowed_groups(self) -> tuple[str, ...]:
        """The user groups (S…) of SCALE_ALLOWED_USERS."""
        return tuple(entry for entry in self.scale_allowed_users if entry.startswith("S"))

    @property
    def scalable(self) -> frozenset[str]:
        """The runner types Scale up is offered for: those given a scale target."""
        if self.scaler_backend is ScalerBackend.NONE:
            return frozenset()
        return frozenset(self.scaler_targets)

    @property
    def drain_rule(self) -> DrainRule:
        return DrainRule(self.drain_max_queued, self.drain_max_wait_minutes)

    @property
    def thresholds(self) -> Thresholds:
        """Where the alert fires, before any incident has said it (EARLY_WARNING_QUEUED, …)."""
        return Thresholds(self.early_warning_queued, self.early_warning_wait_minutes)

    @property
    def wait_replicas(self) -> int:
        if self.redis_wait_replicas is not None:
            return self.redis_wait_replicas
        return 1 if self.sentinel() is not None else 0

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def github_app(self) -> bool:
        """A GitHub App (its ID and key) is configured."""
        return bool(self.github_app_id and self.github_app_private_key)

    @property
    def has_github_credential(self) -> bool:
        """GITHUB_TOKEN or a GitHub App: what the GitHub readers call with."""
        return self.github_token is not None or self.github_app

    @property
    def has_webhook_credential(self) -> bool:
        basic = self.alert_webhook_basic_user is not None and (
            self.alert_webhook_basic_password is not None
        )
        return bool(self.alert_webhook_token or self.alert_webhook_hmac_secret or basic)
