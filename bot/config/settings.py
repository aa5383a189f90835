"""Settings: every knob in one validated object, read once at start and passed down. A field is
the environment variable of its name upper-cased; its docstring and its class are its line and
section of docs/configuration.md (`bot.config.reference`)."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import NoDecode

from bot.config import values
from bot.domain.alerting.routes import Route, Routing, parse_routes
from bot.domain.incident.incidents import DrainRule
from bot.domain.message import ChartStyle
from bot.domain.reading.capacity import Schedule, parse_schedule
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.runner_names import RunnerNames, scale_set_problem
from bot.storage.connection import (
    SENTINEL_SCHEME,
    RedisSetupError,
    SentinelTarget,
    parse_sentinel_url,
    parse_sentinels,
)


class SettingsError(Exception):
    """Every problem of a configuration, each naming its variable and the fix."""

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


class PilotSetting(BaseModel):
    """A runner type's pilot: names as HPA's `behavior` would have them in comments."""

    model_config = ConfigDict(extra="forbid")

    up_to: int = Field(ge=1, le=10_000)  # maxReplicas, counted as runners the pilot added
    step: int = Field(ge=1, le=10_000)  # a scaleUp policy's value per act
    # "dry-run": it says in the thread (or on the early warning) what it would have done, and
    # scales nothing.
    mode: Literal["on", "dry-run"] = "on"
    hold_seconds: int = Field(180, ge=0, le=3600)  # scaleUp.stabilizationWindowSeconds
    period_seconds: int = Field(60, ge=1, le=3600)  # a scaleUp policy's periodSeconds
    # After a person's scale-up: the pilot does not fight them (its own acts wait a period).
    cooldown_seconds: int = Field(600, ge=0, le=86_400)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: object) -> object:
        if isinstance(value, dict) and (unknown := sorted(set(value) - set(cls.model_fields))):
            known = ", ".join(cls.model_fields)
            raise ValueError(f"unknown key {', '.join(map(repr, unknown))}: its keys are {known}")
        return value

    @model_validator(mode="after")
    def _step_within(self) -> PilotSetting:
        if self.step > self.up_to:
            raise ValueError(
                f"step {self.step} is more than up_to {self.up_to}: no act could take a whole "
                "step; lower step or raise up_to"
            )
        return self


class ScaleTargetSetting(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # None: derived where the backend can (arc: the runner type's scale set).
    target: str | None = Field(default=None, min_length=1, max_length=300)
    cap: int | None = Field(default=None, ge=1, le=10_000)
    ceiling: int | None = Field(default=None, ge=1, le=1_000_000)
    pilot: PilotSetting | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_target(cls, value: object) -> object:
        """`"linux.2xlarge": "arc-runners/x"` is short for `{"target": "arc-runners/x"}`."""
        return {"target": value} if isinstance(value, str) else value


def _scale_set(name: str) -> str:
    if problem := scale_set_problem(name):
        raise ValueError(problem)
    return name


def _revert_span(seconds: int) -> int:
    if 0 < seconds < 60:
        raise ValueError("must be between 1 minute and 30 days, or off")
    return seconds


ScaleTargets = values.json_map(ScaleTargetSetting)
ScaleSets = values.json_map(Annotated[str, AfterValidator(_scale_set)])
Routes = Annotated[tuple[Route, ...], NoDecode, values.parsed(parse_routes)]
WeeklyAt = Annotated[Schedule | None, NoDecode, values.parsed(parse_schedule)]
RevertAfter = Annotated[values.Span, AfterValidator(_revert_span)]
LogLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], values.Upper]


class Group(BaseModel):
    # A name that is no setting is the calling code's mistake (the environment's reader ignores it).
    model_config = ConfigDict(extra="forbid", validate_default=True, use_attribute_docstrings=True)


class Slack(Group, title="Slack"):
    slack_bot_token: values.BotToken = None
    """The bot token (xoxb-…): OAuth & Permissions → Bot User OAuth Token. Required."""
    slack_signing_secret: SecretStr | None = None
    """Basic Information → Signing Secret: verifies Slack's requests. Required in HTTP mode."""
    slack_app_token: values.AppToken = None
    """An app-level token (xapp-…, connections:write): Socket Mode, so Slack needs no public URL."""
    slack_channel: values.ChannelId = Field("", examples=["C0123456789"])
    """The ID of the channel where incident threads open (C… or G…, not #name); invite the bot
    there. Required."""
    slack_routes: Routes = Field((), examples=['[{"match": ["team=rocm"], "channel": "C0ROCMQ"}]'])
    """Team channels: a JSON list of routes tried in order, `[{"match": ["team=rocm"], "channel":
    "C…"}]`; the first whose label matchers (Alertmanager's syntax, RE2 regexes) all hold takes the
    incident, SLACK_CHANNEL the rest. Labels: the group's labels, team, priority and runner_type."""
    slash_command: values.SlashCommand = "/queue"
    """The slash command the bot answers, as named in the Slack app."""


class Redis(Group, title="Redis"):
    redis_url: values.RedisUrl = "redis://localhost:6379/0"
    """Where incidents, the notification stream and every claim live (redis://, rediss://, unix://
    or redis+sentinel://host:26379,host:26379/master/0). Needs persistence and maxmemory-policy
    noeviction."""
    redis_sentinels: values.Sentinels = None
    """High availability: the Sentinels (host:port,…) watching REDIS_SENTINEL_MASTER; the master's
    password and database come from REDIS_URL."""
    redis_sentinel_master: str = "mymaster"
    """The master's name the Sentinels know."""
    redis_sentinel_password: SecretStr | None = None
    """The Sentinels' own password, if they have one."""
    redis_wait_replicas: int | None = Field(None, ge=0, le=10)
    """A notification is answered 202 only once this many Redis replicas have it, so a failover
    never loses one. Default: 1 with Sentinel, else 0."""


class Webhooks(Group, title="Alert webhooks"):
    alert_webhook_token: SecretStr | None = None
    """Alert endpoints require `Authorization: Bearer <token>`. At least one credential (this, the
    HMAC secret or basic auth) is required, or serve refuses to start."""
    alert_webhook_allow_unauthenticated: bool = False
    """true lets serve start with alert endpoints open to anyone: a private network only."""
    alert_webhook_hmac_secret: SecretStr | None = None
    """/alerts/grafana requires Grafana's HMAC signature (X-Grafana-Alerting-Signature of
    `<timestamp>:<body>`, timestamps within 5 minutes)."""
    alert_webhook_hmac_allow_no_timestamp: bool = False
    """Also accept a signature of the body alone (no timestamp header), replayable forever."""
    alert_webhook_basic_user: str | None = None
    """HTTP basic auth instead of the bearer token (with the password)."""
    alert_webhook_basic_password: SecretStr | None = None
    """The basic auth password."""


class Server(Group, title="Server"):
    port: int = Field(3000, ge=1, le=65535)
    """The HTTP port of every endpoint."""
    host: str = "0.0.0.0"
    """The address to listen on."""
    log_level: LogLevel = "INFO"
    """DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    shutdown_grace_seconds: values.FractionalSeconds = Field(10.0, gt=0, le=300)
    """On SIGTERM the requests being served get this long to be answered before the work stops (one
    takes milliseconds while Redis answers; Slack gives up after 3 s). Kubernetes'
    terminationGracePeriodSeconds must cover the preStop pause, this and the stop (up to 15 s)."""
    memory_limit_mib: int | None = Field(None, ge=32, le=1024 * 1024)
    """The memory this process is given, in MiB, which sizes its caches (docs/operations.md). The
    Helm chart sets it from the container's limit. Unset: the cgroup's limit, else 320."""


class Incidents(Group, title="Incidents"):
    status_interval_seconds: values.Seconds = Field(600, ge=1, le=86_400)
    """How often an open incident's thread gets a status reply."""
    storm_digest_threshold: int = Field(5, ge=0, le=10_000)
    """A storm: this many new alert groups waiting at once for their root post in a channel get one
    digest message instead (0: off)."""
    ack_on_action: bool = True
    """A responder's first act on an unacknowledged incident (silence, scale up, diagnostics)
    acknowledges it in their name: the Home and the root then name who is on it. false: only
    Acknowledge does."""
    reopen_window_seconds: values.Seconds = Field(3600, ge=0, le=7 * 86_400)
    """A group firing again this soon after resolving reopens its thread instead of a new one."""
    incident_retention_days: values.Days = Field(30, ge=1 / 1440, le=3650)
    """Resolved incidents are forgotten this long after (`12h` works too, down to a minute)."""
    drain_checks: int = Field(3, ge=1, le=100)
    """The queue is drained, and the incident resolves by itself, after this many checks in a row,
    each of another reading, find every runner type at or under both drain thresholds."""
    drain_max_queued: float = Field(0, ge=0)
    """Drained: at most this many jobs waiting per runner type."""
    drain_max_wait_minutes: values.Minutes = Field(5, ge=0)
    """Drained: no job waiting longer than this."""
    drain_follow_max: values.Span = Field(2 * 3600, ge=0, le=7 * 86_400)
    """An alert that clears while the live readings still see jobs queued over its thresholds keeps
    its thread's statuses until the queue drains or falls under them, for at most this long (0:
    resolve with the alert, as with METRICS_BACKEND=alert)."""
    drain_target_minutes: values.Minutes = Field(30, gt=0, le=1440)
    """Runners are recommended to drain the queue within this long (every surface shows it)."""
    advice_window: values.Span = Field(300, ge=0, le=3600)
    """The longer window: the readings that tell a climb too slow for the last few, and what a
    scale-up bought (the drain over it, before and after its runners came). It never holds an
    ask: the advice falls once every reading of ADVICE_RISE_WINDOW asked less (runners added since
    counted at once). 0 here and in ADVICE_RISE_WINDOW: each reading's own."""
    advice_rise_window: values.Span = Field(60, ge=0, le=3600)
    """The advice shown rises only once every reading over this window (and at least the two
    before it, so 0 means three readings) asked at least that much, as HPA stabilizes a scale-up: a
    spike moves nothing; and falls once every one of them asked at most that much: a dip neither."""
    chart_style: ChartStyle = ChartStyle.NATIVE
    """native: Slack draws the trend in statuses and the summary; image: a PNG uploaded with every
    Nth status (needs files:write), also the fallback where a workspace refuses the chart block."""
    status_chart_every: int = Field(3, ge=0, le=100)
    """As pictures, the trend chart goes with every Nth status reply (0: only the summary's)."""


class Silences(Group, title="Silences"):
    silence_backend: SilenceBackend | None = None
    """Where Silence makes one: grafana or alertmanager. Unset: silencing says how to set it up."""
    grafana_url: values.OptionalHttpUrl = None
    """Grafana's base URL."""
    grafana_token: SecretStr | None = None
    """A Grafana service-account token allowed to read, create and expire silences."""
    alertmanager_url: values.OptionalHttpUrl = Field(None, examples=["http://alertmanager:9093"])
    """Alertmanager's base URL."""
    backend_timeout_seconds: values.FractionalSeconds = Field(10.0, gt=0, le=120)
    """Every backend call (silences, scalers, metrics) gives up after this long: someone waits."""


class Scaling(Group, title="Scaling"):
    scaler_backend: ScalerBackend = ScalerBackend.NONE
    """What Scale up calls: none, webhook, arc, sqs or aws-asg."""
    scaler_targets: ScaleTargets = Field(
        {}, examples=['{"linux.2xlarge": {"cap": 10, "ceiling": 200}}']
    )
    """The runner types that may be scaled, as JSON: runner type → {target, cap, ceiling, pilot} or
    target (arc derives it: SCALER_ARC_NAMESPACE/<scale set>). cap: the most one request may add;
    ceiling: the largest capacity queuepilot may set; pilot: the opt-in pilot's policy,
    {"up_to": 60, "step": 20, "hold_seconds": 180, "period_seconds": 60, "cooldown_seconds": 600},
    with "mode": "dry-run" to see what it would do first (docs/pilot.md)."""
    runner_scale_sets: ScaleSets = Field(
        {}, examples=['{"linux.g5.4xlarge.nvidia.gpu": "gpu-a10g"}']
    )
    """Runner type → its ARC scale set, where not the derived one: lower-cased, other characters
    than a-z, 0-9 and - made - (linux.2xlarge → linux-2xlarge). `queuepilot check` shows them."""
    scale_allowed_users: values.MemberIds = ()
    """Comma-separated Slack member IDs (U…, W…) and user-group IDs (S…) allowed to scale. Empty:
    scaling is refused, with a message that says how to be allowed."""
    scale_default_cap: int = Field(10, ge=1, le=10_000)
    """The most runners one request may add, for targets that name no cap."""
    scale_cooldown_seconds: values.Seconds = Field(60, ge=0, le=3600)
    """After a scale-up of a runner type, another waits this long (a double submit, two people
    reacting to one alert)."""
    scale_revert_after: RevertAfter = Field(4 * 3600, ge=0, le=30 * 86_400)
    """A scale-up from Slack is put back once its incident resolved and its queue settled, and at
    the latest this long after it (off: only after the incident). 1 minute to 30 days."""
    scale_revert_settle: values.Span = Field(1800, ge=0, le=30 * 86_400)
    """A scale-up goes back once the queue has stayed drained this long after its incident resolved
    (without live numbers, this long after). 0: at the resolve."""
    pilot_enabled: bool = True
    """false stops every pilot SCALER_TARGETS declares, whatever `/queue pilot on` said. Types
    without a `pilot` policy are never scaled by queuepilot on its own."""
    scale_verify_seconds: values.Seconds | None = Field(None, gt=0, le=3600)
    """How long a scale-up from Slack is followed to its effect: its runners registered by then,
    or its reply says they did not come, and why; and its put-back, until the runners are back
    within the bound. Unset: twice RUNNER_BOOT_MINUTES, at most 15 min (a runner's usual
    start-up, with room for a new node)."""
    scaler_webhook_url: values.OptionalHttpUrl = None
    """webhook: where the signed scale request is POSTed."""
    scaler_webhook_secret: SecretStr | None = None
    """webhook: the HMAC secret that signs it."""
    scaler_kubeconfig: str | None = None
    """arc: a kubeconfig file; without one, the pod's service account (in-cluster)."""
    scaler_arc_namespace: values.Namespace = "arc-runners"
    """arc: the scale sets' namespace."""
    scaler_sqs_queue_url: values.OptionalHttpUrl = None
    """sqs: terraform-aws-github-runner's scale-up (queued-builds) queue."""
    scaler_sqs_repository: values.OwnerName = ""
    """sqs: owner/name the scale-up messages name."""
    scaler_sqs_installation_id: str = ""
    """sqs: the GitHub App installation ID the messages carry."""
    aws_region: str | None = None
    """sqs and aws-asg: the region (else the queue URL's, or AWS's usual chain, as credentials)."""


class Metrics(Group, title="Live queue metrics"):
    metrics_backend: MetricsBackend = MetricsBackend.ALERT
    """Where the queue's numbers come from: alert (the notification's), prometheus, github, hud."""
    metrics_interval_seconds: values.Seconds = Field(60, ge=1, le=3600)
    """The fleet is read at most this often, by one replica, for every incident."""
    prometheus_url: values.OptionalHttpUrl = Field(
        None, examples=["http://prometheus.monitoring:9090"]
    )
    """prometheus: the server's base URL."""
    prometheus_token: SecretStr | None = None
    """prometheus: a bearer token, if the server wants one."""
    prometheus_queries: values.JsonObject = {}
    """prometheus: field → PromQL, replacing the ARC defaults ("" drops a field)."""
    prometheus_selector: values.PromqlSelector = Field("", examples=['cluster="prod"'])
    """prometheus: label matchers (=, !=, =~, !~; values quoted) added to every series of every
    default query: the one cluster to read where a Prometheus (Thanos, Mimir) holds several, whose
    same-named scale sets would add up. Use a label every series carries (an external label).
    PROMETHEUS_QUERIES' own queries are asked as written."""
    github_token: SecretStr | None = None
    """github reads runners and queued jobs with it (Actions and Administration: read);
    GITHUB_ISSUES_REPO writes the alert's issue (Issues: read and write). Or a GitHub App."""
    github_app_id: values.AppId = ""
    """A GitHub App instead of GITHUB_TOKEN: its App ID or client ID (the App's settings page)."""
    github_app_private_key: values.AppPrivateKey = None
    """The GitHub App's private key: the .pem file's text (on one line, \\n for each line break;
    GITHUB_APP_PRIVATE_KEY_FILE takes the .pem file as it is). Needs the github-app extra (the
    image has it)."""
    github_api_url: values.HttpUrl = "https://api.github.com"
    """GitHub's REST base URL (GitHub Enterprise: https://HOST/api/v3)."""
    github_org: str = ""
    """github: the organization whose runners count."""
    github_repos: values.OwnerNames = ()
    """github: owner/name, comma-separated: the repositories whose queued jobs count."""
    github_reading_share: float = Field(0.6, gt=0, le=1)
    """github: the share of GitHub's hourly rate limit (5,000 requests) the readings may spend,
    paced to it (less often than METRICS_INTERVAL_SECONDS on a large fleet); the rest stays for
    the alert's issue, `queuepilot check` and anyone else on the token."""
    github_webhook_secret: SecretStr | None = None
    """/webhooks/github takes GitHub's workflow_job deliveries signed with it (the webhook's
    secret, X-Hub-Signature-256); unset, every delivery is refused. With it, the github backend's
    readings come from the deliveries, and polling only reconciles."""
    github_webhook_rate: float = Field(200.0, gt=0, le=100_000)
    """/webhooks/github: deliveries a second each replica takes, a second's worth at once; past it
    429 with Retry-After, before the body is read; GitHub does not send it again (the github
    backend's reconcile heals the gap). Twice a busy organization's push (100 a second, `make
    bench`): at 200 the bot spent a sixth of a core on them, and Slack's clicks were still
    answered within tens of milliseconds."""
    github_webhook_concurrency: int = Field(64, ge=1, le=10_000)
    """/webhooks/github: deliveries in progress at once on each replica (its body read, its
    signature checked, its Redis write); past it 503 with Retry-After: 1, at once. `make bench`'s
    100 a second had 8 to 20 awaiting their answer at once, and deliveries arriving at the same
    instant are all taken up to it; it bounds the bodies held (64 × ALERT_MAX_BODY_BYTES, a fifth
    of the chart's memory limit) and leaves 36 of the replica's 100 Redis connections to Slack."""
    hud_url: values.OptionalHttpUrl = None
    """hud: a PyTorch-style HUD's base URL."""
    hud_token: SecretStr | None = None
    """hud: its bot token (sent as x-hud-internal-bot)."""
    hud_query: Literal["queued_jobs_aggregate", "queued_jobs_by_label"] = "queued_jobs_aggregate"
    """hud: the saved query read."""
    hud_parameters: values.JsonObject = {}
    """hud: the query's parameters as JSON, over the defaults (queuedThresholdMinutes 5)."""
    hud_jobs_over_minutes: values.Minutes = Field(5.0, ge=0, le=1440)
    """hud: how long a job has queued before the HUD's queued_jobs lists it (torchci's 5), said
    beside the jobs listed, so their count never reads as the queue."""
    jobs_backend: JobsBackend = JobsBackend.AUTO
    """Where /queue jobs and diagnostics list the queued jobs: auto (the metrics backend, if it
    can), github (a GitHub credential and GITHUB_REPOS), hud or none."""
    runner_boot_minutes: values.Minutes = Field(5.0, gt=0, le=240)
    """How long a new runner may take to register before diagnostics name it missing."""
    listener_stall_minutes: values.Minutes = Field(15.0, gt=0, le=240)
    """ARC's assigned jobs unchanged this long while runners idle: "listener stalled"."""


class Forecasts(Group, title="Early warning and the capacity report"):
    early_warning_minutes: values.Minutes = Field(15.0, ge=0, le=240)
    """A quiet message when a runner type's queue is forecast to cross the alert's thresholds
    within this long (off: none). Needs a live METRICS_BACKEND."""
    early_warning_queued: float | None = Field(None, gt=0)
    """Before any incident has said the alert's thresholds: the queued jobs that fire it."""
    early_warning_wait_minutes: values.Minutes | None = Field(None, gt=0)
    """... and the longest wait that fires it."""
    report_schedule: WeeklyAt = Field(None, examples=["mon 09:00 Europe/London"])
    """When the weekly capacity report is posted: <day> HH:MM [IANA time zone]. Unset: only `/queue
    report`."""


class Issues(Group, title="The alert's GitHub issue"):
    github_issues_repo: str = Field("", pattern=r"^([^/\s]+/[^/\s]+)?$")
    """owner/name where the alert's GitHub issue lives (as pytorch/alerting-infra opens them),
    linked both ways and commented at each step. Needs a GitHub credential (Issues: write)."""
    github_issues_open: bool = False
    """Open an issue per incident when none is found (labelled as alerting-infra's), closed when
    it resolves, reopened if it fires again within REOPEN_WINDOW_SECONDS."""
    github_issues_open_after_seconds: values.Seconds = Field(90, ge=0, le=3600)
    """With GITHUB_ISSUES_OPEN: how long after the alert fires an issue from alerting-infra is
    waited for before queuepilot opens its own (90 s covers one SQS redelivery of its collector's,
    after the 70 s visibility timeout). 0: at once."""


class Advanced(Group, title="Advanced"):
    """Slack's published limits and the bot's internal timing: the defaults are what Slack allows
    and the benchmarks measured."""

    slack_api_url: values.SlackApiUrl = "https://slack.com/api/"
    """Slack's Web API base URL; the demo and tests point it at the local emulator."""
    home_numbers_seconds: values.Seconds = Field(300, ge=30, le=86_400)
    """An open App Home's numbers are published at most this often (a change of state at once)."""
    slack_post_interval_ms: values.Milliseconds = Field(1000, ge=0, le=60_000)
    """Posts to one channel are paced one per this long (Slack allows about one a second)."""
    slack_update_interval_ms: values.Milliseconds = Field(1200, ge=0, le=60_000)
    """Edits (chat.update, Tier 3: about 50 a minute) are spaced this far apart, app-wide."""
    slack_post_burst: int = Field(3, ge=1, le=20)
    """A channel's sender may post this many at once before pacing (Slack allows short bursts)."""
    slack_timeout_seconds: values.FractionalSeconds = Field(10.0, gt=0, le=120)
    """A Slack call unanswered this long is uncertain: a post is looked up before it is resent."""
    root_edit_interval_ms: values.Milliseconds = Field(2000, ge=0, le=600_000)
    """One root message is edited at most this often; changes in between become one edit."""
    redis_prefix: str = "qp"
    """Key prefix, to share one Redis between deployments."""
    leader_lease_ms: values.Milliseconds = Field(6000, ge=1000, le=120_000)
    """The replica holding this lease in Redis does the work; a leader that died is replaced
    within this long (renewed every third of it)."""
    alert_max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """The largest notification accepted, in bytes (413 past it)."""
    storm_quiet_seconds: values.FractionalSeconds = Field(60.0, gt=0, le=86_400)
    """A storm is over, and its digest becomes a summary, after this long without a new group."""
    drain_check_seconds: values.Seconds = Field(60, ge=1, le=3600)
    """After a check finds the queue drained, the next come this far apart (or at the status
    interval, if sooner)."""
    status_tick_seconds: values.FractionalSeconds = Field(5.0, gt=0, le=300)
    """The leader looks for due status replies this often; the due times live in Redis."""
    intake_reclaim_idle_ms: values.Milliseconds = Field(30_000, ge=100, le=3_600_000)
    """Notifications and Slack requests a dead replica left half-done are taken over after this."""
    intake_max_attempts: int = Field(10, ge=1, le=1000)
    """Failures before a notification or Slack request is dead-lettered (Slack outages and Redis
    errors never count)."""
    silence_check_seconds: values.Seconds = Field(60, ge=5, le=3600)
    """How often the bot asks whether a silence made from Slack still holds."""
    aws_endpoint_url: values.OptionalHttpUrl = None
    """sqs and aws-asg: another AWS endpoint (a local AWS API)."""
    prometheus_runner_type_label: str = "name"
    """prometheus: the label naming the runner type's series."""
    prometheus_name_suffix: values.Regex = "-[bcdfghjklmnpqrstvwxz2456789]{5}$"
    """prometheus: a regex stripped from that label (ARC 0.14 names runner sets <set>-<5 chars>)."""
    prometheus_rate_window: str = Field("10m", pattern=r"^[0-9]+[smhd]$")
    """prometheus: the window of rates and means, in PromQL's syntax."""
    github_app_installation_id: int | None = Field(None, ge=1)
    """The GitHub App's installation. Unset: GITHUB_ISSUES_REPO's, else GITHUB_REPOS' first's,
    else GITHUB_ORG's."""
    github_issues_interval_ms: values.Milliseconds = Field(1000, ge=10, le=60_000)
    """Calls to GitHub for the alert's issue, one per this long at most (GitHub asks a second
    between writes)."""
    probe_interval_seconds: values.FractionalSeconds = Field(300.0, ge=0, le=86_400)
    """The leader runs `queuepilot check`'s probes 30 s into its term (or this long, if shorter)
    and this often after; a probe that starts failing is logged once with its fix, and
    queuepilot_probe_ok reads 0 until it recovers. off: only `queuepilot check` probes."""


# In the reference's order.
GROUPS = (
    Slack, Redis, Webhooks, Server, Incidents, Silences, Scaling, Metrics, Forecasts, Issues,
    Advanced,
)  # fmt: skip


# pydantic takes the last base's fields first: reversed, problems are reported in GROUPS' order.
class Settings(*reversed(GROUPS), title="Settings"):  # type: ignore[misc]
    def sentinel(self) -> SentinelTarget | None:
        """From REDIS_SENTINELS or a redis+sentinel:// REDIS_URL."""
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
        return Routing(self.slack_routes, self.slack_channel)

    @property
    def channel_uses(self) -> dict[str, str]:
        """Every channel posted to -> what posts there ("SLACK_CHANNEL", "route 2: team=rocm")."""
        uses = {self.slack_channel: "SLACK_CHANNEL"}
        for n, route in enumerate(self.slack_routes, 1):
            uses.setdefault(route.channel, f"route {n}: {route.text}")
        return uses

    @property
    def runner_names(self) -> RunnerNames:
        return RunnerNames(self.runner_scale_sets, known=self.scaler_targets)

    @property
    def scale_allowed_groups(self) -> tuple[str, ...]:
        return tuple(entry for entry in self.scale_allowed_users if entry.startswith("S"))

    @property
    def scalable(self) -> frozenset[str]:
        none = self.scaler_backend is ScalerBackend.NONE
        return frozenset() if none else frozenset(self.scaler_targets)

    @property
    def scale_verify_s(self) -> float:
        if self.scale_verify_seconds is not None:
            return self.scale_verify_seconds
        return min(2 * self.runner_boot_minutes * 60, 15 * 60)

    @property
    def drain_rule(self) -> DrainRule:
        return DrainRule(self.drain_max_queued, self.drain_max_wait_minutes)

    @property
    def thresholds(self) -> Thresholds:
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
        return bool(self.github_app_id and self.github_app_private_key)

    @property
    def has_github_credential(self) -> bool:
        return self.github_token is not None or self.github_app
