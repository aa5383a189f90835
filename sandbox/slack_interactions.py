"""What Slack sends *to* an app: interaction payloads, slash commands and events, signed and
delivered.

The local Slack page acts through this module, so the bot receives exactly what it would receive
from Slack: a form-encoded POST to its one Request URL, signed with `v0=HMAC-SHA256(signing
secret, "v0:<timestamp>:<body>")` in `X-Slack-Signature` with `X-Slack-Request-Timestamp`; a
`payload` field holding JSON for interactions (`block_actions`, `view_submission`,
`view_closed`), and plain fields for slash commands. Each carries a `trigger_id` the emulator
will accept once within 3 seconds for `views.open`, and, where Slack gives one, a `response_url`
the emulator serves. An Events API event (`app_home_opened`) goes as a JSON body, the event
inside Slack's `event_callback` wrapper, signed the same way.

The builders are pure functions of what was clicked; `AppLink` does the HTTP.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from sandbox.slack_model import APP_ID, BOT_USER_ID, TEAM_ID, TEAM_NAME

# Slack gives up on an app that has not answered within 3 seconds and tells the user so.
ACK_TIMEOUT_S = 3.0
USER_AGENT = "Slackbot 1.0 (+https://api.slack.com/robots)"


@dataclass(frozen=True)
class Person:
    """Who is acting: the page's user."""

    id: str
    name: str

    def as_user(self) -> dict[str, Any]:
        return {"id": self.id, "username": self.name, "name": self.name, "team_id": TEAM_ID}


def signature_headers(
    secret: str,
    body: bytes,
    *,
    timestamp: int | None = None,
    content_type: str = "application/x-www-form-urlencoded",
) -> dict[str, str]:
    """The headers Slack signs every request with (see the module docstring)."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + stamp.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": content_type,
        "User-Agent": USER_AGENT,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


def _team() -> dict[str, str]:
    return {"id": TEAM_ID, "domain": TEAM_NAME}


def block_actions_payload(
    person: Person,
    *,
    action: dict[str, Any],
    trigger_id: str,
    channel: str | None = None,
    message: dict[str, Any] | None = None,
    view: dict[str, Any] | None = None,
    response_url: str | None = None,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `block_actions` payload for a click in a message (with its channel) or in a modal."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": person.as_user(),
        "api_app_id": APP_ID,
        "token": "verification-token-unused",
        "trigger_id": trigger_id,
        "team": _team(),
        "enterprise": None,
        "is_enterprise_install": False,
        "actions": [{**action, "action_ts": f"{time.time():.6f}"}],
    }
    if view is not None:
        payload.update(container={"type": "view", "view_id": view["id"]}, view=view)
    else:
        assert channel is not None and message is not None
        payload.update(
            container={
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": channel,
                "is_ephemeral": False,
            },
            channel={"id": channel, "name": channel.lower()},
            message=message,
            state={"values": state or {}},
            response_url=response_url,
        )
    return payload


def view_submission_payload(
    person: Person, *, view: dict[str, Any], trigger_id: str
) -> dict[str, Any]:
    """A `view_submission`: the view as stored, with the inputs' values in `view.state`."""
    return {
        "type": "view_submission",
        "team": _team(),
        "user": person.as_user(),
        "api_app_id": APP_ID,
        "token": "verification-token-unused",
        "trigger_id": trigger_id,
        "view": view,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def view_closed_payload(person: Person, *, view: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "view_closed",
        "team": _team(),
        "user": person.as_user(),
        "api_app_id": APP_ID,
        "view": view,
        "is_cleared": False,
        "is_enterprise_install": False,
    }


def slash_command_form(
    person: Person,
    *,
    command: str,
    text: str,
    channel: str,
    trigger_id: str,
    response_url: str,
) -> dict[str, str]:
    return {
        "token": "verification-token-unused",
        "team_id": TEAM_ID,
        "team_domain": TEAM_NAME,
        "channel_id": channel,
        "channel_name": channel.lower(),
        "user_id": person.id,
        "user_name": person.name,
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def app_home_opened(person: Person, *, tab: str, view: dict[str, Any] | None) -> dict[str, Any]:
    """`app_home_opened`: the person opened the app's Home (`tab` "home") or Messages tab; `view`
    is the Home view published for them, when one was (its blocks, `hash` and the rest)."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": person.id,
        "channel": f"D{person.id[1:]}",  # the App Home's own conversation with the person
        "tab": tab,
        "event_ts": f"{time.time():.6f}",
    }
    if view is not None:
        event["view"] = view
    return event


def event_callback(event: dict[str, Any]) -> dict[str, Any]:
    """The Events API's outer wrapper around one event, as HTTP and Socket Mode deliver it."""
    return {
        "token": "verification-token-unused",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{secrets.token_hex(5).upper()}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


@dataclass(frozen=True)
class AppAnswer:
    """The app's HTTP answer, or why there was none (Slack shows the user an error then)."""

    status: int | None
    body: bytes = b""
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200

    def json(self) -> dict[str, Any] | None:
        """The answer's JSON object, None for an empty or non-JSON answer."""
        if not self.body.strip():
            return None
        try:
            decoded = json.loads(self.body)
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None


class AppLink:
    """The app's Request URL and signing secret, and one HTTP client to deliver to it."""

    def __init__(self, request_url: str, signing_secret: str) -> None:
        self.request_url = request_url
        self._secret = signing_secret
        self._client = httpx.AsyncClient(timeout=ACK_TIMEOUT_S)

    async def send_payload(self, payload: dict[str, Any]) -> AppAnswer:
        fields = {"payload": json.dumps(payload, separators=(",", ":"))}
        return await self._post(urlencode(fields).encode())

    async def send_command(self, form: dict[str, str]) -> AppAnswer:
        return await self._post(urlencode(form).encode())

    async def send_event(self, event: dict[str, Any]) -> AppAnswer:
        """An Events API event, delivered once (Slack would retry an unanswered one with
        `X-Slack-Retry-Num`; the page tells its person instead, as for an interaction)."""
        body = json.dumps(event_callback(event), separators=(",", ":")).encode()
        return await self._post(body, content_type="application/json")

    async def _post(
        self, body: bytes, *, content_type: str = "application/x-www-form-urlencoded"
    ) -> AppAnswer:
        headers = signature_headers(self._secret, body, content_type=content_type)
        try:
            response = await self._client.post(self.request_url, content=body, headers=headers)
        except httpx.TimeoutException:
            return AppAnswer(None, problem="the app did not answer within 3 seconds")
        except httpx.HTTPError as exc:
            return AppAnswer(None, problem=f"the app could not be reached ({type(exc).__name__})")
        if response.status_code != 200:
            return AppAnswer(
                response.status_code, response.content, f"the app answered {response.status_code}"
            )
        return AppAnswer(200, response.content)

    async def aclose(self) -> None:
        await self._client.aclose()
