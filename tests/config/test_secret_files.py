"""Secrets read from files (`<NAME>_FILE`), as a Secret mounted as a volume gives them: every
secret setting takes one, a secret set both ways or a file that cannot be read is refused with
the variable, the path and the fix, and the reference says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.config import SettingsError, known_variables, load_settings, read_settings
from bot.config import unknown_variables as near_misses
from bot.config.loading import REMOVE_QUOTES, SECRET_FILE_MAX_BYTES, file_variables, secret_settings
from bot.config.reference import render
from tests.support.github_app import private_pem

# What each secret must look like to be taken; the rest take any text.
VALUES = {
    "slack_bot_token": "xoxb-0000-from-a-file",
    "slack_app_token": "xapp-1-from-a-file",
    "redis_url": "redis://:from-a-file@redis.redis.svc:6379/0",
    "github_app_private_key": private_pem(),
}
HTTP_MODE = {
    "slack_bot_token": "xoxb-0000-http",
    "slack_signing_secret": "signing",
    "slack_channel": "C0123456789",
    "alert_webhook_token": "webhook",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = known_variables() | file_variables()
    for name in list(os.environ):
        if name.upper() in ours:
            monkeypatch.delenv(name)


def secret_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_secret_setting_has_a_file_variable() -> None:
    secrets = set(secret_settings())
    assert {
        "slack_bot_token",
        "slack_signing_secret",
        "slack_app_token",
        "alert_webhook_token",
        "alert_webhook_hmac_secret",
        "alert_webhook_basic_password",
        "redis_url",
        "redis_sentinel_password",
        "grafana_token",
        "prometheus_token",
        "github_token",
        "github_app_private_key",
        "hud_token",
        "scaler_webhook_secret",
    } <= secrets
    # Names that are no secret stay environment-only.
    assert not {"slack_channel", "grafana_url", "github_app_id"} & secrets


@pytest.mark.parametrize("name", secret_settings())
def test_each_secret_is_read_from_its_file_without_the_trailing_line_break(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = VALUES.get(name, f"{name}-from-a-file")
    path = secret_file(tmp_path, name, value.rstrip("\n") + "\n")
    monkeypatch.setenv(f"{name.upper()}_FILE", str(path))
    read = getattr(load_settings(_env_file=None), name)
    read = read if isinstance(read, str) else read.get_secret_value()
    assert read == value


def test_a_pem_file_as_github_gives_it_is_the_apps_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = private_pem()
    assert pem.count("\n") > 10
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY_FILE", str(secret_file(tmp_path, "key.pem", pem)))
    settings = read_settings(_env_file=None, github_app_id="123456", **HTTP_MODE)
    assert settings.github_app
    assert settings.github_app_private_key.get_secret_value() == pem


def test_serve_reads_its_required_secrets_from_files_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in HTTP_MODE.items():
        if name != "slack_channel":
            monkeypatch.setenv(f"{name.upper()}_FILE", str(secret_file(tmp_path, name, value)))
    settings = read_settings(_env_file=None, slack_channel="C0123456789")
    assert settings.slack_signing_secret.get_secret_value() == "signing"
    assert settings.alert_webhook_token.get_secret_value() == "webhook"


def test_a_file_variable_in_dotenv_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = secret_file(tmp_path, "token", "xoxb-0000-dotenv\n")
    (tmp_path / ".env").write_text(f"SLACK_BOT_TOKEN_FILE={path}\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings().slack_bot_token.get_secret_value() == "xoxb-0000-dotenv"


def test_a_secret_set_both_ways_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = secret_file(tmp_path, "token", "xoxb-0000-file")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-0000-env")
    monkeypatch.setenv("SLACK_BOT_TOKEN_FILE", str(path))
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert refused.value.problems == [
        f"SLACK_BOT_TOKEN and SLACK_BOT_TOKEN_FILE are both set: keep one (SLACK_BOT_TOKEN_FILE "
        f"reads the secret from the file {path})"
    ]


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "absent", "no such file: mount the secret there"),
        (lambda d: d, "a directory: name the file inside it"),
        (lambda d: secret_file(d, "empty", "\n"), "empty: put the secret in it, or unset"),
        (
            lambda d: secret_file(d, "log", "x" * (SECRET_FILE_MAX_BYTES + 1)),
            "over 64 KiB, so not a secret",
        ),
        (lambda d: d / "binary", "not UTF-8 text"),
    ],
)
def test_a_file_that_cannot_be_read_names_the_variable_the_path_and_the_fix(
    make, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00token")
    path = make(tmp_path)
    monkeypatch.setenv("ALERT_WEBHOOK_TOKEN_FILE", str(path))
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    (problem,) = refused.value.problems
    assert problem.startswith(f"ALERT_WEBHOOK_TOKEN_FILE: cannot read {path}: {says}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_the_bot_may_not_read_says_how_to_mount_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = secret_file(tmp_path, "token", "secret")
    path.chmod(0)
    monkeypatch.setenv("ALERT_WEBHOOK_TOKEN_FILE", str(path))
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert "not readable by this process" in refused.value.problems[0]
    assert "defaultMode" in refused.value.problems[0]


def test_serve_reports_a_missing_file_with_the_other_problems_once_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("SLACK_CHANNEL", "#ci-queue")
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None)
    problems = refused.value.problems
    assert problems[0].startswith(f"SLACK_BOT_TOKEN_FILE: cannot read {tmp_path / 'absent'}")
    assert any(p.startswith("SLACK_CHANNEL: ") for p in problems)
    # The token is not also reported missing: its file's problem says it already.
    assert sum("SLACK_BOT_TOKEN" in p for p in problems) == 1, problems
    assert any(p.startswith("SLACK_SIGNING_SECRET is required") for p in problems)


def test_a_wrong_value_in_a_file_names_the_file_and_never_repeats_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = secret_file(tmp_path, "token", "xapp-very-secret\n")
    monkeypatch.setenv("SLACK_BOT_TOKEN_FILE", str(path))
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert refused.value.problems == [
        f"SLACK_BOT_TOKEN: not a bot token (xoxb-…) (read from SLACK_BOT_TOKEN_FILE={path})"
    ]
    assert "very-secret" not in str(refused.value)


def test_file_variables_are_no_near_misses_but_their_misspellings_are() -> None:
    environ = {"SLACK_BOT_TOKEN_FILE": "/run/x", "GITHUB_TOKEN_FILE": "/run/y"}
    assert near_misses(environ, dotenv=None) == []
    assert near_misses({"SLACK_SIGNING_SECRT_FILE": "/run/x"}, dotenv=None) == [
        "SLACK_SIGNING_SECRT_FILE is not a queuepilot setting: did you mean "
        "SLACK_SIGNING_SECRET_FILE?"
    ]


def test_the_reference_offers_the_file_form_of_every_secret() -> None:
    reference = render()
    assert "`<NAME>_FILE`" in reference
    for variable in file_variables():
        assert f"Or from a file: `{variable}`." in reference


def test_a_path_an_env_file_left_in_quotes_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = secret_file(tmp_path, "token", "webhook")
    monkeypatch.setenv("ALERT_WEBHOOK_TOKEN_FILE", f'"{path}"')
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    (problem,) = refused.value.problems
    assert problem.startswith(f'ALERT_WEBHOOK_TOKEN_FILE: cannot read "{path}": no such file')
    assert problem.endswith(f"; the path is in quotes: {REMOVE_QUOTES}")
    assert REMOVE_QUOTES.startswith("remove the quotes (env files keep them: docker's --env-file")
