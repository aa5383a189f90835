"""Slack's `data_visualization` block as the emulator takes it: accepted exactly when it keeps the
rules of Slack's reference page (docs.slack.dev/reference/block-kit/blocks/data-visualization-block,
written out in `sandbox.slack_charts`), refused with `invalid_blocks` otherwise, at most two in a
message, and refused altogether by a workspace that does not take the block
(`SlackEmulator.chart_blocks = False`). The local page draws it as an SVG chart.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator
from sandbox.slack_limits import validate_blocks
from tests.support.slack import BOT_TOKEN, CHANNEL, USER, Slack, refusal

DELETE = object()  # in a case: the field is taken out


def line(*series: tuple[str, list[float]], categories: list[str] | None = None) -> dict[str, Any]:
    """A line chart block; each series' values go with the categories in order."""
    series = series or (("queued", [3, 9, 4]),)
    categories = categories or ["08:00", "08:05", "08:10"]
    return {
        "type": "data_visualization",
        "title": "Queue trend",
        "chart": {
            "type": "line",
            "series": [
                {
                    "name": name,
                    "data": [
                        {"label": c, "value": v} for c, v in zip(categories, values, strict=True)
                    ],
                }
                for name, values in series
            ],
            "axis_config": {"categories": categories, "x_label": "UTC", "y_label": "jobs"},
        },
    }


def pie(*segments: tuple[str, float]) -> dict[str, Any]:
    segments = segments or (("linux.2xlarge", 12), ("gpu", 3))
    return {
        "type": "data_visualization",
        "title": "Queued by runner type",
        "chart": {"type": "pie", "segments": [{"label": k, "value": v} for k, v in segments]},
    }


def changed(block: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """`block` with the field at `path` (a JSON pointer below the block) set, or taken out."""
    out = copy.deepcopy(block)
    *parents, last = path.strip("/").split("/")
    target: Any = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value
    return out


def with_type(block: dict[str, Any], kind: str) -> dict[str, Any]:
    return changed(block, "/chart/type", kind)


SIX_NAMES = [f"runner type {i:>8}" for i in range(6)]  # 20 characters each
TWENTY = [f"{i:0>20}" for i in range(20)]  # 20 categories of 20 characters
WIDEST = {
    **line(*((name, [float(i)] * 20) for i, name in enumerate(SIX_NAMES)), categories=TWENTY),
    "title": "t" * 50,
    "block_id": "b" * 255,
}
WIDEST["chart"]["axis_config"].update(x_label="x" * 50, y_label="y" * 50)

VALID = [
    pytest.param(line(), id="line"),
    pytest.param(with_type(line(), "bar"), id="bar"),
    pytest.param(with_type(line(), "area"), id="area"),
    pytest.param(line(("a", [0]), categories=["only"]), id="one category, a zero"),
    pytest.param(line(("a", [-2.5, 1e6, 0.125])), id="negative and fractional values"),
    pytest.param(WIDEST, id="every limit at its maximum"),
    pytest.param(with_type(WIDEST, "bar"), id="bar at every limit"),
    pytest.param(
        changed(
            line(), "/chart/series/0/data", list(reversed(line()["chart"]["series"][0]["data"]))
        ),
        id="points in another order than the categories",
    ),
    pytest.param(
        changed(line(), "/chart/axis_config", {"categories": ["08:00", "08:05", "08:10"]}),
        id="no axis titles",
    ),
    pytest.param(pie(), id="pie"),
    pytest.param(pie(("all", 0.01)), id="pie of one small segment"),
    pytest.param(pie(*((f"{i:0>20}", i + 1) for i in range(6))), id="pie of six"),
]

LINE, PIE = line(), pie()
SERIES = "/chart/series/0"
AXIS = "/chart/axis_config"
# (block, path, value) -> the JSON pointer (below /blocks/0) Slack's error names
INVALID = [
    pytest.param(LINE, "/title", DELETE, "", id="no title"),
    pytest.param(LINE, "/title", "t" * 51, "/title", id="title of 51"),
    pytest.param(LINE, "/title", "", "/title", id="empty title"),
    pytest.param(LINE, "/title", 7, "/title", id="title not a string"),
    pytest.param(LINE, "/block_id", "b" * 256, "/block_id", id="block_id of 256"),
    pytest.param(LINE, "/chart", DELETE, "", id="no chart"),
    pytest.param(LINE, "/chart", [], "/chart", id="chart not an object"),
    pytest.param(LINE, "/chart/type", DELETE, "/chart", id="no chart type"),
    pytest.param(LINE, "/chart/type", "scatter", "/chart/type", id="unknown chart type"),
    pytest.param(LINE, "/chart/type", "pie", "/chart", id="a line chart called pie"),
    pytest.param(PIE, "/chart/type", "line", "/chart", id="a pie called line"),
    # pie
    pytest.param(PIE, "/chart/segments", DELETE, "/chart", id="no segments"),
    pytest.param(PIE, "/chart/segments", [], "/chart/segments", id="no segment"),
    pytest.param(PIE, "/chart/segments", {"a": 1}, "/chart/segments", id="segments not an array"),
    pytest.param(
        PIE,
        "/chart/segments",
        [{"label": str(i), "value": 1} for i in range(7)],
        "/chart/segments",
        id="seven segments",
    ),
    pytest.param(PIE, "/chart/segments/0", "a", "/chart/segments/0", id="segment not an object"),
    pytest.param(
        PIE, "/chart/segments/0/label", "l" * 21, "/chart/segments/0/label", id="label of 21"
    ),
    pytest.param(
        PIE, "/chart/segments/0/label", DELETE, "/chart/segments/0", id="segment without label"
    ),
    pytest.param(
        PIE, "/chart/segments/0/value", DELETE, "/chart/segments/0", id="segment without value"
    ),
    pytest.param(PIE, "/chart/segments/0/value", 0, "/chart/segments/0/value", id="segment of 0"),
    pytest.param(
        PIE, "/chart/segments/0/value", -1, "/chart/segments/0/value", id="negative segment"
    ),
    pytest.param(
        PIE, "/chart/segments/0/value", "12", "/chart/segments/0/value", id="segment a string"
    ),
    pytest.param(
        PIE, "/chart/segments/0/value", True, "/chart/segments/0/value", id="segment a boolean"
    ),
    pytest.param(
        PIE,
        "/chart/segments/0/value",
        float("inf"),
        "/chart/segments/0/value",
        id="segment infinite",
    ),
    # series
    pytest.param(LINE, "/chart/series", DELETE, "/chart", id="no series"),
    pytest.param(LINE, "/chart/series", [], "/chart/series", id="empty series"),
    pytest.param(
        line(*((f"s{i}", [1, 2, 3]) for i in range(7))),
        "/title",
        "t",
        "/chart/series",
        id="seven series",
    ),
    pytest.param(LINE, f"{SERIES}/name", DELETE, SERIES, id="series without name"),
    pytest.param(LINE, f"{SERIES}/name", "n" * 21, f"{SERIES}/name", id="name of 21"),
    pytest.param(LINE, f"{SERIES}/name", 3, f"{SERIES}/name", id="name not a string"),
    pytest.param(
        line(("same", [1, 2, 3]), ("same", [3, 2, 1])),
        "/title",
        "t",
        "/chart/series/1/name",
        id="names repeated",
    ),
    pytest.param(LINE, f"{SERIES}/data", DELETE, SERIES, id="series without data"),
    pytest.param(LINE, f"{SERIES}/data", [], f"{SERIES}/data", id="series of no point"),
    pytest.param(
        line(("a", [1.0] * 21), categories=[str(i) for i in range(21)]),
        "/title",
        "t",
        f"{SERIES}/data",
        id="21 points",
    ),
    pytest.param(LINE, f"{SERIES}/data/0", 3, f"{SERIES}/data/0", id="point not an object"),
    pytest.param(
        LINE, f"{SERIES}/data/0/label", DELETE, f"{SERIES}/data/0", id="point without label"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", DELETE, f"{SERIES}/data/0", id="point without value"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", "3", f"{SERIES}/data/0/value", id="value a string"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", False, f"{SERIES}/data/0/value", id="value a boolean"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", [3], f"{SERIES}/data/0/value", id="value an array"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", float("nan"), f"{SERIES}/data/0/value", id="value NaN"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", float("-inf"), f"{SERIES}/data/0/value", id="value -inf"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/value", 10**400, f"{SERIES}/data/0/value", id="value past a double"
    ),
    # the axis, and the points against it
    pytest.param(LINE, AXIS, DELETE, "/chart", id="no axis_config"),
    pytest.param(LINE, AXIS, "x", AXIS, id="axis_config not an object"),
    pytest.param(LINE, f"{AXIS}/categories", DELETE, AXIS, id="no categories"),
    pytest.param(LINE, f"{AXIS}/categories", [], f"{AXIS}/categories", id="empty categories"),
    pytest.param(
        line(("a", [1.0] * 21), categories=[str(i) for i in range(21)]),
        "/title",
        "t",
        f"{AXIS}/categories",
        id="21 categories",
    ),
    pytest.param(
        LINE, f"{AXIS}/categories/0", "c" * 21, f"{AXIS}/categories/0", id="category of 21"
    ),
    pytest.param(
        LINE, f"{AXIS}/categories/0", 8, f"{AXIS}/categories/0", id="category not a string"
    ),
    pytest.param(
        LINE, f"{AXIS}/categories/2", "08:00", f"{AXIS}/categories", id="category repeated"
    ),
    pytest.param(LINE, f"{AXIS}/x_label", "x" * 51, f"{AXIS}/x_label", id="x_label of 51"),
    pytest.param(LINE, f"{AXIS}/y_label", "y" * 51, f"{AXIS}/y_label", id="y_label of 51"),
    pytest.param(
        LINE, f"{SERIES}/data/0/label", "09:00", f"{SERIES}/data", id="label not a category"
    ),
    pytest.param(
        LINE, f"{SERIES}/data/0/label", "08:05", f"{SERIES}/data", id="two values, one missing"
    ),
    pytest.param(
        LINE,
        f"{SERIES}/data",
        LINE["chart"]["series"][0]["data"][:2],
        f"{SERIES}/data",
        id="category missed",
    ),
]


def post(client: AsyncWebClient, *blocks: dict[str, Any]) -> Awaitable[Any]:
    return client.chat_postMessage(channel=CHANNEL, text="queue trend", blocks=list(blocks))


# -- one block ---------------------------------------------------------------------------------


@pytest.mark.parametrize("block", VALID)
async def test_a_block_within_slacks_rules_is_posted_as_sent(
    slack: Slack, client: AsyncWebClient, block: dict[str, Any]
) -> None:
    posted = await post(client, block)
    assert posted["message"]["blocks"] == [block]
    assert slack.emulator.channel_messages(CHANNEL)[0].blocks == [block]


@pytest.mark.parametrize(("block", "path", "value", "pointer"), INVALID)
async def test_a_block_outside_slacks_rules_is_invalid_blocks(
    slack: Slack,
    client: AsyncWebClient,
    block: dict[str, Any],
    path: str,
    value: object,
    pointer: str,
) -> None:
    answer = await refusal(post(client, changed(block, path, value)))
    messages = answer["response_metadata"]["messages"]
    assert answer["error"] == "invalid_blocks"
    assert any(m.endswith(f"[json-pointer:/blocks/0{pointer}]") for m in messages), answer
    assert all(m.startswith("[ERROR] ") for m in messages)
    assert answer["errors"] == [m.removeprefix("[ERROR] ") for m in messages]
    assert not slack.emulator.channel_messages(CHANNEL)


def test_each_error_names_its_field() -> None:
    errors = validate_blocks(
        [changed(changed(LINE, "/title", "t" * 51), f"{SERIES}/data/1/value", "9")]
    )
    assert errors == [
        "[ERROR] must be less than 51 characters [json-pointer:/blocks/0/title]",
        f"[ERROR] must be a number [json-pointer:/blocks/0{SERIES}/data/1/value]",
    ]


# -- per message -------------------------------------------------------------------------------


async def test_a_message_holds_at_most_two_charts(client: AsyncWebClient) -> None:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "*Status*"}}
    assert (await post(client, section, line(), pie(), section))["ok"]
    answer = await refusal(post(client, line(), section, pie(), line()))
    assert answer == {
        "ok": False,
        "error": "invalid_blocks",
        "errors": ["no more than 2 data_visualization blocks allowed [json-pointer:/blocks/3]"],
        "response_metadata": {
            "messages": [
                "[ERROR] no more than 2 data_visualization blocks allowed [json-pointer:/blocks/3]"
            ]
        },
    }
    ts = (await post(client, line()))["ts"]
    edit = client.chat_update(channel=CHANNEL, ts=ts, text="t", blocks=[line(), line(), pie()])
    assert (await refusal(edit))["error"] == "invalid_blocks"


# -- a workspace that refuses the block ---------------------------------------------------------

Send = Callable[[AsyncWebClient, list[dict[str, Any]]], Awaitable[Any]]


async def _post_message(client: AsyncWebClient, blocks: list[dict[str, Any]]) -> Any:
    return await client.chat_postMessage(channel=CHANNEL, text="trend", blocks=blocks)


async def _post_ephemeral(client: AsyncWebClient, blocks: list[dict[str, Any]]) -> Any:
    return await client.chat_postEphemeral(channel=CHANNEL, user=USER, text="trend", blocks=blocks)


async def _update(client: AsyncWebClient, blocks: list[dict[str, Any]]) -> Any:
    ts = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    return await client.chat_update(channel=CHANNEL, ts=ts, text="trend", blocks=blocks)


@pytest.mark.parametrize(
    "send",
    [_post_message, _post_ephemeral, _update],
    ids=["postMessage", "postEphemeral", "update"],
)
async def test_a_workspace_without_chart_blocks_refuses_any_message_with_one(
    slack: Slack, client: AsyncWebClient, send: Send
) -> None:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "*Status*"}}
    slack.emulator.chart_blocks = False
    answer = await refusal(send(client, [section, line()]))
    # As Slack refuses any type it does not know ("unsupported type: sections
    # [json-pointer:/blocks/0/type]", node-slack-sdk's WebClient tests).
    assert answer == {
        "ok": False,
        "error": "invalid_blocks",
        "errors": ["unsupported type: data_visualization [json-pointer:/blocks/1/type]"],
        "response_metadata": {
            "messages": [
                "[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"
            ]
        },
    }
    assert (await send(client, [section]))["ok"]  # the same message without the chart goes
    slack.emulator.chart_blocks = True  # switched back between calls, as history_tier is
    assert (await send(client, [section, line()]))["ok"]


async def test_reset_gives_the_next_test_a_workspace_that_takes_charts(
    slack: Slack, client: AsyncWebClient
) -> None:
    slack.emulator.chart_blocks = False
    slack.emulator.reset()
    assert slack.emulator.chart_blocks
    assert (await post(client, line()))["ok"]


async def test_a_workspace_can_be_made_without_chart_blocks() -> None:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), chart_blocks=False)
    with serve_in_thread(emulator.app) as running:
        client = AsyncWebClient(token=BOT_TOKEN, base_url=f"{running.url}/api/")
        assert (await refusal(post(client, pie())))["error"] == "invalid_blocks"
        emulator.reset()  # stays as it was made
        assert (await refusal(post(client, pie())))["error"] == "invalid_blocks"


# -- anything in place of a chart ---------------------------------------------------------------

CHART_KEYS = [
    "type",
    "segments",
    "series",
    "axis_config",
    "categories",
    "name",
    "data",
    "label",
    "value",
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=22)
    | st.sampled_from(["pie", "bar", "area", "line"]),
    lambda inner: (
        st.lists(inner, max_size=7)
        | st.dictionaries(st.sampled_from(CHART_KEYS) | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chart=JSON, title=st.none() | st.text(max_size=60) | st.integers())
def test_anything_in_place_of_a_chart_is_ok_or_invalid_blocks(
    slack: Slack, chart: object, title: object
) -> None:
    block = {"type": "data_visualization", "title": title, "chart": chart}
    # json.dumps writes NaN and Infinity as Python's json reads them: the emulator must cope.
    body = json.dumps({"channel": CHANNEL, "text": "t", "blocks": [block]})
    with httpx.Client(base_url=slack.api_url) as http:
        answer = http.post(
            "chat.postMessage",
            content=body,
            headers={"Authorization": f"Bearer {BOT_TOKEN}", "Content-Type": "application/json"},
        )
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["ok"] or data["error"] == "invalid_blocks", data
    assert data["ok"] == (validate_blocks([block]) == [])


@st.composite
def valid_series_charts(draw: st.DrawFn) -> dict[str, Any]:
    label = st.text(min_size=1, max_size=20)
    categories = draw(st.lists(label, min_size=1, max_size=20, unique=True))
    names = draw(st.lists(label, min_size=1, max_size=6, unique=True))
    number = st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False)
    series = []
    for name in names:
        points = [{"label": c, "value": draw(number)} for c in categories]
        series.append({"name": name, "data": draw(st.permutations(points))})
    kind = draw(st.sampled_from(["bar", "area", "line"]))
    axis = {"categories": categories}
    return {
        "type": "data_visualization",
        "title": draw(st.text(min_size=1, max_size=50)),
        "chart": {"type": kind, "series": series, "axis_config": axis},
    }


@settings(max_examples=200, deadline=None)
@given(block=valid_series_charts())
def test_every_chart_within_the_rules_is_valid(block: dict[str, Any]) -> None:
    assert validate_blocks([block]) == []


# -- on the local page ---------------------------------------------------------------------------


@pytest.fixture
def page_url() -> Iterator[str]:
    """An emulator of its own: the page's event stream is closed before its server stops."""
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,))
    with serve_in_thread(emulator.app) as running:
        yield running.url
        emulator.close()


def test_the_page_draws_each_series_and_each_slice(page_url: str) -> None:
    visitor = pytest.importorskip("sandbox.visitor")
    expect = pytest.importorskip("playwright.sync_api").expect
    if visitor.chromium_path() is None:
        pytest.skip("Debian's chromium is missing (apt install chromium)")
    hostile = "<img src=x onerror=alert(1)>"
    trend = line(("linux.2xlarge", [3, 9, 4]), ("gpu", [1, 1, 4]), (hostile[:20], [0, 2, 2]))
    trend["title"] = hostile
    runners = pie(("linux.2xlarge", 12), ("gpu", 3), ("arm", 2), ("mac", 1))
    for blocks in ([trend, runners], [with_type(trend, "bar"), with_type(trend, "area")]):
        answer = httpx.post(
            f"{page_url}/api/chat.postMessage",
            json={"channel": CHANNEL, "text": "trend", "blocks": blocks},
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        ).json()
        assert answer["ok"], answer
    started = time.monotonic()
    with visitor.chromium_page(page_url) as page:
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
    assert time.monotonic() - started < 20, "the page check is meant to stay cheap"
