"""The local Slack page's side of the emulator: what the app receives when the page's user acts,
and what the page shows of the app's answers.

An app stand-in (a real HTTP server) records each request, checks its signature with slack_sdk's
own `SignatureVerifier`, and answers as a test tells it to; the page is driven over HTTP exactly
as the browser drives it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
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

    def state(self) -> dict[str, Any]:
        return self.http.get("/_page/state").json()

    def channel(self) -> dict[str, Any]:
        return next(c for c in self.state()["channels"] if c["id"] == CHANNEL)

    def web_api(self, method: str, **params: Any) -> dict[str, Any]:
        response = self.http.post(
            f"/api/{method}", json=params, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        return response.json()


@pytest.fixture
def page() -> Iterator[Page]:
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL,), page_user="U0ALICE")
    app = App()
    with serve_in_thread(emulator.app) as server, serve_in_thread(app.app) as app_server:
        emulator.connect_app(f"{app_server.url}/slack/events", SECRET)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            yield Page(emulator, server, app, http)


def button(action_id: str, value: str, **extra: Any) -> dict[str, Any]:
    text = {"type": "plain_text", "text": action_id}
    return {"type": "button", "action_id": action_id, "text": text, "value": value, **extra}


def silence_select() -> dict[str, Any]:
    options = [
        {"text": {"type": "plain_text", "text": label}, "value": value}
        for label, value in (("1h", "3600"), ("4h", "14400"))
    ]
    return {"type": "static_select", "action_id": "incident_silence", "options": options}


def click(page: Page, ts: str, action_id: str = "incident_ack", **extra: Any) -> httpx.Response:
    body = {"channel": CHANNEL, "message_ts": ts, "block_id": "acts", "action_id": action_id}
    return page.http.post("/_page/action", json=body | extra)


def post_incident(page: Page) -> str:
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


def test_a_click_reaches_the_app_signed_and_shaped_like_slacks(page: Page) -> None:
    ts = post_incident(page)
    answer = page.http.post(
        "/_page/action",
        json={
            "channel": CHANNEL,
            "message_ts": ts,
            "block_id": "acts",
            "action_id": "incident_ack",
        },
    )
    assert answer.json() == {"ok": True}
    [got] = page.app.received
    assert got["valid"] and got["content_type"] == "application/x-www-form-urlencoded"
    payload = got["payload"]
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U0ALICE"
    assert payload["container"] == {
        "type": "message",
        "message_ts": ts,
        "channel_id": CHANNEL,
        "is_ephemeral": False,
    }
    assert payload["message"]["ts"] == ts and payload["message"]["blocks"]
    [action] = payload["actions"]
    assert (action["action_id"], action["block_id"], action["value"]) == (
        "incident_ack",
        "acts",
        "1:abc",
    )
    assert payload["trigger_id"] and payload["response_url"].startswith(page.server.url)


def test_a_select_sends_the_chosen_option_as_the_message_defined_it(page: Page) -> None:
    ts = post_incident(page)
    choice = {"channel": CHANNEL, "message_ts": ts, "block_id": "acts"}
    page.http.post(
        "/_page/action", json={**choice, "action_id": "incident_silence", "selected": "3600"}
    )
    [action] = page.app.received[0]["payload"]["actions"]
    assert action["type"] == "static_select"
    assert action["selected_option"] == {
        "text": {"type": "plain_text", "text": "1h"},
        "value": "3600",
    }


@pytest.mark.parametrize(
    "ask",
    [
        {"action_id": "incident_nuke"},  # no such element
        {"action_id": "incident_silence", "selected": "999999"},  # no such option
        {"action_id": "incident_ack", "block_id": "other"},  # wrong block
        {"action_id": "incident_ack", "message_ts": "1.000001"},  # no such message
    ],
)
def test_the_page_cannot_invent_what_the_app_did_not_send(page: Page, ask: dict[str, Any]) -> None:
    ts = post_incident(page)
    body = {"channel": CHANNEL, "message_ts": ts, "block_id": "acts", **ask}
    answer = page.http.post("/_page/action", json=body)
    assert answer.status_code == 400 and answer.json()["problem"]
    assert page.app.received == []


def test_response_url_answers_are_shown_to_the_page_user_only(page: Page) -> None:
    ts = post_incident(page)
    page.http.post(
        "/_page/action",
        json={
            "channel": CHANNEL,
            "message_ts": ts,
            "block_id": "acts",
            "action_id": "incident_ack",
        },
    )
    url = page.app.received[0]["payload"]["response_url"]
    assert httpx.post(url, json={"text": "only you see this"}).status_code == 200
    # Someone else's ephemeral is in the channel, but not on alice's page.
    page.web_api("chat.postEphemeral", channel=CHANNEL, user="U0BOB", text="for bob")
    shown = [e["text"] for e in page.channel()["ephemerals"]]
    assert shown == ["only you see this"]
    # replace_original edits the message the button was on.
    httpx.post(url, json={"replace_original": True, "text": "acknowledged"})
    [message] = page.channel()["messages"]
    assert message["text"] == "acknowledged" and message["edits"] == 1
    # Slack allows five uses of a response_url.
    for _ in range(3):
        httpx.post(url, json={"text": "again"})
    assert httpx.post(url, json={"text": "one too many"}).status_code == 404


def test_a_slash_command_is_sent_as_slack_sends_it_and_its_answer_shown(page: Page) -> None:
    page.app.answer = lambda received: JSONResponse({"text": "*3* incidents open"})
    answer = page.http.post(
        "/_page/command", json={"channel": CHANNEL, "text": "/queue  incidents "}
    )
    assert answer.json() == {"ok": True}
    [got] = page.app.received
    assert got["valid"]
    form = got["form"]
    assert (form["command"], form["text"], form["user_id"], form["channel_id"]) == (
        "/queue",
        "incidents",
        "U0ALICE",
        CHANNEL,
    )
    assert form["trigger_id"] and form["response_url"].startswith(page.server.url)
    assert [e["text"] for e in page.channel()["ephemerals"]] == ["*3* incidents open"]


def test_an_unknown_command_never_reaches_the_app(page: Page) -> None:
    answer = page.http.post("/_page/command", json={"channel": CHANNEL, "text": "/deploy prod"})
    assert answer.status_code == 400 and "/queue" in answer.json()["problem"]
    assert page.app.received == []


def test_an_app_that_fails_or_hangs_is_reported_to_the_page(page: Page) -> None:
    page.app.answer = lambda received: Response("boom", status_code=500)
    answer = page.http.post("/_page/command", json={"channel": CHANNEL, "text": "/queue"})
    assert answer.json()["ok"] is False and "500" in answer.json()["problem"]


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
    ts = post_incident(page)
    page.http.post(
        "/_page/action",
        json={
            "channel": CHANNEL,
            "message_ts": ts,
            "block_id": "acts",
            "action_id": "incident_ack",
        },
    )
    trigger = page.app.received[-1]["payload"]["trigger_id"]
    opened = page.web_api("views.open", trigger_id=trigger, view=SCALE_VIEW)
    assert opened["ok"], opened
    # A trigger opens one view.
    again = page.web_api("views.open", trigger_id=trigger, view=SCALE_VIEW)
    assert again == {"ok": False, "error": "exchanged_trigger_id"}
    modal = page.state()["modal"]
    assert modal["id"] == opened["view"]["id"]
    return modal


def test_a_modal_opens_for_the_page_user_and_its_submission_has_slacks_state(page: Page) -> None:
    modal = open_modal(page)
    page.app.answer = lambda received: Response(status_code=200)
    values = {"type": {"pick": "linux.2xlarge"}, "amount": {"n": "4"}}
    answer = page.http.post("/_page/view", json={"view_id": modal["id"], "values": values})
    assert answer.json() == {"ok": True}
    payload = page.app.received[-1]["payload"]
    assert payload["type"] == "view_submission" and payload["view"]["private_metadata"] == "ref-1"
    assert payload["view"]["state"]["values"] == {
        "type": {
            "pick": {
                "type": "static_select",
                "selected_option": {
                    "text": {"type": "plain_text", "text": "linux"},
                    "value": "linux.2xlarge",
                },
            }
        },
        "amount": {"n": {"type": "number_input", "value": "4"}},
    }
    assert page.state()["modal"] is None  # an empty answer closes it


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"type": {"pick": "linux.2xlarge"}}, "Runners to add is required"),
        ({"type": {"pick": "linux.2xlarge"}, "amount": {"n": "2.5"}}, "whole number"),
        ({"type": {"pick": "linux.2xlarge"}, "amount": {"n": "50"}}, "at most 20"),
        ({"type": {"pick": "macos"}, "amount": {"n": "2"}}, "no option"),
    ],
)
def test_the_page_checks_inputs_before_submitting_like_slacks_client(
    page: Page, values: dict[str, Any], problem: str
) -> None:
    modal = open_modal(page)
    sent = len(page.app.received)
    answer = page.http.post("/_page/view", json={"view_id": modal["id"], "values": values})
    assert answer.status_code == 400 and problem in answer.json()["problem"]
    assert len(page.app.received) == sent


def test_response_actions_show_errors_update_the_view_and_clear_it(page: Page) -> None:
    modal = open_modal(page)
    values = {"type": {"pick": "linux.2xlarge"}, "amount": {"n": "4"}}
    page.app.answer = lambda received: JSONResponse(
        {"response_action": "errors", "errors": {"amount": "Too many for this type."}}
    )
    page.http.post("/_page/view", json={"view_id": modal["id"], "values": values})
    assert page.state()["modal"]["errors"] == {"amount": "Too many for this type."}

    confirm = {**SCALE_VIEW, "title": {"type": "plain_text", "text": "Confirm"}, "blocks": []}
    page.app.answer = lambda received: JSONResponse({"response_action": "update", "view": confirm})
    page.http.post("/_page/view", json={"view_id": modal["id"], "values": values})
    shown = page.state()["modal"]
    assert (shown["id"], shown["title"]["text"], shown["errors"]) == (modal["id"], "Confirm", {})

    page.app.answer = lambda received: JSONResponse({"response_action": "clear"})
    page.http.post("/_page/view", json={"view_id": modal["id"], "values": {}})
    assert page.state()["modal"] is None


def test_a_trigger_is_good_for_three_seconds(page: Page) -> None:
    ts = post_incident(page)
    page.http.post(
        "/_page/action",
        json={
            "channel": CHANNEL,
            "message_ts": ts,
            "block_id": "acts",
            "action_id": "incident_ack",
        },
    )
    trigger = page.app.received[-1]["payload"]["trigger_id"]
    with page.emulator.workspace() as ws:  # the click was 4 s ago
        user, at = ws.ui.triggers[trigger]
        ws.ui.triggers[trigger] = (user, at - 4)
    late = page.web_api("views.open", trigger_id=trigger, view=SCALE_VIEW)
    assert late == {"ok": False, "error": "expired_trigger_id"}
    assert page.state()["modal"] is None


def test_the_event_stream_announces_each_change(page: Page) -> None:
    with (
        httpx.Client(base_url=page.server.url, timeout=10) as http,
        http.stream("GET", "/_page/events") as events,
    ):
        lines = events.iter_lines()
        seen: list[str] = []
        deadline = time.monotonic() + 10
        while not any(line.startswith("event: change") for line in seen):
            seen.append(next(lines))
            assert time.monotonic() < deadline
        version = int(next(lines).removeprefix("data: "))
        post_incident(page)
        while True:
            line = next(lines)
            if line.startswith("data: "):
                assert int(line.removeprefix("data: ")) > version
                break
            assert time.monotonic() < deadline


def test_the_page_is_served_with_its_scripts(page: Page) -> None:
    index = page.http.get("/")
    assert index.status_code == 200 and "/page/app.js" in index.text
    for asset in ("app.js", "blocks.js", "mrkdwn.js", "style.css"):
        assert page.http.get(f"/page/{asset}").status_code == 200


def test_the_page_shows_angle_brackets_as_slack_does(page: Page) -> None:
    """An unescaped `<duration>` is a link to nowhere, which Slack does not show: the page must
    not show it either, or it hides the very mistake a user would see in Slack."""
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    for text in (
        "`/queue silence <duration> [ID]` <not a link|labelled>",
        "`/queue silence &lt;duration&gt; [ID]` &lt;b&gt; &amp; c",
    ):
        assert page.web_api("chat.postMessage", channel=CHANNEL, text=text)["ok"]
    with visitor.chromium_page(page.server.url) as browser:
        expect(browser.locator("#messages .message-text")).to_have_text(
            ["/queue silence [ID] labelled", "/queue silence <duration> [ID] <b> & c"],
            timeout=20_000,
        )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(
        [
            "/_page/action",
            "/_page/command",
            "/_page/view",
            "/_page/view/close",
            "/_emulator/respond/x",
        ]
    ),
    body=JSON | st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)
def test_anything_the_page_sends_gets_an_answer_never_a_crash(
    page: Page, path: str, body: object
) -> None:
    post_incident(page)
    content = body if isinstance(body, str) else json.dumps(body)
    answer = page.http.post(path, content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code < 500, answer.text
    assert answer.json()["ok"] in (True, False)


def test_closing_the_emulator_ends_open_event_streams() -> None:
    """Ctrl-C on `make demo` with a browser open: the page's stream lets go, nothing hangs."""
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL,))
    with (
        serve_in_thread(emulator.app) as server,
        httpx.stream("GET", f"{server.url}/_page/events", timeout=10) as events,
    ):
        lines = events.iter_lines()
        assert next(lines).startswith("retry:")
        emulator.close()
        list(lines)  # returns once the server ends the stream
        started = time.monotonic()
    assert time.monotonic() - started < 2  # the server stopped without waiting on the stream
