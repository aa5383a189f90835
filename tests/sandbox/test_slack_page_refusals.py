"""What the local Slack page refuses, as Slack's client and Slack refuse it: one table.

The page stands in for Slack's client (it sends the app only what the app's own messages and
views offer, and checks a modal's inputs before it submits, as Slack's client does) and for
Slack's side of an interaction (a `response_url` works 5 times within 30 minutes; an app that
fails or cannot be reached is reported to the person). Its own refusals are
`{"ok": false, "problem": ...}` with 400, which the page shows; nothing reaches the app.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.responses import Response

from tests.support.refusals import Answer, Holding, Like, assert_answered
from tests.support.servers import free_port
from tests.support.slack_page import CHANNEL, Page, open_modal, post_incident

# A row's request, given the page once what it needs is there (`ready`: the message's ts, the
# open modal's ID, a response_url...).
Ready = Callable[[Page], Any]
Ask = Callable[[Page, Any], httpx.Response]


def problem(pattern: str) -> Answer:
    return Answer(400, {"ok": False, "problem": Like(pattern)})


def not_done(pattern: str) -> Answer:
    """What the page shows when the app did not take a click or command: Slack's complaint."""
    return Answer(200, {"ok": False, "problem": Like(f"queuepilot did not respond: {pattern}")})


def nothing(page: Page) -> None:
    return None


def modal_id(page: Page) -> str:
    return str(open_modal(page)["id"])


def response_url(page: Page) -> str:
    page.click(post_incident(page))
    return str(page.app.received[-1]["payload"]["response_url"])


def used_five_times(page: Page) -> str:
    url = response_url(page)
    for _ in range(5):
        assert httpx.post(url, json={"text": "again"}).status_code == 200
    return url


def half_an_hour_old(page: Page) -> str:
    url = response_url(page)
    with page.emulator.workspace() as ws:
        [target] = ws.ui.responses.values()
        target.created -= 30 * 60 + 1
    return url


def unreachable(page: Page) -> str:
    page.emulator.connect_app(f"http://127.0.0.1:{free_port()}/slack/events", "secret")
    return post_incident(page)


def without_an_app(page: Page) -> str:
    page.emulator.app_link = None
    return post_incident(page)


def failing_with(status: int) -> Ready:
    def ready(page: Page) -> None:
        page.app.answer = lambda received: Response("boom", status_code=status)

    return ready


def click(**ask: Any) -> Ask:
    return lambda page, ts: page.click(ts, **ask)


def command(text: str, channel: str = CHANNEL) -> Ask:
    return lambda page, _: page.http.post("/_page/command", json={"channel": channel, "text": text})


def submit(values: dict[str, Any]) -> Ask:
    return lambda page, view_id: page.http.post(
        "/_page/view", json={"view_id": view_id, "values": values}
    )


def answer(content: bytes = b'{"text": "hi"}') -> Ask:
    return lambda page, url: httpx.post(url, content=content)


def action(content: bytes) -> Ask:
    return lambda page, _: page.http.post("/_page/action", content=content)


TYPE = {"type": {"pick": "linux.2xlarge"}}
NO_APP = ".*no app is connected.*"
ROWS: list[tuple[str, Ready, Ask, Answer]] = [
    # -- a click names what the app's message offers, or nothing is sent
    ("no such element", post_incident, click(action_id="incident_nuke"), problem(".+")),
    ("no such option", post_incident, click(action_id="incident_silence", selected="999999"),
     problem(".*no option '999999'.*")),
    ("another block", post_incident, click(block_id="other"), problem(".+")),
    ("no such message", post_incident, click(message_ts="1.000001"), problem("message_not_found")),
    ("not JSON", nothing, action(b"{"), problem(".*not JSON.*")),
    ("not an object", nothing, action(b"[1]"), problem(".*not an object.*")),
    ("a click with no app connected yet", without_an_app, click(), problem(NO_APP)),
    ("the Home tab with no app connected yet", without_an_app,
     lambda page, _: page.http.post("/_page/home", json={}), problem(NO_APP)),
    # -- a slash command is the app's own, typed in a channel the app is in
    ("another command", nothing, command("/deploy prod"),
     problem(".*not a command here: try /queue")),
    ("a channel Slack does not know", nothing, command("/queue", "C0NOWHERE"),
     problem("channel_not_found")),
    # -- a modal's inputs as Slack's client checks them before it submits
    ("a required input left empty", modal_id, submit(TYPE), problem("Runners to add is required")),
    ("a fraction for a whole number", modal_id, submit({**TYPE, "amount": {"n": "2.5"}}),
     problem("a whole number, please")),
    ("a number past max_value", modal_id, submit({**TYPE, "amount": {"n": "50"}}),
     problem("must be at most 20")),
    ("no number at all", modal_id, submit({**TYPE, "amount": {"n": "many"}}),
     problem("'many' is not a number")),
    ("an option the menu does not have", modal_id,
     submit({"type": {"pick": "macos"}, "amount": {"n": "2"}}),
     problem("no option 'macos' in 'pick'")),
    ("a modal that is not open", nothing,
     lambda page, _: page.http.post("/_page/view", json={"view_id": "V0NO", "values": {}}),
     problem("that modal is not open")),
    ("closing a modal that is not open", nothing,
     lambda page, _: page.http.post("/_page/view/close", json={"view_id": "V0NO"}),
     problem("that modal is not open")),
    # -- the app's side: Slack tells the person when the app failed them
    ("an app answering 500", failing_with(500), command("/queue"), not_done(".*500.*")),
    ("an app that cannot be reached", unreachable, click(),
     not_done("the app could not be reached.*")),
    # -- a response_url: 5 uses within 30 minutes (Slack's "Handling user interaction")
    ("a sixth answer", used_five_times, answer(), Answer(404, Holding(ok=False))),
    ("an answer after 30 minutes", half_an_hour_old, answer(), Answer(404, Holding(ok=False))),
    ("a response_url never given", lambda page: f"{page.server.url}/_emulator/respond/nowhere",
     answer(), Answer(404, Holding(ok=False))),
    ("an answer that is not JSON", response_url, answer(b"{not json"),
     Answer(400, Holding(ok=False))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("ready", "ask", "expected"),
    [pytest.param(ready, ask, expected, id=name) for name, ready, ask, expected in ROWS],
)
def test_the_page_refuses_it_so(page: Page, ready: Ready, ask: Ask, expected: Answer) -> None:
    context = ready(page)
    sent = len(page.app.received)

    assert_answered(Answer.of(ask(page, context)), expected)
    if expected.status == 400:
        assert len(page.app.received) == sent, "a refused request reaches no app"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
PATHS = [
    "/_page/action",
    "/_page/command",
    "/_page/view",
    "/_page/view/close",
    "/_emulator/respond/x",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(PATHS),
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
