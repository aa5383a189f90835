"""The local Slack page of `make demo`: what the app receives when the page's person acts, and
what the page shows of the app's answers (messages, ephemerals, modals, charts, Slack's own
escaping). What it refuses is test_slack_page_refusals.py.

The page is driven over HTTP as the browser drives it (`tests.support.slack_page`); what only a
browser shows is looked at in chromium.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from starlette.responses import JSONResponse, Response

from bot.render import mrkdwn as md
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.charts import line, pie
from tests.support.slack_page import CHANNEL, SCALE_VIEW, TOKEN, Page, open_modal, post_incident


def test_a_click_reaches_the_app_signed_and_shaped_like_slacks(page: Page) -> None:
    ts = post_incident(page)
    assert page.click(ts).json() == {"ok": True}
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
    page.click(post_incident(page), "incident_silence", selected="3600")
    [action] = page.app.received[0]["payload"]["actions"]
    assert action["type"] == "static_select"
    assert action["selected_option"] == {
        "text": {"type": "plain_text", "text": "1h"},
        "value": "3600",
    }


def test_response_url_answers_are_shown_to_the_page_user_only(page: Page) -> None:
    page.click(post_incident(page))
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
    for asset in ("app.js", "blocks.js", "dates.js", "mrkdwn.js", "style.css"):
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


# Monday 2 March 2026, 17:12:45 UTC: 12:12 in New York, 18:12 in Berlin.
AT = datetime(2026, 3, 2, 17, 12, 45, tzinfo=UTC)


def test_the_page_shows_dates_in_the_readers_zone_with_each_tokens_format(page: Page) -> None:
    """Slack shows `<!date^…>` in each reader's own zone and hour cycle: the page does too, and
    its message headers keep the same clock; an unknown token shows the fallback, as in Slack."""
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    epoch = int(AT.timestamp())
    today = int(time.time())
    said = [
        f"Status update · {md.time_of(AT)}",
        f"silenced until {md.slack_date(AT)}",
        f"<!date^{epoch}^{{date_num}} {{time_secs}}|x> · <!date^{epoch}^{{date}}|x>",
        f"<!date^{epoch}^{{date_long}} at {{time}}^https://example.com/r|x>",
        f"<!date^{today}^{{date_pretty}}, {{date_short}}|x> · <!date^{epoch}^{{nope}}|17:12 UTC>",
    ]
    for text in said:
        assert page.web_api("chat.postMessage", channel=CHANNEL, text=text)["ok"]
    ts = page.channel()["messages"][0]["ts"]
    local = datetime.fromtimestamp(float(ts), ZoneInfo("America/New_York"))
    clock = f"{local:%I:%M:%S %p}".lstrip("0")
    now = datetime.fromtimestamp(today, ZoneInfo("America/New_York"))
    with visitor.chromium_page(
        page.server.url, timezone="America/New_York", locale="en-US"
    ) as browser:
        texts = browser.locator("#messages .message-text")
        expect(texts).to_have_count(len(said), timeout=20_000)
        shown = [" ".join(t.split()) for t in texts.all_inner_texts()]
        assert shown == [
            "Status update · 12:12 PM",
            "silenced until Mar 2, 2026 12:12 PM",
            "2026-03-02 12:12:45 PM · March 2nd, 2026",
            "Monday, March 2nd, 2026 at 12:12 PM",
            f"today, {now:%b} {now.day}, {now.year} · 17:12 UTC",
        ]
        link = texts.nth(3).locator("a")
        assert link.get_attribute("href") == "https://example.com/r"
        header = browser.locator("#messages .message-meta time").first.inner_text()
        assert " ".join(header.split()) == clock
    with visitor.chromium_page(page.server.url, timezone="Europe/Berlin", locale="en-GB") as berlin:
        first = berlin.locator("#messages .message-text").first
        expect(first).to_have_text("Status update · 18:12", timeout=20_000)


GPU_CHANNEL = "C0GPUQUEUE"


@contextmanager
def posted(texts: list[str]) -> Iterator[str]:
    """The local page's URL, its emulator serving two named channels with `texts` posted in the
    first."""
    names = {CHANNEL: "ci-queue-incidents", GPU_CHANNEL: "gpu-ci-incidents"}
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL, GPU_CHANNEL), channel_names=names)
    with serve_in_thread(emulator.app) as server:
        for text in texts:
            answer = httpx.post(
                f"{server.url}/api/chat.postMessage",
                json={"channel": CHANNEL, "text": text},
                headers={"Authorization": f"Bearer {TOKEN}"},
            ).json()
            assert answer["ok"], answer
        yield server.url


def test_the_page_names_channels_as_slack_shows_them() -> None:
    """`<#C…>` shows the channel's name, as Slack shows it to every reader; its label only where
    the workspace does not know it."""
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    said = [
        f"1 open in <#{GPU_CHANNEL}>",
        f"moved to <#{GPU_CHANNEL}|an-old-name>",
        "<#C0ELSEWHERE|elsewhere> and <#C0UNNAMED>",
    ]
    with posted(said) as url, visitor.chromium_page(url) as browser:
        expect(browser.locator("#messages .message-text")).to_have_text(
            ["1 open in #gpu-ci-incidents", "moved to #gpu-ci-incidents",
             "#elsewhere and #C0UNNAMED"],
            timeout=20_000,
        )  # fmt: skip


def test_the_channel_pane_scrolls_when_its_messages_overflow_as_the_thread_does() -> None:
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    with (
        posted([f"status {n}" for n in range(60)]) as url,
        visitor.chromium_page(url) as browser,
    ):
        texts = browser.locator("#messages .message-text")
        expect(texts).to_have_count(60, timeout=20_000)
        pane = browser.locator("#messages").evaluate(
            "box => ({overflow: getComputedStyle(box).overflowY, scroll: box.scrollHeight,"
            " client: box.clientHeight, top: box.scrollTop, window: innerHeight})"
        )
        assert pane["overflow"] in ("auto", "scroll"), pane
        assert pane["scroll"] > pane["client"] and pane["client"] < pane["window"], pane
        assert pane["top"] > 0, "it opens at the newest message, as Slack does"
        expect(texts.nth(59)).to_be_in_viewport()
        browser.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
        expect(texts.nth(0)).to_be_in_viewport()
        expect(texts.nth(59)).not_to_be_in_viewport()


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


def with_type(block: dict[str, Any], kind: str) -> dict[str, Any]:
    return {**block, "chart": {**block["chart"], "type": kind}}


def test_the_page_draws_each_series_and_each_slice() -> None:
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    hostile = "<img src=x onerror=alert(1)>"
    trend = line(("linux.2xlarge", [3, 9, 4]), ("gpu", [1, 1, 4]), (hostile[:20], [0, 2, 2]))
    trend["title"] = hostile
    runners = pie(("linux.2xlarge", 12), ("gpu", 3), ("arm", 2), ("mac", 1))
    # An emulator of its own: the page's event stream is closed before its server stops.
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL,))
    with serve_in_thread(emulator.app) as server:
        for blocks in ([trend, runners], [with_type(trend, "bar"), with_type(trend, "area")]):
            answer = httpx.post(
                f"{server.url}/api/chat.postMessage",
                json={"channel": CHANNEL, "text": "trend", "blocks": blocks},
                headers={"Authorization": f"Bearer {TOKEN}"},
            ).json()
            assert answer["ok"], answer
        started = time.monotonic()
        with visitor.chromium_page(server.url) as page:
            charts = page.locator("#messages figure.block-chart")
            expect(charts).to_have_count(4, timeout=20_000)
            lines, slices, bars, areas = (charts.nth(i) for i in range(4))
            assert lines.locator("svg .series").count() == 3
            assert lines.locator("svg polyline").count() == 3
            expect(lines.locator(".chart-legend li")).to_have_text(
                ["linux.2xlarge", "gpu", hostile[:20]]
            )
            # The title is text, never markup.
            expect(lines.locator("figcaption")).to_have_text(hostile)
            assert lines.locator("img").count() == 0
            expect(lines.locator("svg .x-axis text:not(.axis-title)")).to_have_text(
                ["08:00", "08:05", "08:10"]
            )
            assert slices.locator("svg .slice").count() == 4
            expect(slices.locator(".chart-legend li").first).to_have_text("linux.2xlarge · 66.7%")
            assert bars.locator("svg .series").count() == 3
            assert bars.locator("svg .series rect").count() == 9  # three categories, three series
            assert areas.locator("svg .series path").count() == 3
        emulator.close()
    assert time.monotonic() - started < 20, "the page check is meant to stay cheap"


def test_a_permalink_opens_its_thread_on_the_page(page: Page) -> None:
    """The GitHub stand-in's comments link the incident's Slack thread by `chat.getPermalink`:
    opened, the page shows that thread; a message the workspace lacks is a 404."""
    root = page.web_api("chat.postMessage", channel=CHANNEL, text="the incident")["ts"]
    page.web_api("chat.postMessage", channel=CHANNEL, text="older and busier")
    page.web_api("chat.postMessage", channel=CHANNEL, text="its status", thread_ts=root)
    reply = page.channel()["messages"][0]["replies"][0]["ts"]
    # chat.getPermalink takes no JSON body, as Slack's: form-encoded, as slack_sdk sends it.
    answer = page.http.post(
        "/api/chat.getPermalink",
        data={"channel": CHANNEL, "message_ts": reply},
        headers={"Authorization": f"Bearer {TOKEN}"},
    ).json()
    assert answer["ok"], answer
    link = answer["permalink"]
    assert link.startswith(page.server.url) and page.http.get(link).status_code == 200
    gone = link.split("?")[0].replace(reply.replace(".", ""), "1000000000000001")
    assert page.http.get(gone).status_code == 404
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    with visitor.chromium_page(link) as browser:
        thread = browser.locator("#thread-messages .message-text")
        expect(thread).to_have_text(["the incident", "its status"], timeout=20_000)
