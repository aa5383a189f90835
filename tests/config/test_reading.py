"""Settings as an operator meets them: values checked as what they are, every problem at once,
each naming the variable they set (and the place inside a JSON setting), near-misses caught."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import (
    Settings,
    SettingsError,
    known_variables,
    load_settings,
    read_settings,
    unknown_variables,
)
from bot.config.loading import quoted_variables

KNOWN = known_variables()
NONSENSE = "@@ not a value @@"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper() in KNOWN:
            monkeypatch.delenv(name)


def _refuses_nonsense(name: str) -> bool:
    try:
        load_settings(_env_file=None, **{name: NONSENSE})
    except SettingsError:
        return True
    return False


@cache
def checked() -> list[str]:
    """Every setting whose value is checked (free text such as HOST takes anything). Found when
    a test first asks, not at import: each worker collects every module, and this is a hundred
    settings loaded (over half a second)."""
    return sorted(name for name in Settings.model_fields if _refuses_nonsense(name))


# The settings `checked()` finds, drawn from once a test runs.
CHECKED = st.deferred(lambda: st.sampled_from(checked()))


def test_most_settings_are_checked_as_what_they_are() -> None:
    assert len(checked()) >= 68, checked()
    for name in ("slack_channel", "redis_url", "prometheus_url", "scale_allowed_users"):
        assert name in checked()


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("SLACK_CHANNEL", "#ci-queue", "'#ci-queue' is a channel name: use the channel's ID"),
        ("SLACK_CHANNEL", "ci-queue", "'ci-queue' is a channel name"),
        ("REDIS_URL", "localhost:6379", "e.g. redis://localhost:6379"),
        ("PROMETHEUS_URL", "prometheus:9090", "e.g. http://prometheus:9090"),
        ("GRAFANA_URL", "grafana.example.com", "e.g. http://grafana.example.com"),
        ("SCALE_ALLOWED_USERS", "U0ALICE,@alice", "'@alice' is not a Slack ID"),
        ("SLACK_BOT_TOKEN", "xapp-1-A", "not a bot token (xoxb-…)"),
        ("SLACK_APP_TOKEN", "xoxb-1", "not an app-level token (xapp-…)"),
        ("STATUS_INTERVAL_SECONDS", "ten minutes", "is not a duration: write e.g. 30s, 10m"),
        ("STATUS_INTERVAL_SECONDS", "1500ms", "is not a duration"),
        ("DRAIN_CHECK_SECONDS", "90m30", "is not a duration"),
        ("GITHUB_REPOS", "pytorch", "'pytorch' is not owner/name"),
    ],
)
def test_a_value_of_the_wrong_kind_says_how_to_write_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert refused.value.problems[0].startswith(f"{name}: ")
    assert says in refused.value.problems[0]


def test_a_secret_is_never_repeated_in_its_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xapp-very-secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "")
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None)
    assert "very-secret" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis//:hunter2secret@redis:6379/0",
        "redis.redis.svc:6379?password=hunter2secret",
        "redis://:hunter2 secret@redis:6379",
        "redis://user:hunter2secret@redis :6379",
        "http//user:hunter2secret@prometheus:9090",
    ],
)
def test_a_password_in_a_malformed_url_is_never_repeated(url: str) -> None:
    for name in ("redis_url", "prometheus_url"):
        with pytest.raises(SettingsError) as refused:
            load_settings(_env_file=None, **{name: url})
        assert "hunter2" not in str(refused.value), str(refused.value)
        assert refused.value.problems[0].startswith(f"{name.upper()}: ")


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("STATUS_INTERVAL_SECONDS", "10m", 600),
        ("STATUS_INTERVAL_SECONDS", "600", 600),
        ("SCALE_REVERT_AFTER", "4h", 4 * 3600),
        ("SCALE_REVERT_AFTER", "off", 0),
        ("SLACK_POST_INTERVAL_MS", "2s", 2000),
        ("SLACK_POST_INTERVAL_MS", "1500", 1500),
        ("DRAIN_MAX_WAIT_MINUTES", "90s", 1.5),
        ("DRAIN_MAX_WAIT_MINUTES", "2.5", 2.5),
        ("RUNNER_BOOT_MINUTES", "1h", 60),
        ("EARLY_WARNING_MINUTES", "off", 0),
        ("INCIDENT_RETENTION_DAYS", "2d", 2),
        ("INCIDENT_RETENTION_DAYS", "48h", 2),
        ("INCIDENT_RETENTION_DAYS", "36h", 1.5),
        ("BACKEND_TIMEOUT_SECONDS", "30s", 30),
        ("INTAKE_RECLAIM_IDLE_MS", "1m", 60_000),
    ],
)
def test_every_duration_takes_one_syntax_and_a_bare_number_keeps_its_unit(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: float
) -> None:
    monkeypatch.setenv(name, value)
    assert getattr(load_settings(_env_file=None), name.lower()) == read


@pytest.mark.parametrize(
    ("name", "value"), [("SCALE_REVERT_AFTER", "240"), ("SCALE_REVERT_SETTLE", "1800")]
)
def test_a_setting_whose_name_has_no_unit_refuses_a_bare_number_and_says_how_to_write_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert refused.value.problems == [
        f"{name}: '{value}' has no unit, and this setting's name says none: write it with one, "
        f"e.g. {value}s, {value}m or {value}h (or off)"
    ]
    monkeypatch.setenv(name, f"{value}m")
    assert getattr(load_settings(_env_file=None), name.lower()) == int(value) * 60
    monkeypatch.setenv(name, "0")  # nothing to misread
    assert getattr(load_settings(_env_file=None), name.lower()) == 0


def test_a_channel_id_a_member_id_and_a_group_id_are_taken() -> None:
    settings = load_settings(
        _env_file=None,
        slack_channel="C0123456789",
        scale_allowed_users="U0ALICE, W0BOB,S0SRE",
        redis_url="rediss://:pw@redis.internal:6380/1",
    )
    assert settings.scale_allowed_users == ("U0ALICE", "W0BOB", "S0SRE")
    assert load_settings(_env_file=None, slack_channel="G0PRIVATE").slack_channel == "G0PRIVATE"


@settings(max_examples=60, deadline=None)
@given(st.sets(CHECKED, min_size=1, max_size=12))
def test_every_wrong_value_is_reported_at_once_each_naming_its_variable(
    wrong: set[str],
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None, **dict.fromkeys(wrong, NONSENSE))
    problems = refused.value.problems
    named = [p.split(":")[0].split("[")[0] for p in problems]
    assert all(name in KNOWN for name in named), problems
    assert sorted(named) == sorted(name.upper() for name in wrong), problems
    assert str(refused.value) == "\n".join(problems)


@settings(max_examples=40, deadline=None)
@given(st.sets(CHECKED, max_size=6))
def test_serve_reports_wrong_values_and_what_is_missing_together(wrong: set[str]) -> None:
    # Nothing set but the wrong values: serve's missing settings come in the same report, and
    # none of them repeats a variable already reported as wrong.
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None, **dict.fromkeys(wrong, NONSENSE))
    problems = refused.value.problems
    for name in wrong:
        assert sum(p.startswith((name.upper() + ":", name.upper() + "[")) for p in problems) == 1
    if "slack_bot_token" not in wrong:
        assert any(p.startswith("SLACK_BOT_TOKEN is required") for p in problems)


@given(st.dictionaries(st.text(max_size=8), st.integers(-5, 5) | st.text(max_size=5), max_size=3))
def test_a_scale_target_problem_names_the_variable_and_the_runner_type(targets: dict) -> None:
    import json

    try:
        load_settings(_env_file=None, scaler_targets=json.dumps({"linux.2xlarge": targets}))
    except SettingsError as exc:
        assert all(
            p.startswith(('SCALER_TARGETS["linux.2xlarge"]', "SCALER_TARGETS:"))
            for p in exc.problems
        ), exc.problems


def test_a_near_miss_of_a_known_name_is_found_and_others_are_not() -> None:
    environ = {
        "METRIC_BACKEND": "prometheus",
        "SLACK_TOKEN": "xoxb-1",
        "SCALER_TARGET": "{}",
        "STATUS_INTERVAL": "10m",
        # Not ours, and nothing like ours; Kubernetes' service links for Services named
        # prometheus, redis and queuepilot; the container's own.
        "PATH": "/usr/bin",
        "HOSTNAME": "queuepilot-5d8f",
        "PROMETHEUS_PORT": "tcp://10.0.0.9:9090",
        "PROMETHEUS_SERVICE_HOST": "10.0.0.9",
        "REDIS_PORT_6379_TCP_ADDR": "10.0.0.8",
        "QUEUEPILOT_SERVICE_PORT_HTTP": "80",
        "METRICS_BACKEND": "alert",
        # The AWS SDK's own (EKS injects AWS_DEFAULT_REGION beside AWS_REGION).
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_SQS": "https://sqs.us-east-1.amazonaws.com",
        "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/token",
        "GITHUB_REPOSITORY": "pytorch/pytorch",
        "SLACK_CHANNEL_NAME": "ci-queue",
    }
    found = unknown_variables(environ, dotenv=None)
    assert found == [
        "METRIC_BACKEND is not a queuepilot setting: did you mean METRICS_BACKEND?",
        "SCALER_TARGET is not a queuepilot setting: did you mean SCALER_TARGETS?",
        "SLACK_TOKEN is not a queuepilot setting: did you mean SLACK_APP_TOKEN or SLACK_BOT_TOKEN?",
        "STATUS_INTERVAL is not a queuepilot setting: did you mean STATUS_INTERVAL_SECONDS?",
    ]


def test_a_near_miss_in_dotenv_is_found(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SLACK_CHANEL=C0QUEUE\n")
    assert unknown_variables({}, dotenv=tmp_path / ".env") == [
        "SLACK_CHANEL is not a queuepilot setting: did you mean SLACK_CHANNEL?"
    ]


def test_arc_targets_may_leave_the_target_out_but_other_backends_may_not() -> None:
    base = {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s",
        "slack_channel": "C0QUEUE",
        "alert_webhook_token": "t",
        "scaler_targets": '{"linux.2xlarge": {"cap": 5}}',
    }
    read_settings(_env_file=None, scaler_backend="arc", **base)
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None, scaler_backend="aws-asg", **base)
    assert refused.value.problems == [
        'SCALER_TARGETS["linux.2xlarge"]: SCALER_BACKEND=aws-asg needs its "target" '
        "(only arc derives one)"
    ]


@settings(max_examples=40, deadline=None)
@given(CHECKED, st.sampled_from(['"', "'"]))
def test_a_value_refused_in_quotes_says_an_env_file_kept_them(name: str, quote: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None, **{name: f"{quote}{NONSENSE}{quote}"})
    [problem] = refused.value.problems
    assert problem.startswith(name.upper()), problem
    assert problem.endswith(
        "; its value is in quotes: remove the quotes (env files keep them: docker's --env-file "
        "and kubectl's --from-env-file pass them on as part of the value)"
    ), problem


def test_a_variable_of_ours_in_quotes_is_found_and_others_are_not() -> None:
    environ = {
        "REDIS_PREFIX": '"qp"',
        "slack_channel": "'C0QUEUE'",  # names are case-insensitive
        "SLACK_BOT_TOKEN_FILE": '"/run/secrets/queuepilot/SLACK_BOT_TOKEN"',
        "PROMETHEUS_SELECTOR": 'cluster="prod"',  # quotes inside the value are its own
        "HOST": '"',
        "GIT_AUTHOR_NAME": '"someone"',
    }
    assert [line.split(":")[0] for line in quoted_variables(environ)] == [
        "REDIS_PREFIX",
        "SLACK_BOT_TOKEN_FILE",
        "slack_channel",
    ]


def test_serve_refuses_a_pilot_whose_step_is_more_than_its_up_to() -> None:
    base = {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s",
        "slack_channel": "C0QUEUE",
        "alert_webhook_token": "t",
        "scaler_backend": "arc",
    }
    pilot = '{"linux.2xlarge": {"pilot": {"up_to": 60, "step": 20}}}'
    read_settings(_env_file=None, scaler_targets=pilot, **base)
    with pytest.raises(SettingsError) as refused:
        read_settings(
            _env_file=None,
            scaler_targets='{"linux.2xlarge": {"pilot": {"up_to": 6, "step": 20}}}',
            **base,
        )
    assert refused.value.problems == [
        'SCALER_TARGETS["linux.2xlarge"].pilot: step 20 is more than up_to 6: no act could take '
        "a whole step; lower step or raise up_to"
    ]
