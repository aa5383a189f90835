"""The Slack app manifests ask for exactly the scopes the default features need (the scope map's
defaults), name every optional one beside its feature, and the Socket Mode one has no URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.checks import slack as slack_check

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = ("slack-manifest.yaml", "slack-manifest-socket-mode.yaml")


def manifest(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / name).read_text())


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_scopes_are_the_defaults_and_the_optional_ones_are_named(name: str) -> None:
    text = (REPO / name).read_text()

    assert manifest(name)["oauth_config"]["scopes"]["bot"] == list(slack_check.DEFAULT)
    for scope in slack_check.OPTIONAL:
        assert f"# - {scope}" in text, f"{scope} is named, commented out, in {name}"


def test_the_socket_mode_app_has_socket_mode_and_no_request_url() -> None:
    app = manifest("slack-manifest-socket-mode.yaml")

    assert app["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in app["settings"]["interactivity"]
    assert all("url" not in command for command in app["features"]["slash_commands"])
    assert "example.com" not in (REPO / "slack-manifest-socket-mode.yaml").read_text()


def test_the_http_app_sends_everything_to_slack_events() -> None:
    app = manifest("slack-manifest.yaml")

    assert app["settings"]["socket_mode_enabled"] is False
    urls = [app["settings"]["interactivity"]["request_url"]]
    urls += [command["url"] for command in app["features"]["slash_commands"]]
    assert all(url.endswith("/slack/events") for url in urls)


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_home_tab_is_on_and_slack_says_when_it_is_opened(name: str) -> None:
    app = manifest(name)

    assert app["features"]["app_home"] == {
        "home_tab_enabled": True,
        "messages_tab_enabled": False,
        "messages_tab_read_only_enabled": False,
    }
    events = app["settings"]["event_subscriptions"]
    assert events["bot_events"] == ["app_home_opened"]
    if name == "slack-manifest.yaml":
        assert events["request_url"] == "https://queuepilot.example.com/slack/events"
    else:
        assert "request_url" not in events
