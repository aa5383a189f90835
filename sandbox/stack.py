"""The whole loop on one machine: Slack emulator with its page, simulated fleet, and the bot.

`start_sandbox` wires the three together the way production wires queuepilot to Slack, Grafana,
Alertmanager, Prometheus and an autoscaler, each over its real protocol:

    fleet --Grafana webhook--> bot --Web API--> emulator <--clicks, /queue-- page (browser)
    bot --/api/v1/query, /api/clickhouse/queued_jobs, /api/v2/silences,
        PATCH /apis/actions.github.com/.../autoscalingrunnersets/<scale set>--> fleet
    bot --/repos/<owner>/<repo>/issues, …/comments--> GitHub's stand-in
    emulator --signed interactions and commands--> bot /slack/events
        (with `socket_mode`: emulator <--Socket Mode websocket, opened by the bot-- bot)

The bot is the production app (`build_bot`, `build_app`, the `prometheus` metrics backend, the
`hud` jobs, the `alertmanager` silence backend, the `arc` scaler with a kubeconfig written for
the fleet's Kubernetes API), with cadences shortened for a demo that lasts minutes. `make demo`,
the browser test and the README's screenshot all run this.

One clock: the bot runs on the wall clock, as in production, and the fleet serves its numbers in
real time (`sandbox.fleet.in_real_time`), so a summary never says "1 min" of the wall clock
beside a wait of fleet minutes. The fleet being `speed` times faster than the one it imitates,
the bot's settings in minutes that describe a fleet (`FLEET_MINUTES`) are a real fleet's divided
by the speed: at ×6, "+10 runners would drain it in 5 min" is the demo's "in 30 min".
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.app import build_app, build_bot
from bot.checks import Finding
from bot.config import Settings, SettingsError, check_serve, load_settings
from sandbox.demo import checked
from sandbox.fleet import DEMO_BURSTS, DEMO_STALL, DEMO_TEAM_BURSTS, DEMO_TYPES, Fleet
from sandbox.fleet_alerts import GPU_RULE_LABELS, RuleConfig
from sandbox.fleet_api import FleetApi, FleetApiConfig
from sandbox.github_issues import TOKEN as GITHUB_TOKEN
from sandbox.github_issues import GithubIssues
from sandbox.redis_server import free_port
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator

CHANNEL = "C0CIQUEUE"
CHANNEL_NAME = "ci-queue-incidents"
# The GPU team's channel: `SLACK_ROUTES` sends its runner type's alerts (and early warnings)
# there.
GPU_CHANNEL = "C0GPUQUEUE"
SCALE_CAP = 20  # the most one scale request adds to a demo runner type
# The most runners a demo scale set may be given, as the chart's admission policy holds it: room
# for the story's raises above its largest maxRunners, and a bound all the same.
SCALE_CEILING = 100
# `--pilot`: the pilot's policy on these types, in the fleet's seconds (its hold, period and
# cooldown divided by the speed, as `FLEET_MINUTES`): on 2xlarge it acts once its readings wanted
# more runners for a minute (longer than a spike of four readings), by the least they wanted
# less the runners there are, again half a minute on while the climb goes on, and its runners
# come; on the GPU type it declines, its pods cannot start. Its up_to is one request's cap.
SCALE_LOCK_S = 30  # SCALE_COOLDOWN_SECONDS in fleet seconds: the pilot's period
PILOT_TYPES = ("linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu")
PILOT_POLICY = {
    "up_to": 20,
    "step": 10,
    "hold_seconds": 60,
    "period_seconds": 30,
    "cooldown_seconds": 600,
}
GPU_CHANNEL_NAME = "gpu-ci-incidents"
GPU_ROUTE = {"match": ['runner_type=~"linux\\.g5\\..*"'], "channel": GPU_CHANNEL}
BOT_TOKEN = "xoxb-sandbox"
PAGE_USER = "U0ALICE"  # alice: the page's user, allowed to scale
# The scale set named by hand (`sandbox.fleet.DEMO_TYPES`); the others' are derived.
SCALE_SETS = {"windows.4xlarge": "win-4xlarge"}
RATE_WINDOW = "10m"
# Where the demo's incidents get their GitHub issue (in GitHub's stand-in).
ISSUES_REPO = "pytorch/ci-queue-alerts"
# The bot's settings in minutes that describe the fleet, as a real fleet's operator sets them
# (the drain target, a runner's boot, the early warning's horizon, a drained queue's wait, the
# alert rule's wait threshold and the HUD's listing threshold, in the fleet's own minutes):
# divided by the fleet's speed, so a message says "waiting over 0.8 min" of the wall clock.
FLEET_MINUTES = {
    "drain_target_minutes": 30.0,
    "runner_boot_minutes": 5.0,
    "early_warning_minutes": 15.0,
    "drain_max_wait_minutes": 5.0,
    "early_warning_wait_minutes": RuleConfig().fire_wait_min,
    # The HUD's `queued_jobs` lists jobs queued over 5 minutes of the fleet's (`fleet_api`).
    "hud_jobs_over_minutes": 5.0,
}


# The advice falls over five fleet minutes and rises over one (ADVICE_WINDOW's and
# ADVICE_RISE_WINDOW's defaults), and a status is checked every ten (STATUS_INTERVAL_SECONDS'),
# in the bot's seconds.
ADVICE_WINDOW_S, ADVICE_RISE_WINDOW_S, STATUS_INTERVAL_S = 300, 60, 600


class SandboxError(Exception):
    """A part of the sandbox could not start; the message says which and why."""


@dataclass(frozen=True)
class SandboxConfig:
    """How fast the demo plays. `speed` compresses the fleet's time (the bot's `FLEET_MINUTES`
    with it); the bot's cadences are real seconds, shortened so that a status, a chart and the
    drain checks fit in a few minutes."""

    speed: float = 10.0
    # A status check as often as a real fleet's ten minutes, at the fleet's speed (100 s at ×6),
    # unless a test sets its own.
    status_interval_s: int | None = None
    # Every 3 s is half a fleet minute at ×10: the early warning sees the burst build in time.
    metrics_interval_s: int = 3
    drain_check_s: int = 10
    # A scale-up goes back once the queue has stayed drained this long after the resolve:
    # three statuses, as in a real deployment's default.
    revert_settle_s: int = 90
    page_port: int = 0  # 0: any free port
    # The bot holds an app-level token and takes Slack's traffic over Socket Mode's websocket
    # instead of signed requests to /slack/events.
    socket_mode: bool = False
    # linux.2xlarge's ARC listener stops acting on its jobs a few fleet minutes in: jobs wait
    # while runners sit idle, and diagnostics should say to restart the listener, not to scale.
    stall_listener: bool = False
    # A demo lasts minutes of real time: a listener frozen this long is stalled here.
    listener_stall_minutes: float = 1.0
    # When the GPU team's surge begins (fleet minutes): after the 2xlarge story has played out.
    team_burst_at_min: float = DEMO_TEAM_BURSTS[0].starts_min
    # The pilot on `PILOT_TYPES`, with `PILOT_POLICY` at the fleet's speed.
    pilot: bool = False


@dataclass
class Sandbox:
    page_url: str
    bot_url: str
    emulator: SlackEmulator
    fleet: FleetApi
    # What `queuepilot check` found against the sandbox's servers once they were up.
    check: list[Finding] = field(default_factory=list)
    # GitHub's stand-in, where the alert's issue is opened and told each step.
    github: GithubIssues | None = None


def start_sandbox(
    stack: ExitStack, redis_url: str, prefix: str, config: SandboxConfig = SandboxConfig()
) -> Sandbox:
    """Start emulator, fleet and bot (stopped in reverse order when `stack` closes)."""
    app_token = f"xapp-1-A0QUEUEBOT-1-{secrets.token_hex(16)}" if config.socket_mode else None
    emulator = SlackEmulator(
        token=BOT_TOKEN,
        channels=(CHANNEL, GPU_CHANNEL),
        channel_names={CHANNEL: CHANNEL_NAME, GPU_CHANNEL: GPU_CHANNEL_NAME},
        page_user=PAGE_USER,
        app_token=app_token,
    )
    page = _serve(stack, emulator.app, config.page_port, "the local Slack page")
    stack.callback(emulator.close)  # runs before the server stops: open pages let go at once
    bot_port = free_port()
    webhook_token, kube_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    fleet = FleetApi(
        Fleet(
            DEMO_TYPES,
            (
                *DEMO_BURSTS,
                *(replace(b, starts_min=config.team_burst_at_min) for b in DEMO_TEAM_BURSTS),
            ),
            speed=config.speed,
            stalls=(DEMO_STALL,) if config.stall_listener else (),
        ),
        FleetApiConfig(
            webhook_url=f"http://127.0.0.1:{bot_port}/alerts/grafana",
            webhook_token=webhook_token,
            kube_token=kube_token,
            rate_window=RATE_WINDOW,
            boot_minutes=FLEET_MINUTES["runner_boot_minutes"] / config.speed,
            team_rules=(GPU_RULE_LABELS,),
        ),
    )
    fleet_server = _serve(stack, fleet.app, 0, "the simulated fleet")
    fleet.url = fleet_server.url
    github = GithubIssues()
    github.base_url = _serve(stack, github.app, 0, "the GitHub stand-in").url
    github.repo(ISSUES_REPO)
    kube_dir = Path(tempfile.mkdtemp(prefix="queuepilot-demo-"))
    stack.callback(shutil.rmtree, kube_dir, ignore_errors=True)
    kubeconfig = fleet.kube.kubeconfig(kube_dir, fleet.url)
    signing_secret = secrets.token_hex(16)
    settings = _settings(
        config,
        api_url=f"{page.url}/api/",
        redis_url=redis_url,
        prefix=prefix,
        port=bot_port,
        fleet_url=fleet.url,
        github_url=github.base_url,
        webhook_token=webhook_token,
        kubeconfig=kubeconfig,
        signing_secret=None if app_token else signing_secret,
        app_token=app_token,
    )
    # In Socket Mode the bot's start-up opens its websocket to the emulator before it serves.
    bot = _serve(stack, build_app(build_bot(settings)), bot_port, "the bot")
    if app_token is None:
        emulator.connect_app(f"{bot.url}/slack/events", signing_secret)
    return Sandbox(page.url + "/", bot.url, emulator, fleet, checked(settings), github)


def pilot_policy(speed: float) -> dict[str, int]:
    """`PILOT_POLICY` for a fleet `speed` times faster: its seconds divided by the speed."""
    timed = ("hold_seconds", "period_seconds", "cooldown_seconds")
    # A period of at least a second (`period_seconds` ≥ 1), whatever the speed.
    return {k: max(round(v / speed), 1) if k in timed else v for k, v in PILOT_POLICY.items()}


def _serve(stack: ExitStack, app: object, port: int, what: str) -> RunningServer:
    try:
        server = serve_in_thread(app, port=port)
    except (OSError, RuntimeError) as exc:
        raise SandboxError(f"{what} cannot listen on port {port}: {exc}") from None
    stack.callback(server.stop)
    return server


def _settings(
    config: SandboxConfig,
    *,
    api_url: str,
    redis_url: str,
    prefix: str,
    port: int,
    fleet_url: str,
    github_url: str,
    webhook_token: str,
    kubeconfig: Path,
    signing_secret: str | None,
    app_token: str | None = None,
) -> Settings:
    """The bot's settings: production backends pointed at the fleet; no .env, nothing inherited
    that could reach a real Slack (an inherited SLACK_APP_TOKEN would open Socket Mode there:
    only the emulator's own app token is ever given)."""
    # No target: each is its type's scale set in SCALER_ARC_NAMESPACE, derived or named.
    targets: dict[str, dict[str, object]] = {
        spec.name: {"cap": SCALE_CAP, "ceiling": SCALE_CEILING} for spec in DEMO_TYPES
    }
    for runner_type in PILOT_TYPES if config.pilot else ():
        targets[runner_type]["pilot"] = pilot_policy(config.speed)
    try:
        settings = load_settings(
            _env_file=None,
            slack_api_url=api_url,
            slack_channel=CHANNEL,
            slack_routes=json.dumps([GPU_ROUTE]),
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=signing_secret,
            slack_app_token=app_token,
            redis_url=redis_url,
            redis_prefix=prefix,
            host="127.0.0.1",
            port=port,
            alert_webhook_token=webhook_token,
            alert_webhook_hmac_secret=None,
            alert_webhook_basic_user=None,
            alert_webhook_basic_password=None,
            silence_backend="alertmanager",
            alertmanager_url=fleet_url,
            metrics_backend="prometheus",
            prometheus_url=fleet_url,
            prometheus_queries={},
            prometheus_rate_window=RATE_WINDOW,
            metrics_interval_seconds=config.metrics_interval_s,
            # ARC's numbers from Prometheus, the jobs behind the queue from the HUD's shape.
            jobs_backend="hud",
            hud_url=fleet_url,
            listener_stall_minutes=config.listener_stall_minutes,
            # The early warning watches for the fleet's own alert rule, before it ever fired.
            early_warning_queued=RuleConfig().fire_queued,
            **{name: fleet_mins / config.speed for name, fleet_mins in FLEET_MINUTES.items()},
            # The defaults in fleet minutes, as a real fleet's operator keeps them.
            advice_window=max(round(ADVICE_WINDOW_S / config.speed), 1),
            advice_rise_window=max(round(ADVICE_RISE_WINDOW_S / config.speed), 1),
            scaler_backend="arc",
            scaler_kubeconfig=str(kubeconfig),
            scaler_targets=json.dumps(targets),
            runner_scale_sets=json.dumps(SCALE_SETS),
            scale_allowed_users=PAGE_USER,
            # A double submit's guard, no longer than the pilot's period at the fleet's speed.
            scale_cooldown_seconds=max(round(SCALE_LOCK_S / config.speed), 1),
            scale_revert_settle=config.revert_settle_s,
            status_interval_seconds=config.status_interval_s
            or max(round(STATUS_INTERVAL_S / config.speed), 1),
            status_tick_seconds=1.0,
            status_chart_every=2,
            drain_check_seconds=config.drain_check_s,
            slack_post_interval_ms=300,
            slack_update_interval_ms=300,
            root_edit_interval_ms=1000,
            # The alert's GitHub issue, opened in the stand-in (no pipeline opens one here).
            github_token=GITHUB_TOKEN,
            github_api_url=github_url,
            github_issues_repo=ISSUES_REPO,
            github_issues_open=True,
            github_issues_open_after_seconds=0,  # no pipeline here to wait for
        )
        check_serve(settings)
    except SettingsError as exc:
        raise SandboxError(f"bad setting: {exc}") from None
    return settings
