"""The emulator's App Home, as Slack documents it: `views.publish` (its arguments, a `home` view of
at most 100 blocks and 250 kB, `hash` against races, the user it is for, the Home tab turned on,
Tier 4, no scope), each person's Home as a view that keeps its ID, and `app_home_opened` sent to
the app, signed, when the page's person opens the Home tab."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot import slack_scopes
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.slack import BOT_TOKEN, Slack, refusal

USER = "U0ALICE"
HOME = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]}


async def test_a_published_home_is_answered_as_slack_answers_it_and_keeps_its_id(
    client: AsyncWebClient, slack: Slack
) -> None:
    first = (await client.views_publish(user_id=USER, view=HOME)).data
    assert first["ok"] is True
    view = first["view"]
    assert view["type"] == "home" and view["blocks"] == HOME["blocks"]
    for field in ("id", "hash", "team_id", "app_id", "bot_id", "root_view_id"):
        assert view[field], field
    assert view["private_metadata"] == "" and view["callback_id"] == ""
    assert slack.emulator.home(USER) == view
    assert slack.emulator.home("U0BOB") is None

    again = (await client.views_publish(user_id=USER, view=HOME, hash=view["hash"])).data["view"]
    assert again["id"] == view["id"] and again["hash"] != view["hash"]


async def test_a_stale_hash_is_a_hash_conflict(client: AsyncWebClient) -> None:
    stale = (await client.views_publish(user_id=USER, view=HOME)).data["view"]["hash"]
    await client.views_publish(user_id=USER, view=HOME)

    answer = await refusal(client.views_publish(user_id=USER, view=HOME, hash=stale))
    assert answer["error"] == "hash_conflict"


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"user_id": "U0NOBODY", "view": HOME}, "invalid_arguments", "invalid `user_id`"),
        ({"view": HOME}, "invalid_arguments", "[ERROR] missing required field: user_id"),
        (
            {
                "user_id": USER,
                "view": {**HOME, "type": "modal", "title": {"type": "plain_text", "text": "x"}},
            },
            "invalid_arguments",
            "[ERROR] must be home [json-pointer:/view/type]",
        ),
        (
            {"user_id": USER, "view": {**HOME, "blocks": [{"type": "divider"}] * 101}},
            "invalid_arguments",
            "[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]",
        ),
    ],
    ids=["unknown-user", "no-user", "a-modal", "101-blocks"],
)
async def test_what_slack_refuses_is_refused(
    client: AsyncWebClient, arguments: dict[str, Any], error: str, message: str
) -> None:
    answer = await refusal(client.api_call("views.publish", json=arguments))
    assert answer["error"] == error
    assert message in answer["response_metadata"]["messages"]


async def test_a_view_over_250_kb_is_too_large(client: AsyncWebClient) -> None:
    text = {"type": "mrkdwn", "text": "x" * 2900}
    blocks = [{"type": "section", "text": text}] * 95
    answer = await refusal(
        client.views_publish(user_id=USER, view={"type": "home", "blocks": blocks})
    )
    assert answer["error"] == "view_too_large"


async def test_an_app_without_its_home_tab_is_not_enabled(
    client: AsyncWebClient, slack: Slack
) -> None:
    slack.emulator.home_tab = False
    try:
        answer = await refusal(client.views_publish(user_id=USER, view=HOME))
    finally:
        slack.emulator.home_tab = True
    assert answer["error"] == "not_enabled"


def test_publishing_needs_no_scope() -> None:
    emulator = SlackEmulator(token=BOT_TOKEN, scopes=slack_scopes.DEFAULT)
    with serve_in_thread(emulator.app) as server:
        answer = httpx.post(
            f"{server.url}/api/views.publish",
            json={"user_id": USER, "view": HOME},
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        ).json()
    assert answer["ok"] is True


async def test_tier_4_when_rate_limits_are_enforced(client: AsyncWebClient, slack: Slack) -> None:
    slack.emulator.enforce_rate_limits = True
    try:
        answers = [
            await client.api_call("views.publish", json={"user_id": USER, "view": HOME})
            for _ in range(5)
        ]
        limited = await refusal(
            client.api_call("views.publish", json={"user_id": USER, "view": HOME})
        )
    finally:
        slack.emulator.enforce_rate_limits = False
    assert all(a["ok"] for a in answers)
    assert limited["error"] == "ratelimited"
    [call] = [c for c in slack.emulator.calls("views.publish") if c.status == 429]
    assert call.status == 429


# -- app_home_opened, sent when the page's person opens the Home tab --------------------------


class Receiver:
    """An app's Request URL: what it was sent, with whether Slack's signature held."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.received: list[tuple[dict[str, str], dict[str, Any], bool]] = []
        self.app = Starlette(routes=[Route("/slack/events", self.events, methods=["POST"])])

    async def events(self, request: Request) -> Response:
        body = await request.body()
        stamp = request.headers["x-slack-request-timestamp"]
        digest = hmac.new(self.secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
        signed = request.headers["x-slack-signature"] == f"v0={digest.hexdigest()}"
        self.received.append((dict(request.headers), json.loads(body), signed))
        return Response(status_code=200)


@pytest.fixture
def receiver(slack: Slack) -> Iterator[tuple[Receiver, RunningServer]]:
    found = Receiver("home-secret")
    with serve_in_thread(found.app) as server:
        slack.emulator.connect_app(f"{server.url}/slack/events", found.secret)
        yield found, server


async def test_opening_the_home_tab_sends_the_app_a_signed_app_home_opened(
    client: AsyncWebClient, slack: Slack, receiver: tuple[Receiver, RunningServer]
) -> None:
    app, _ = receiver
    async with httpx.AsyncClient(base_url=slack.server.url) as page:
        assert (await page.post("/_page/home", json={})).json() == {"ok": True}
        published = (await client.views_publish(user_id=USER, view=HOME)).data["view"]
        assert (await page.post("/_page/home", json={})).json() == {"ok": True}
        state = (await page.get("/_page/state")).json()

    (headers, first, signed), (_, second, _) = app.received
    assert signed and headers["content-type"] == "application/json"
    assert first["type"] == "event_callback" and first["event_id"].startswith("Ev")
    for field in ("token", "team_id", "api_app_id", "event_time", "authorizations"):
        assert field in first, field
    event = first["event"]
    assert event["type"] == "app_home_opened" and event["user"] == USER
    assert event["tab"] == "home" and event["channel"].startswith("D") and event["event_ts"]
    assert "view" not in event, "nothing published yet"
    # Once a view was published, the event carries it as the person sees it.
    assert second["event"]["view"]["hash"] == published["hash"]
    assert state["home"]["id"] == published["id"]
    assert first["event_id"] != second["event_id"]
