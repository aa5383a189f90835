"""Settings: the documented defaults (docs/configuration.md), env parsing, and one clear line for
what is wrong."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import (
    Settings,
    SettingsError,
    SilenceBackend,
    check_serve,
    load_settings,
    read_settings,
)
from bot.config.serve import serve_warnings
from bot.storage.connection import build_redis
from tests.support.processes import BotProcess, bot_env
from tests.support.slack import CHANNEL, Slack

FIELDS = frozenset(Settings.model_fields)
# A refusal takes well under a second; a loaded 2-core machine can take seconds to import the bot.
SERVE_TIMEOUT_S = 60
ROOT = Path(__file__).parents[1]
ENV_EXAMPLE = ROOT / ".env.example"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting leaks in from the developer's or CI's environment."""
    for name in list(os.environ):
        if name.lower() in FIELDS:
            monkeypatch.delenv(name)


def serve_ready() -> dict[str, str]:
    return {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s3cret",
        "slack_channel": "C0QUEUE",
        "alert_webhook_token": "hook-token",
    }


def test_defaults_are_the_documented_ones() -> None:
    settings = load_settings(_env_file=None)

    assert settings.port == 3000
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.status_interval_seconds == 600
    assert settings.metrics_backend == "alert"
    assert settings.scaler_backend == "none"
    assert settings.silence_backend is None
    assert settings.scale_allowed_users == ()
    assert settings.slack_bot_token is None
    assert not settings.socket_mode


def test_slack_api_url_gets_the_trailing_slash_slack_sdk_needs() -> None:
    settings = load_settings(_env_file=None, slack_api_url="http://127.0.0.1:9999/api")

    assert settings.slack_api_url == "http://127.0.0.1:9999/api/"


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "8080")
    monkeypatch.setenv("SLACK_API_URL", "http://slack.local/api")
    monkeypatch.setenv("SLACK_CHANNEL", "C0INCIDENTS")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-env")
    monkeypatch.setenv("STATUS_INTERVAL_SECONDS", "120")
    monkeypatch.setenv("SILENCE_BACKEND", "alertmanager")
    monkeypatch.setenv("ALERTMANAGER_URL", "http://am:9093")
    monkeypatch.setenv("SCALER_BACKEND", "webhook")

    settings = load_settings(_env_file=None)

    assert settings.port == 8080
    assert settings.slack_api_url == "http://slack.local/api/"
    assert settings.slack_channel == "C0INCIDENTS"
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == "xoxb-from-env"
    assert settings.status_interval_seconds == 120
    assert settings.silence_backend is SilenceBackend.ALERTMANAGER
    assert settings.alertmanager_url == "http://am:9093"
    assert settings.scaler_backend == "webhook"


def test_scale_allowed_users_is_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALE_ALLOWED_USERS", "U1, S2,,U3")

    assert load_settings(_env_file=None).scale_allowed_users == ("U1", "S2", "U3")


def test_secrets_do_not_show_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret-value")

    assert "xoxb-secret-value" not in repr(load_settings(_env_file=None))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PORT", "abc"),
        ("PORT", "70000"),
        ("STATUS_INTERVAL_SECONDS", "0"),
        ("SILENCE_BACKEND", "foo"),
        ("SLACK_POST_INTERVAL_MS", "-1"),
        ("LOG_LEVEL", "verbose"),
    ],
)
def test_an_invalid_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)

    with pytest.raises(SettingsError) as caught:
        load_settings(_env_file=None)

    assert str(caught.value).startswith(f"{name}:")
    assert "\n" not in str(caught.value)


def test_settings_are_read_from_dotenv_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("PORT=4000\nSLACK_CHANNEL=C0DOTENV\n")
    monkeypatch.chdir(tmp_path)

    settings = load_settings()

    assert (settings.port, settings.slack_channel) == (4000, "C0DOTENV")


@pytest.mark.parametrize("missing", ["slack_bot_token", "slack_signing_secret", "slack_channel"])
def test_check_serve_names_what_is_missing(missing: str) -> None:
    values = {k: v for k, v in serve_ready().items() if k != missing}
    settings = load_settings(_env_file=None, **values)

    with pytest.raises(SettingsError, match=missing.upper()):
        check_serve(settings)


def test_socket_mode_needs_no_signing_secret() -> None:
    values = serve_ready()
    del values["slack_signing_secret"]
    settings = load_settings(_env_file=None, slack_app_token="xapp-1", **values)

    assert settings.socket_mode
    check_serve(settings)


def test_an_empty_app_token_does_not_switch_to_socket_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "")
    values = serve_ready()
    del values["slack_signing_secret"]
    settings = load_settings(_env_file=None, **values)

    assert not settings.socket_mode
    with pytest.raises(SettingsError, match="SLACK_SIGNING_SECRET"):
        check_serve(settings)


def test_check_serve_accepts_a_complete_http_mode_config() -> None:
    check_serve(load_settings(_env_file=None, **serve_ready()))


@pytest.mark.parametrize(
    "credential",
    [
        {"alert_webhook_token": "t"},
        {"alert_webhook_hmac_secret": "h"},
        {"alert_webhook_basic_user": "u", "alert_webhook_basic_password": "p"},
        {"alert_webhook_allow_unauthenticated": True},
    ],
)
def test_any_one_webhook_credential_or_the_explicit_opt_out_is_enough(
    credential: dict[str, object],
) -> None:
    values: dict[str, object] = {**serve_ready(), "alert_webhook_token": None, **credential}
    check_serve(load_settings(_env_file=None, **values))


def test_serve_is_closed_by_default_without_a_webhook_credential() -> None:
    values: dict[str, object] = {**serve_ready(), "alert_webhook_token": None}
    with pytest.raises(SettingsError) as refused:
        check_serve(load_settings(_env_file=None, **values))
    message = str(refused.value)
    for name in (
        "ALERT_WEBHOOK_TOKEN",
        "ALERT_WEBHOOK_HMAC_SECRET",
        "ALERT_WEBHOOK_BASIC_USER",
        "ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED",
    ):
        assert name in message


# -- `python -m bot serve` as an operator runs it -------------------------------------------------


def run_serve(
    tmp_path: Path, command: str = "serve", **env: str
) -> subprocess.CompletedProcess[str]:
    """`python -m bot serve` (or `command`) of this checkout in an empty directory, with only
    PATH, HOME and `env` set."""
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    return subprocess.run(
        [sys.executable, "-m", "bot", command],
        cwd=tmp_path,
        env=clean | {"PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=SERVE_TIMEOUT_S,
        check=False,
    )


def test_serve_with_nothing_set_exits_2_naming_everything_missing_at_once(tmp_path: Path) -> None:
    result = run_serve(tmp_path)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_CHANNEL", "ALERT_WEBHOOK_TOKEN"):
        assert sum(name in line for line in lines) == 1, result.stderr
    assert all(line.startswith("queuepilot: configuration error: ") for line in lines)


def test_serve_with_the_example_env_unfilled_names_the_missing_token(tmp_path: Path) -> None:
    # The README's first step is "copy .env.example to .env": its blanks must count as missing.
    (tmp_path / ".env").write_text(ENV_EXAMPLE.read_text())

    result = run_serve(tmp_path)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert any("SLACK_BOT_TOKEN is required" in line for line in lines), result.stderr


def test_serve_without_a_webhook_credential_refuses_to_start(tmp_path: Path) -> None:
    result = run_serve(
        tmp_path, SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s3cret", SLACK_CHANNEL="C0QUEUE"
    )

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "ALERT_WEBHOOK_TOKEN" in lines[0] and "ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED" in lines[0]


def test_serve_with_a_bad_port_names_port(tmp_path: Path) -> None:
    result = run_serve(
        tmp_path,
        PORT="notaport",
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_SIGNING_SECRET="s3cret",
        SLACK_CHANNEL="C0QUEUE",
    )

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if "PORT" in line] == [
        "queuepilot: configuration error: PORT: Input should be a valid integer, unable to parse "
        "string as an integer (got 'notaport')"
    ]


@pytest.mark.parametrize("command", ["serve", "check"])
def test_a_redis_url_with_a_bad_port_is_named_by_serve_and_check(
    tmp_path: Path, command: str
) -> None:
    ready = {name.upper(): value for name, value in serve_ready().items()}
    result = run_serve(tmp_path, command, **ready, REDIS_URL="redis://:pw@localhost:6379x/0")

    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "pw" not in output
    [said] = [line for line in output.splitlines() if "REDIS_URL" in line]
    assert "REDIS_URL: 'redis://•••@localhost:6379x/0' is not a URL redis-py can use" in said
    assert "'6379x'" in said and "write it as redis://" in said


def test_serve_never_prints_a_secret(tmp_path: Path) -> None:
    result = run_serve(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-secret-value",
        SLACK_SIGNING_SECRET="signing-secret-value",
        PORT="bad",
    )

    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert "PORT" in output
    assert "xoxb-secret-value" not in output
    assert "signing-secret-value" not in output


def test_serve_refusing_to_start_says_the_misspelt_name_that_left_a_setting_missing(
    tmp_path: Path,
) -> None:
    result = run_serve(
        tmp_path,
        **{name.upper(): value for name, value in serve_ready().items()},
        METRICS_BACKEND="prometheus",
        PROMETHEUS_ULR="http://prometheus.monitoring:9090",
    )

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "queuepilot: configuration error: METRICS_BACKEND=prometheus needs PROMETHEUS_URL",
        "queuepilot: configuration error: PROMETHEUS_ULR is not a queuepilot setting: did you "
        "mean PROMETHEUS_URL?",
    ]


def test_serve_refusing_a_value_an_env_file_left_in_quotes_says_so(tmp_path: Path) -> None:
    ready = {name.upper(): value for name, value in serve_ready().items()}
    result = run_serve(tmp_path, **ready | {"SLACK_CHANNEL": '"C0QUEUE"', "REDIS_PREFIX": "'qp'"})

    assert result.returncode == 2
    quotes = "remove the quotes (env files keep them: docker's --env-file and kubectl's "
    quotes += "--from-env-file pass them on as part of the value)"
    assert result.stderr.strip().splitlines() == [
        "queuepilot: configuration error: SLACK_CHANNEL: '\"C0QUEUE\"' is not a channel ID: use "
        "the channel's ID (C… or G…; in Slack, open the channel's details: the ID is at the bottom "
        f"of About); its value is in quotes: {quotes}",
        f"queuepilot: warning: REDIS_PREFIX: {quotes}",
    ]


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (
            {"silence_backend": "alertmanager"},
            "SILENCE_BACKEND=alertmanager needs ALERTMANAGER_URL",
        ),
        ({"silence_backend": "grafana", "grafana_url": "https://g"}, "GRAFANA_TOKEN"),
        ({"scaler_backend": "webhook"}, "needs SCALER_TARGETS"),
        (
            {"scaler_backend": "webhook", "scaler_targets": '{"a": "b"}'},
            "needs SCALER_WEBHOOK_URL and SCALER_WEBHOOK_SECRET",
        ),
        (
            {
                "scaler_backend": "sqs",
                "scaler_targets": '{"a": "b"}',
                "scaler_sqs_queue_url": "https://sqs.us-east-1.amazonaws.com/1/q",
                "scaler_sqs_repository": "pytorch",
            },
            "SCALER_SQS_REPOSITORY: .pytorch. is not owner/name",
        ),
    ],
)
def test_a_backend_without_its_settings_stops_serve_naming_them(
    values: dict[str, str], named: str
) -> None:
    with pytest.raises(SettingsError, match=named):
        check_serve(load_settings(_env_file=None, **serve_ready(), **values))


@pytest.mark.parametrize(
    ("targets", "named"),
    [
        ('{"linux.2xlarge": {"target": "x", "cap": 0}}', 'SCALER_TARGETS["linux.2xlarge"].cap: '),
        ('{"linux": {"target": ""}}', 'SCALER_TARGETS["linux"].target: '),
        ('{"linux": {"target": "x", "cpa": 3}}', 'SCALER_TARGETS["linux"].cpa: '),
        ('{"linux": ', "SCALER_TARGETS: must be a JSON object"),
        ("[1]", "SCALER_TARGETS: must be a JSON object"),
    ],
)
def test_a_bad_scale_target_names_the_variable_and_the_place_in_it(
    targets: str, named: str
) -> None:
    # The variable an operator sets, and where in its JSON: not a name that exists nowhere.
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None, scaler_targets=targets)
    assert str(refused.value).startswith(named)


def test_scale_targets_take_a_bare_target_and_the_default_cap() -> None:
    from bot.factory import scale_targets

    settings = load_settings(
        _env_file=None,
        scaler_targets='{"a": "arc-runners/a", "b": {"target": "b", "cap": 3, "ceiling": 9}}',
        scale_default_cap=7,
    )
    targets = scale_targets(settings)
    assert (targets["a"].target, targets["a"].cap, targets["a"].ceiling) == (
        "arc-runners/a",
        7,
        None,
    )
    assert (targets["b"].cap, targets["b"].ceiling) == (3, 9)


def test_serve_with_an_unreadable_kubeconfig_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text("- not a kubeconfig\n")
    result = run_serve(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_SIGNING_SECRET="s3cret",
        SLACK_CHANNEL="C0QUEUE",
        ALERT_WEBHOOK_TOKEN="t",
        SCALER_BACKEND="arc",
        SCALER_TARGETS='{"linux": "arc-runners/linux"}',
        SCALER_KUBECONFIG=str(tmp_path / "kubeconfig"),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "SCALER_BACKEND=arc: no Kubernetes access" in lines[0]


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"metrics_backend": "prometheus"}, "METRICS_BACKEND=prometheus needs PROMETHEUS_URL"),
        ({"metrics_backend": "github"}, "METRICS_BACKEND=github needs GITHUB_TOKEN"),
        (
            {"metrics_backend": "github", "github_token": "t"},
            "needs GITHUB_ORG and/or GITHUB_REPOS",
        ),
        (
            {"metrics_backend": "github", "github_token": "t", "github_repos": "pytorch"},
            "GITHUB_REPOS: 'pytorch' is not owner/name",
        ),
        ({"metrics_backend": "hud"}, "METRICS_BACKEND=hud needs HUD_URL"),
        (
            {
                "metrics_backend": "prometheus",
                "prometheus_url": "http://p:9090",
                "prometheus_queries": '{"queue": "x"}',
            },
            "PROMETHEUS_QUERIES: unknown fields ['queue']",
        ),
    ],
)
def test_a_metrics_backend_without_its_settings_stops_serve(values: dict, says: str) -> None:
    with pytest.raises(SettingsError, match=None) as caught:
        read_settings(_env_file=None, **serve_ready(), **values)
    assert says in str(caught.value)


HUD = {"metrics_backend": "hud", "hud_url": "https://hud.pytorch.org"}


@pytest.mark.parametrize(
    ("values", "says"),
    [
        # Asked for jobs queued over 30 min, the HUD cannot say one waited 29: never drained.
        (
            {**HUD, "hud_parameters": {"queuedThresholdMinutes": 30}},
            "counts only jobs queued longer than 30 min, more than DRAIN_MAX_WAIT_MINUTES (5)",
        ),
        (
            {**HUD, "hud_query": "queued_jobs_by_label", "drain_max_wait_minutes": 2},
            "raise DRAIN_MAX_WAIT_MINUTES to at least that",
        ),
        (
            {**HUD, "hud_parameters": {"queuedThresholdMinutes": "soon"}},
            "queuedThresholdMinutes must be a whole number of minutes",
        ),
    ],
)
def test_serve_refuses_a_hud_threshold_no_drain_could_pass(values: dict, says: str) -> None:
    settings = load_settings(_env_file=None, **serve_ready(), **values)
    with pytest.raises(SettingsError) as caught:
        check_serve(settings)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "values",
    [
        HUD,  # 5 and 5: the same bar
        {**HUD, "hud_parameters": {"queuedThresholdMinutes": 30}, "drain_max_wait_minutes": 30},
        {**HUD, "hud_parameters": {"queuedThresholdMinutes": 0}, "drain_max_wait_minutes": 0},
    ],
)
def test_serve_takes_a_hud_threshold_within_the_drain_wait_limit(values: dict) -> None:
    check_serve(load_settings(_env_file=None, **serve_ready(), **values))


def test_metrics_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICS_BACKEND", "hud")
    monkeypatch.setenv("HUD_URL", "https://hud.pytorch.org")
    monkeypatch.setenv("HUD_PARAMETERS", '{"orgs": ["pytorch"]}')
    monkeypatch.setenv("GITHUB_REPOS", "pytorch/pytorch, pytorch/vision")
    settings = load_settings(_env_file=None, **serve_ready())
    check_serve(settings)
    assert settings.hud_parameters == {"orgs": ["pytorch"]}
    assert settings.github_repos == ("pytorch/pytorch", "pytorch/vision")
    # The defaults users get: a reading a minute, three drained checks a minute apart.
    assert (settings.metrics_interval_seconds, settings.drain_checks) == (60, 3)
    assert (settings.drain_check_seconds, settings.status_chart_every) == (60, 3)
    assert settings.prometheus_rate_window == "10m"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("4h", 14_400),
        ("90m", 5400),
        ("1h30m", 5400),
        ("1d", 86_400),
        ("600s", 600),
        (" 2H ", 7200),
        ("off", 0),
        ("0", 0),
    ],
)
def test_scale_revert_after_takes_a_duration_or_off(
    monkeypatch: pytest.MonkeyPatch, text: str, seconds: int
) -> None:
    monkeypatch.setenv("SCALE_REVERT_AFTER", text)
    assert load_settings(_env_file=None).scale_revert_after == seconds


def test_scale_revert_after_defaults_to_four_hours() -> None:
    assert load_settings(_env_file=None).scale_revert_after == 4 * 3600


@pytest.mark.parametrize("text", ["soon", "10s", "31d", "1h-5m", "٣h", "-1", "3600"])
def test_a_bad_scale_revert_after_names_it(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("SCALE_REVERT_AFTER", text)
    with pytest.raises(SettingsError, match=r"^SCALE_REVERT_AFTER: "):
        load_settings(_env_file=None)


@given(st.text(max_size=40))
def test_scale_revert_after_is_in_range_or_refused_by_name(text: str) -> None:
    try:
        seconds = load_settings(_env_file=None, scale_revert_after=text).scale_revert_after
    except SettingsError as exc:
        assert all(p.startswith("SCALE_REVERT_AFTER:") for p in exc.problems)
        return
    assert seconds == 0 or 60 <= seconds <= 30 * 86_400


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("rediss://cache.internal:99999/0", "Port out of range"),
        ("redis://localhost:6379/0?socket_timeout=soon", "'socket_timeout'"),
        ("redis://localhost:6379/0?sockettimeout=5", "'sockettimeout'"),
        ("rediss://localhost:6380/0?ssl_cert_reqs=maybe", "maybe"),
        ("redis+sentinel://sentinel-0:2637x/mymaster", "sentinel 'sentinel-0:2637x'"),
    ],
)
def test_a_redis_url_redis_py_would_refuse_later_is_refused_by_name(url: str, says: str) -> None:
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None, **serve_ready(), redis_url=url)

    [problem] = refused.value.problems
    assert problem.startswith("REDIS_URL: ") and says in problem


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "rediss://:secret@cache.internal:6380/2?ssl_cert_reqs=none&socket_timeout=5",
        "unix:///var/run/redis/redis.sock?db=1",
        "redis+sentinel://sentinel-0:26379,sentinel-1/mymaster/1",
    ],
)
def test_a_redis_url_redis_py_takes_is_taken(url: str) -> None:
    assert read_settings(_env_file=None, **serve_ready(), redis_url=url).redis_url == url


def test_a_redis_url_whose_password_redis_py_misreads_never_shows_it() -> None:
    """An unencoded `/` cuts the password short, and redis-py quotes its start as the port."""
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None, **serve_ready(), redis_url="redis://:s3cr/et@cache:6379/0")

    [problem] = refused.value.problems
    assert "s3cr" not in problem
    assert "redis://•••@cache:6379/0" in problem and "percent-encoded" in problem


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["redis", "rediss", "unix", "redis+sentinel"]),
    st.text(max_size=12),
    st.text(max_size=8),
    st.text(max_size=8),
    st.text(max_size=24),
)
def test_any_redis_url_is_taken_and_usable_or_refused_by_name(
    scheme: str, host: str, port: str, path: str, query: str
) -> None:
    url = f"{scheme}://{host}:{port}/{path}?{query}"
    try:
        taken = read_settings(_env_file=None, **serve_ready(), redis_url=url)
    except SettingsError as exc:
        assert all(p.startswith("REDIS_URL: ") for p in exc.problems), exc.problems
        return
    build_redis(taken.redis_url, taken.sentinel()).connection_pool.make_connection()


@pytest.mark.parametrize(
    ("values", "warned"),
    [
        ({"alert_webhook_token": "t"}, None),
        ({"alert_webhook_hmac_secret": "s"}, "/alerts/alertmanager refuses everything"),
        ({"alert_webhook_hmac_secret": "s", "alert_webhook_token": "t"}, None),
        ({"alert_webhook_allow_unauthenticated": True}, "accept unauthenticated notifications"),
    ],
)
def test_serve_warns_of_webhooks_open_to_anyone_or_closed_to_alertmanager(
    values: dict[str, object], warned: str | None
) -> None:
    settings = load_settings(_env_file=None, **values)
    warnings = serve_warnings(settings)
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warned in warnings[0]


def test_serve_warns_of_a_pilot_period_its_types_lock_would_refuse() -> None:
    """The type's lock (SCALE_COOLDOWN_SECONDS) refuses a scale-up that comes sooner, so a
    shorter period would be a policy the pilot cannot keep: named, with the fix."""
    pilot = {"up_to": 20, "step": 10, "period_seconds": 30}
    targets = json.dumps({"linux.2xlarge": {"target": "a/b", "pilot": pilot}})
    settings = load_settings(
        _env_file=None, alert_webhook_token="t", scaler_targets=targets, scale_cooldown_seconds=60
    )
    assert serve_warnings(settings) == [
        "SCALER_TARGETS['linux.2xlarge'].pilot.period_seconds 30 is shorter than "
        "SCALE_COOLDOWN_SECONDS 60: the type's lock refuses an act that comes sooner, so the "
        "pilot acts at most every 60 s; raise period_seconds to 60 or lower SCALE_COOLDOWN_SECONDS"
    ]
    settings = load_settings(
        _env_file=None, alert_webhook_token="t", scaler_targets=targets, scale_cooldown_seconds=30
    )
    assert serve_warnings(settings) == []


async def test_serve_logs_at_start_what_check_warns_of(
    tmp_path: Path, slack: Slack, redis_url: str
) -> None:
    """One reading of the environment for both (`read_startup`): a misspelt name, a route's
    typo, a value an env file left in quotes."""
    said = {
        "SLACK_CHANEL": CHANNEL,
        "SLACK_ROUTES": json.dumps([{"match": ["team==rocm"], "channel": CHANNEL}]),
        "REDIS_SENTINEL_MASTER": '"mymaster"',
    }
    bot = BotProcess(slack, redis_url, tmp_path, "warned", **said)
    try:
        await bot.wait_healthy()
    finally:
        bot.kill()
    logged = [json.loads(line) for line in bot.output().splitlines() if line.startswith("{")]
    warned = [
        line["message"].removesuffix(" (ignored)")
        for line in logged
        if line["logger"] == "queuepilot" and line["level"] == "warning"
    ]
    check = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", "check"],
        cwd=tmp_path,
        env=bot_env(slack, redis_url, bot.port, **said),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = [line.split(None, 2) for line in check.stdout.splitlines()[:-1]]
    checked = [
        text for verdict, subject, text in found if subject == "settings" and verdict != "ok"
    ]
    assert warned == checked, check.stdout
    near_miss, quoted, typo = warned
    assert near_miss == "SLACK_CHANEL is not a queuepilot setting: did you mean SLACK_CHANNEL?"
    assert quoted.startswith("REDIS_SENTINEL_MASTER: remove the quotes (env files keep them")
    assert typo.startswith('SLACK_ROUTES route 1: team==rocm: the value is "=rocm"; did you')
