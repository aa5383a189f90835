"""The local Slack page driven over HTTP as the browser drives it, with an app stand-in (a real
HTTP server) that records each request, checks its signature with slack_sdk's own
`SignatureVerifier`, and answers as a test tells it to."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import httpx
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator

SECRET = "page-test-signing-secret"
TOKEN = "xoxb-page-test"
CHANNEL = "C0PAGE"


@dataclass
class App:
    """An app's Request URL: records what Slack (the page) sent and answers as told."""

    answer: Callable[[dict[str, Any]], Response] = lambda received: Response(status_code=200)
    received: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.app = Starlette(routes=[Route("/slack/events", self._events, methods=["POST"])])

    async def _events(self, request: Request) -> Response:
        body = await request.body()
        valid = SignatureVerifier(SECRET).is_valid_request(body, dict(request.headers))
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        received = {
            "valid": valid,
            "content_type": request.headers.get("content-type"),
            "form": form,
            "payload": json.loads(form["payload"]) if "payload" in form else None,
        }
        with self.lock:
            self.received.append(received)
        return self.answer(received)


@dataclass
class Page:
    emulator: SlackEmulator
    server: RunningServer
    app: App
    http: httpx.Client
    app_url: str

    def state(self) -> dict[str, Any]:
        return self.http.get("/_page/state").json()

    def channel(self) -> dict[str, Any]:
        return next(c for c in self.state()["channels"] if c["id"] == CHANNEL)

    def web_api(self, method: str, **params: Any) -> dict[str, Any]:
        response = self.http.post(
            f"/api/{method}", json=params, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        return response.json()

    def afresh(self) -> Page:
        """The same servers for another test: the workspace reset, the app connected again and
        answering 200, nothing received yet."""
        self.emulator.reset()
        self.emulator.connect_app(self.app_url, SECRET)
        with self.app.lock:
            self.app.received.clear()
        self.app.answer = App.answer
        return self

    def click(self, ts: str, action_id: str = "incident_ack", **extra: Any) -> httpx.Response:
        body = {"channel": CHANNEL, "message_ts": ts, "block_id": "acts", "action_id": action_id}
        return self.http.post("/_page/action", json=body | extra)


@contextmanager
def served_page() -> Iterator[Page]:
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL,), page_user="U0ALICE")
    app = App()
    with serve_in_thread(emulator.app) as server, serve_in_thread(app.app) as app_server:
        app_url = f"{app_server.url}/slack/events"
        emulator.connect_app(app_url, SECRET)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            yield Page(emulator, server, app, http, app_url)


def button(action_id: str, value: str) -> dict[str, Any]:
    text = {"type": "plain_text", "text": action_id}
    return {"type": "button", "action_id": action_id, "text": text, "value": value}


def silence_select() -> dict[str, Any]:
    options = [
        {"text": {"type": "plain_text", "text": label}, "value": value}
        for label, value in (("1h", "3600"), ("4h", "14400"))
    ]
    return {"type": "static_select", "action_id": "incident_silence", "options": options}


def post_incident(page: Page) -> str:
    """A message with an Acknowledge button and a silence menu in block `acts`."""
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Firing*"}},
        {
            "type": "actions",
            "block_id": "acts",
            "elements": [button("incident_ack", "1:abc"), silence_select()],
        },
    ]
    posted = page.web_api("chat.postMessage", channel=CHANNEL, text="incident", blocks=blocks)
    assert posted["ok"], posted
    return str(posted["ts"])


SCALE_VIEW = {
    "type": "modal",
    "callback_id": "scale",
    "title": {"type": "plain_text", "text": "Scale up"},
    "submit": {"type": "plain_text", "text": "Review"},
    "private_metadata": "ref-1",
    "blocks": [
        {
            "type": "input",
            "block_id": "type",
            "label": {"type": "plain_text", "text": "Runner type"},
            "element": {
                "type": "static_select",
                "action_id": "pick",
                "options": [
                    {"text": {"type": "plain_text", "text": "linux"}, "value": "linux.2xlarge"}
                ],
            },
        },
        {
            "type": "input",
            "block_id": "amount",
            "label": {"type": "plain_text", "text": "Runners to add"},
            "element": {
                "type": "number_input",
                "action_id": "n",
                "is_decimal_allowed": False,
                "min_value": "1",
                "max_value": "20",
            },
        },
    ],
}


def open_modal(page: Page) -> dict[str, Any]:
    """The app answers a click by opening the modal with the click's trigger_id."""
    page.click(post_incident(page))
    trigger = page.app.received[-1]["payload"]["trigger_id"]
    opened = page.web_api("views.open", trigger_id=trigger, view=SCALE_VIEW)
    assert opened["ok"], opened
    modal = page.state()["modal"]
    assert modal["id"] == opened["view"]["id"]
    return modal
