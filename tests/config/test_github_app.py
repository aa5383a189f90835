"""A GitHub App in the settings: the key is checked when read (named, with the fix, never
repeated), taken with `\\n` for its line breaks as env files carry it; an App is whole (ID and
key) and the only credential (not beside GITHUB_TOKEN); and the readers that need GITHUB_TOKEN
take an App instead. The factory finds the App's installation where the settings point."""

from __future__ import annotations

import builtins
import os
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bot.backends.github_api import AppInstallationToken, installation_of
from bot.config import Settings, SettingsError, load_settings, read_settings
from bot.factory import build_issues, build_metrics, github_auth
from tests.support.github_app import APP_ID, private_pem

SERVING = {
    "slack_bot_token": "xoxb-1",
    "slack_signing_secret": "s3cret",
    "slack_channel": "C0QUEUE",
    "alert_webhook_token": "hook-token",
}
APP = {"github_app_id": APP_ID, "github_app_private_key": private_pem()}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in Settings.model_fields:
            monkeypatch.delenv(name)


def problems(**values: Any) -> str:
    with pytest.raises(SettingsError) as refused:
        read_settings(_env_file=None, **SERVING, **values)
    return str(refused.value)


def test_a_key_with_literal_backslash_n_line_breaks_is_read_as_pem() -> None:
    one_line = private_pem().strip().replace("\n", "\\n")

    settings = load_settings(_env_file=None, github_app_id=APP_ID, github_app_private_key=one_line)

    assert settings.github_app_private_key is not None
    assert settings.github_app_private_key.get_secret_value() == private_pem()
    assert settings.github_app


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("not a key at all", "not a PEM RSA private key"),
        (private_pem().replace("MII", "MIJ", 1), "not a PEM RSA private key"),
        ("-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n", "not a PEM RSA"),
        (
            ec.generate_private_key(ec.SECP256R1())
            .private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            .decode(),
            "a private key, but not RSA",
        ),
    ],
)
def test_a_key_that_is_not_a_pem_rsa_private_key_is_named_with_the_fix(key: str, says: str) -> None:
    message = problems(**{**APP, "github_app_private_key": key})

    assert message.startswith(f"GITHUB_APP_PRIVATE_KEY: {says}")
    assert "paste the whole .pem file" in message and "\\n for each line break" in message
    material = [line for line in key.splitlines() if len(line) > 12 and "-----" not in line]
    assert not any(line in message for line in material)  # the key is never repeated
    # The App is not also said to lack its key: one problem, one line.
    assert "GITHUB_APP_ID needs" not in message


def test_without_the_github_app_extra_the_key_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def without_cryptography(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("cryptography"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_cryptography)

    assert "install queuepilot with the `github-app` extra" in problems(**APP)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (
            {**APP, "github_token": "ghp-1"},
            "GITHUB_TOKEN and a GitHub App (GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY) are both set: "
            "keep one (unset GITHUB_TOKEN to call as the App)",
        ),
        ({"github_app_id": APP_ID}, "GITHUB_APP_ID needs GITHUB_APP_PRIVATE_KEY"),
        (
            {"github_app_private_key": private_pem()},
            "GITHUB_APP_PRIVATE_KEY needs GITHUB_APP_ID",
        ),
        (
            {"github_app_installation_id": 7, "github_token": "ghp-1"},
            "GITHUB_APP_INSTALLATION_ID needs GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY",
        ),
        ({"github_app_id": "12 34", **{"github_app_private_key": private_pem()}}, "not a GitHub"),
        (
            {"github_issues_repo": "pytorch/alerting-issues"},
            "GITHUB_ISSUES_REPO needs GITHUB_TOKEN or a GitHub App (GITHUB_APP_ID and "
            "GITHUB_APP_PRIVATE_KEY)",
        ),
    ],
)
def test_an_app_is_whole_and_the_only_credential(values: dict[str, Any], says: str) -> None:
    assert says in problems(**values)


@pytest.mark.parametrize(
    "values",
    [
        {"github_issues_repo": "pytorch/alerting-issues"},
        {"metrics_backend": "github", "github_org": "pytorch"},
        {"jobs_backend": "github", "github_repos": "pytorch/pytorch"},
    ],
)
def test_an_app_serves_where_a_token_would(values: dict[str, Any]) -> None:
    settings = read_settings(_env_file=None, **SERVING, **APP, **values)

    assert settings.has_github_credential


@pytest.mark.parametrize(
    ("values", "where"),
    [
        (
            {"github_issues_repo": "pytorch/alerting-issues", "github_repos": "pytorch/pytorch"},
            "/repos/pytorch/alerting-issues/installation",
        ),
        (
            {"github_repos": "pytorch/pytorch,pytorch/vision", "github_org": "pytorch"},
            "/repos/pytorch/pytorch/installation",
        ),
        ({"github_org": "pytorch"}, "/orgs/pytorch/installation"),
    ],
)
def test_the_installation_is_looked_for_where_the_settings_point(
    values: dict[str, Any], where: str
) -> None:
    settings = load_settings(_env_file=None, **APP, **values)

    assert isinstance(github_auth(settings), AppInstallationToken)
    assert installation_of(settings) == where
    assert settings.github_app_installation_id is None


async def test_both_readers_call_with_the_one_token_source_they_are_given() -> None:
    settings = load_settings(
        _env_file=None,
        **APP,
        metrics_backend="github",
        github_repos="pytorch/pytorch",
        github_issues_repo="pytorch/alerting-issues",
    )
    auth = github_auth(settings)
    metrics, issues = build_metrics(settings, auth), build_issues(settings, auth)

    assert issues is not None and issues.api._auth is auth
    assert metrics.api._auth is auth  # type: ignore[attr-defined]
    await issues.api.aclose()
    await metrics.aclose()  # type: ignore[attr-defined]
    token = load_settings(_env_file=None, github_token="ghp-1")
    assert github_auth(token) is None  # each client reads GITHUB_TOKEN from the settings
    assert github_auth(load_settings(_env_file=None)) is None
    # A source given for the readings is no issue repository.
    assert build_issues(token, github_auth(token)) is None
