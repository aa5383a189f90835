"""Scaling from Slack: a bot whose `webhook` scaler calls the test's receiver, an incident from the
Alertmanager fixture, and the scale modal's submissions as Slack sends them."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually
from tests.support.slack import CHANNEL, USER, Slack

RUNNER = "linux.g5.4xlarge.nvidia.gpu"  # the runner type of the Alertmanager fixture
AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"


def webhook_settings(settings_for: Any, receiver: ScaleReceiver, **extra: Any) -> Any:
    values = {
        "scaler_backend": "webhook",
        "scaler_webhook_url": receiver.url,  # type: ignore[attr-defined]
        "scaler_webhook_secret": receiver.secret,
        "scaler_targets": json.dumps({RUNNER: {"target": "gpu-pool", "cap": 10}}),
        "scale_allowed_users": USER,
    }
    return settings_for(**{**values, **extra})


async def open_incident(running: RunningBot, slack: Slack) -> Any:
    assert (await running.send("alertmanager", fixture_json(AM_FIRING))).status_code == 202
    return (await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root"))[0]


def _interaction(kind: str, user: str, **fields: Any) -> str:
    """An interaction's form body as Slack posts it: `payload` of `kind`, from `user`."""
    payload = {
        "type": kind,
        "team": {"id": "T0QUEUE", "domain": "example"},
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0QUEUE"},
        "api_app_id": "A0QUEUE",
        "token": "legacy",
        "trigger_id": f"{time.time_ns()}.1",
        **fields,
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def _view(view: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": view["id"],
        "type": "modal",
        "callback_id": view["callback_id"],
        "private_metadata": view["private_metadata"],
        "hash": view.get("hash", "1.x"),
        "state": {"values": values},
        "blocks": view["blocks"],
    }


def view_submission(view: dict[str, Any], values: dict[str, Any], *, user: str = USER) -> str:
    return _interaction("view_submission", user, view=_view(view, values), response_urls=[])


def modal_click(view: dict[str, Any], action_id: str, value: str, *, user: str = USER) -> str:
    """A button pressed in a modal, as Slack sends it: the view as it stands, its hash."""
    action = {"type": "button", "action_id": action_id, "value": value, "block_id": "x"}
    container = {"type": "view", "view_id": view["id"]}
    return _interaction(
        "block_actions", user, container=container, view=_view(view, {}), actions=[action]
    )


def form_values(runner_type: str, amount: str, mode: str | None = None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "runner_type": {
            "value": {
                "type": "static_select",
                "selected_option": {
                    "text": {"type": "plain_text", "text": runner_type},
                    "value": runner_type,
                },
            }
        },
        "amount": {"value": {"type": "number_input", "value": amount}},
    }
    if mode is not None:
        values["mode"] = {"value": {"type": "radio_buttons", "selected_option": {"value": mode}}}
    return values
