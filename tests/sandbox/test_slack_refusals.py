"""What Slack's Web API refuses, and how the emulator must answer it: one table, a row per refusal.

Each row is a call (and what it needs first) and Slack's whole answer: HTTP 200 with `ok: false`
and the `error` of the method's error table (docs.slack.dev/reference/methods), plus what Slack
adds beside it (`response_metadata.messages` with json-pointers, `errors`, `needed` and
`provided`), or 429 with `Retry-After` (docs.slack.dev/apis/web-api/rate-limits). The source of
each shape is beside its rows. A refused call changes nothing in the workspace.

Where Slack documents a limit but not its words for it (the `data_visualization` block's rules,
written out in `sandbox.slack_charts`), a row names the field Slack's message points at.
What the emulator lets through is tested through the bot, or in test_slack_api.py where no test
of the bot reaches it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.slack_api import SlackEmulator
from sandbox.slack_limits import validate_blocks
from sandbox.slack_methods import METHODS, WEB_API
from tests.support.charts import DELETE, changed, line, pie
from tests.support.refusals import Answer, Holding, Like, assert_answered
from tests.support.slack import BOT_TOKEN, CHANNEL, Slack
from tests.support.slack_calls import arguments_for, send

OTHER = "C0OTHER"
OUTSIDE, ARCHIVED = "C0OUTSIDE", "C0ARCHIVED"
# Served outside METHODS: Socket Mode's connection (see test_socket_mode_refusals).
SOCKET_METHODS = {"apps.connections.open"}


def held(emulator: SlackEmulator) -> dict[str, Any]:
    """What the workspace holds (the calls made aside): what a refusal must leave as it was."""
    with emulator.reading() as ws:
        state = ws.snapshot()
    del state["calls"]
    return state


@dataclass
class Asker:
    """Asks the emulator a row's call, noting whether the last request changed the workspace."""

    slack: Slack
    client: AsyncWebClient
    unchanged: bool | None = None

    @property
    def emulator(self) -> SlackEmulator:
        return self.slack.emulator

    async def final(self, request: Awaitable[Answer]) -> Answer:
        before = held(self.emulator)
        answer = await request
        self.unchanged = held(self.emulator) == before
        return answer

    async def sdk(self, call: Callable[[AsyncWebClient], Awaitable[Any]]) -> Answer:
        """The call as the bot makes it, with slack_sdk's client."""
        return await self.final(_answered(call(self.client)))

    async def raw(self, path: str, *, token: str | None = BOT_TOKEN, **request: Any) -> Answer:
        """A request to `path` (under the emulator's URL; POST unless `method` says otherwise)
        built here, with the bot token unless `token` says otherwise."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers.update(request.pop("headers", {}))
        async with httpx.AsyncClient(base_url=self.slack.server.url) as http:
            answer = http.request(request.pop("method", "POST"), path, headers=headers, **request)
            return await self.final(_http(answer))

    def issue_trigger(self) -> str:
        """A trigger_id, as Slack gives one with a click of the page's person."""
        with self.emulator.workspace() as ws:
            return ws.ui.issue_trigger("U0ALICE")


async def _answered(call: Awaitable[Any]) -> Answer:
    try:
        response = await call
    except SlackApiError as exc:
        response = exc.response
    headers = {name.lower(): value for name, value in response.headers.items()}
    return Answer(response.status_code, dict(response.data), headers)


async def _http(request: Awaitable[httpx.Response]) -> Answer:
    return Answer.of(await request)


Ask = Callable[[Asker], Awaitable[Answer]]


def sdk(call: Callable[[AsyncWebClient], Awaitable[Any]]) -> Ask:
    return lambda asker: asker.sdk(call)


def raw(path: str, **request: Any) -> Ask:
    return lambda asker: asker.raw(path, **request)


@pytest.fixture
def asker(slack: Slack, client: AsyncWebClient) -> Iterator[Asker]:
    """The shared emulator, put back as it was after the row: its switches, channels, members."""
    emulator = slack.emulator
    switches = ("home_tab", "enforce_rate_limits", "history_tier", "history_interval_s")
    kept = {name: getattr(emulator, name) for name in switches}
    with emulator.reading() as ws:
        channels = set(ws.channels)
    yield Asker(slack, client)
    for name, value in kept.items():
        setattr(emulator, name, value)
    with emulator.workspace() as ws:
        for channel in set(ws.channels) - channels:
            del ws.channels[channel]
        ws.set_members(CHANNEL, None)
    emulator.reset()


# -- Slack's answers ---------------------------------------------------------------------------


def refused(error: str, **beside: Any) -> Answer:
    """A plain refusal: `ok` and `error` alone (chat.postMessage's and conversations.history's
    error tables; the answer slack-api-client's docs quote: {"ok": false, "error":
    "not_in_channel"}), and what some errors carry beside them."""
    return Answer(200, {"ok": False, "error": error, **beside})


def blocks_refused(*messages: str) -> Answer:
    """invalid_blocks: each message bare in `errors`, and with "[ERROR] " in
    `response_metadata.messages` (python-slack-sdk#1782 and #1797, bolt-python#1016)."""
    errors = [m.removeprefix("[ERROR] ") for m in messages]
    return refused("invalid_blocks", errors=errors, response_metadata={"messages": [*messages]})


def arguments_refused(*messages: str) -> Answer:
    """invalid_arguments: Slack's messages in `response_metadata` and no `errors` beside them."""
    return refused("invalid_arguments", response_metadata={"messages": [*messages]})


def missing(*fields: str) -> Answer:
    """A required argument left out: named, with no pointer (vluzrmos/laravel-slack-api#38;
    brekkylab/backlot#84 measured it live)."""
    return arguments_refused(*(f"[ERROR] missing required field: {name}" for name in fields))


# Slack's words are known for these only by their shape: the row says which argument.
SOME_ARGUMENT_REFUSED = Answer(200, Holding(ok=False, error="invalid_arguments"))


def rate_limited(retry_after: str | Like) -> Answer:
    """ "HTTP 429 Too Many Requests" with Retry-After in seconds; the body's error `ratelimited`
    (python-slack-sdk#805 reads it so)."""
    return Answer(429, {"ok": False, "error": "ratelimited"}, {"retry-after": retry_after})


class Naming:
    """Slack's messages for refused blocks, one of which points at `pointer`."""

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list) or not other:
            return False
        shaped = all(isinstance(m, str) and m.startswith("[ERROR] ") for m in other)
        return shaped and any(m.endswith(f"[json-pointer:{self.pointer}]") for m in other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Naming({self.pointer!r})"


def blocks_refused_at(pointer: str) -> Answer:
    return Answer(
        200,
        Holding(ok=False, error="invalid_blocks", response_metadata={"messages": Naming(pointer)}),
    )


# -- calls -------------------------------------------------------------------------------------

# Slack now refuses text past about 4,000 characters (seratch, slack_sdk's maintainer, in
# ChatGPT-in-Slack#102; chat.update refusing it: geppetto#37), not the 2018 changelog's 40,000.
MAX_TEXT = 4_000
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "*Status*"}}
INPUT = {
    "type": "input",
    "label": {"type": "plain_text", "text": "N"},
    "element": {"type": "plain_text_input", "action_id": "n"},
}


def modal(title: str = "Scale", **extra: Any) -> dict[str, Any]:
    title_text = {"type": "plain_text", "text": title}
    return {"type": "modal", "title": title_text, "blocks": [SECTION], **extra}


HOME = {"type": "home", "blocks": [SECTION]}


def post(*blocks: dict[str, Any]) -> Ask:
    return sdk(lambda c: c.chat_postMessage(channel=CHANNEL, text="status", blocks=list(blocks)))


async def root(asker: Asker, text: str = "root") -> str:
    return str((await asker.client.chat_postMessage(channel=CHANNEL, text=text))["ts"])


def channels(asker: Asker) -> None:
    asker.emulator.add_channel(OUTSIDE, member=False)
    asker.emulator.add_channel(ARCHIVED)
    asker.emulator.archive(ARCHIVED)


def in_channels(call: Callable[[AsyncWebClient], Awaitable[Any]]) -> Ask:
    async def ask(asker: Asker) -> Answer:
        channels(asker)
        return await asker.sdk(call)

    return ask


def text_at_the_limit(send_text: Callable[[AsyncWebClient, str, str], Awaitable[Any]]) -> Ask:
    """4,000 characters go; one more is msg_too_long."""

    async def ask(asker: Asker) -> Answer:
        ts = await root(asker)
        assert (await send_text(asker.client, "x" * MAX_TEXT, ts))["ok"]
        return await asker.sdk(lambda c: send_text(c, "x" * (MAX_TEXT + 1), ts))

    return ask


def with_metadata(method: str, metadata: Any) -> Ask:
    async def ask(asker: Asker) -> Answer:
        args: dict[str, Any] = {"channel": CHANNEL, "text": "x", "metadata": metadata}
        if method == "chat.update":
            args["ts"] = await root(asker)
        return await asker.sdk(lambda c: c.api_call(method, json=args))

    return ask


def ephemeral_outside(user: str) -> Ask:
    """Only Alice is in the channel; her ephemeral goes, `user`'s does not."""

    async def ask(asker: Asker) -> Answer:
        with asker.emulator.workspace() as ws:
            ws.set_members(CHANNEL, ["U0ALICE"])
        assert await asker.client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="a")
        return await asker.sdk(lambda c: c.chat_postEphemeral(channel=CHANNEL, user=user, text="b"))

    return ask


async def someone_elses_message(asker: Asker) -> Answer:
    ts = await root(asker, "mine")
    with asker.emulator.workspace() as ws:
        ws.find(CHANNEL, ts).user = "U0ALICE"  # as if Alice had written it
    return await asker.sdk(lambda c: c.chat_update(channel=CHANNEL, ts=ts, text="edited"))


async def edit_in_an_archived_channel(asker: Asker) -> Answer:
    # A channel of its own, posted in before it is archived: the session's emulator may already
    # hold ARCHIVED archived by another module's test.
    channel = "C0ARCHEDIT"
    asker.emulator.add_channel(channel)
    ts = (await asker.client.chat_postMessage(channel=channel, text="root"))["ts"]
    asker.emulator.archive(channel)
    return await asker.sdk(lambda c: c.chat_update(channel=channel, ts=ts, text="edited"))


async def stale_view_hash(asker: Asker) -> Answer:
    opened = (await asker.client.views_open(trigger_id="1.2.abc", view=modal()))["view"]
    await asker.client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Again"))
    return await asker.sdk(
        lambda c: c.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Late"))
    )


async def a_fourth_view(asker: Asker) -> Answer:
    """Slack's modal stack: views.open's view and at most two pushed on it."""
    await asker.client.views_open(trigger_id=asker.issue_trigger(), view=modal())
    for title in ("Second", "Third"):
        await asker.client.views_push(trigger_id=asker.issue_trigger(), view=modal(title))
    trigger = asker.issue_trigger()
    return await asker.sdk(lambda c: c.views_push(trigger_id=trigger, view=modal("Fourth")))


async def a_trigger_used_twice(asker: Asker) -> Answer:
    trigger = asker.issue_trigger()
    assert (await asker.client.views_open(trigger_id=trigger, view=modal()))["ok"]
    return await asker.sdk(lambda c: c.views_open(trigger_id=trigger, view=modal()))


async def a_trigger_past_three_seconds(asker: Asker) -> Answer:
    trigger = asker.issue_trigger()
    with asker.emulator.workspace() as ws:  # the click was 4 s ago
        user, at = ws.ui.triggers[trigger]
        ws.ui.triggers[trigger] = (user, at - 4)
    return await asker.sdk(lambda c: c.views_open(trigger_id=trigger, view=modal()))


async def an_external_id_taken(asker: Asker) -> Answer:
    await asker.client.views_open(trigger_id="1.2.abc", view=modal(external_id="e1"))
    return await asker.sdk(
        lambda c: c.views_open(trigger_id="1.2.def", view=modal(external_id="e1"))
    )


async def a_stale_home_hash(asker: Asker) -> Answer:
    stale = (await asker.client.views_publish(user_id="U0ALICE", view=HOME))["view"]["hash"]
    await asker.client.views_publish(user_id="U0ALICE", view=HOME)
    return await asker.sdk(lambda c: c.views_publish(user_id="U0ALICE", view=HOME, hash=stale))


async def no_home_tab(asker: Asker) -> Answer:
    asker.emulator.home_tab = False
    return await asker.sdk(lambda c: c.views_publish(user_id="U0ALICE", view=HOME))


async def a_file_never_uploaded(asker: Asker) -> Answer:
    reserved = await asker.client.files_getUploadURLExternal(filename="q.log", length=3)
    files = [{"id": reserved["file_id"], "title": "q"}]
    return await asker.sdk(
        lambda c: c.files_completeUploadExternal(files=files, channel_id=CHANNEL)
    )


def without_scopes(*taken: str, call: Callable[[AsyncWebClient], Awaitable[Any]]) -> Ask:
    async def ask(asker: Asker) -> Answer:
        asker.emulator.scopes = asker.emulator.scopes - set(taken)
        return await asker.sdk(call)

    return ask


def with_scopes(*granted: str, call: Callable[[AsyncWebClient], Awaitable[Any]]) -> Ask:
    async def ask(asker: Asker) -> Answer:
        asker.emulator.scopes = frozenset(granted)
        return await asker.sdk(call)

    return ask


def without_charts(send_blocks: Callable[[AsyncWebClient, list[Any]], Awaitable[Any]]) -> Ask:
    """A workspace that does not take the block refuses it as any type it does not know."""

    async def ask(asker: Asker) -> Answer:
        ts = await root(asker)
        asker.emulator.chart_blocks = False
        return await asker.sdk(lambda c: send_blocks(c, [SECTION, pie()], ts))

    return ask


# The application's rate limits, enforced (`enforce_rate_limits`) or always (a history tier).


async def a_fourth_post_in_a_second(asker: Asker) -> Answer:
    """chat.postMessage: "1 message per second per channel", short bursts allowed."""
    asker.emulator.enforce_rate_limits = True
    for i in range(3):
        await asker.client.chat_postMessage(channel=CHANNEL, text=f"burst {i}")
    return await asker.sdk(lambda c: c.chat_postMessage(channel=CHANNEL, text="one too many"))


async def edits_elsewhere_after_fifty_a_minute(asker: Asker) -> Answer:
    """chat.update is Tier 3, counted per method per app: edits in one channel use up
    another's; posts keep a bucket per channel."""
    asker.emulator.add_channel(OTHER)
    asker.emulator.enforce_rate_limits = True
    posted = [await root(asker, str(i)) for i in range(3)]
    other = (await asker.client.chat_postMessage(channel=OTHER, text="elsewhere"))["ts"]
    for n in range(5):
        await asker.client.chat_update(channel=CHANNEL, ts=posted[n % 3], text=f"edit {n}")
    return await asker.sdk(lambda c: c.chat_update(channel=OTHER, ts=other, text="edit"))


async def a_51st_history_call(asker: Asker) -> Answer:
    """An internal app reads history at Tier 3: about 50 calls a minute."""
    asker.emulator.enforce_rate_limits = True
    # Slack's minute stood in by an hour: fifty calls taking seconds on a loaded machine must
    # not refill a call (at 50 a minute one comes back every 1.2 s).
    asker.emulator.history_interval_s = 3600.0
    for _ in range(50):
        await asker.client.conversations_history(channel=CHANNEL)
    return await asker.sdk(lambda c: c.conversations_history(channel=CHANNEL))


async def a_sixth_home_in_a_burst(asker: Asker) -> Answer:
    """views.publish is Tier 4."""
    asker.emulator.enforce_rate_limits = True
    for _ in range(5):
        await asker.client.views_publish(user_id="U0ALICE", view=HOME)
    return await asker.sdk(lambda c: c.views_publish(user_id="U0ALICE", view=HOME))


def at_tier_1(
    read: Callable[[AsyncWebClient, str], Awaitable[Any]],
    *before: Callable[[AsyncWebClient, str], Awaitable[Any]],
    interval_s: float = 60.0,
) -> Ask:
    """Since 2025-05-29 a commercially distributed app outside the Marketplace reads
    conversations.history and .replies at Tier 1: a call a minute per method, app-wide, even
    where no other limit is enforced. The calls `before` go through; `read` waits."""

    async def ask(asker: Asker) -> Answer:
        asker.emulator.add_channel(OTHER)
        asker.emulator.history_tier, asker.emulator.history_interval_s = 1, interval_s
        ts = await root(asker)
        for call in before:
            assert (await call(asker.client, ts))["ok"]
        return await asker.sdk(lambda c: read(c, ts))

    return ask


def history(channel: str = CHANNEL) -> Callable[[AsyncWebClient, str], Awaitable[Any]]:
    return lambda c, ts: c.conversations_history(channel=channel)


def replies(c: AsyncWebClient, ts: str) -> Awaitable[Any]:
    return c.conversations_replies(channel=CHANNEL, ts=ts)


async def tier_1_after_calls_at_tier_3(asker: Asker) -> Answer:
    """Calls made at Tier 3 do not count against the Tier 1 minute that follows."""
    for _ in range(3):
        await asker.client.conversations_history(channel=CHANNEL)
    # Slack's minute, whatever an earlier test of the session left the emulator's at.
    asker.emulator.history_tier, asker.emulator.history_interval_s = 1, 60.0
    assert (await asker.client.conversations_history(channel=CHANNEL))["ok"]
    return await asker.sdk(lambda c: c.conversations_history(channel=CHANNEL))


# What a test queues (the emulator's faults) answers as Slack's own refusals do.


def queued(method: str, call: Callable[[AsyncWebClient], Awaitable[Any]], **fault: Any) -> Ask:
    async def ask(asker: Asker) -> Answer:
        asker.emulator.fail_next(method, **fault)
        return await asker.sdk(call)

    return ask


def queued_over_http(fault: dict[str, Any], path: str, **request: Any) -> Ask:
    """A fault queued through the control endpoint, as a test in another process queues it."""

    async def ask(asker: Asker) -> Answer:
        async with httpx.AsyncClient(base_url=asker.slack.server.url) as http:
            assert (await http.post("/_emulator/faults", json=fault)).json() == {"ok": True}
        return await asker.raw(path, **request)

    return ask


# -- Slack's method table: what each served method needs, and where it reads it ----------------

SERVED = sorted(METHODS)
UNSERVED = sorted(WEB_API.keys() - METHODS.keys() - SOCKET_METHODS)


def without(method: str, field: str) -> Ask:
    """The method sent as slack_sdk sends it, but for one required argument."""

    async def ask(asker: Asker) -> Answer:
        args = await arguments_for(method, asker.client)
        del args[field]
        return await asker.final(
            send(asker.client, method, args, WEB_API[method]["slack_sdk_sends"])
        )

    return ask


def as_json(method: str) -> Ask:
    """A JSON body reaches a method Slack reads no JSON for as no arguments at all."""

    async def ask(asker: Asker) -> Answer:
        args = await arguments_for(method, asker.client)
        return await asker.final(send(asker.client, method, args, "json"))

    return ask


async def each_unserved_method(asker: Asker) -> Answer:
    async def answers() -> Answer:
        headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
        async with httpx.AsyncClient(base_url=asker.slack.api_url, headers=headers) as http:
            bodies = {m: (await http.post(m, data={"channel": CHANNEL})).json() for m in UNSERVED}
        return Answer(200, bodies)

    return await asker.final(answers())


TABLE_ROWS: list[tuple[str, Ask, Answer]] = [
    *(
        (f"{m} without {name}", without(m, name), missing(name))
        for m in SERVED
        for name in WEB_API[m]["required"]
    ),
    *(
        (f"{m} as JSON", as_json(m), missing(*WEB_API[m]["required"]))
        for m in SERVED
        if not WEB_API[m]["json"] and WEB_API[m]["required"]
    ),
    (
        "every other method in Slack's table",
        each_unserved_method,
        Answer(200, {m: {"ok": False, "error": "unknown_method"} for m in UNSERVED}),
    ),
]


# -- data_visualization blocks (docs.slack.dev/reference/block-kit/blocks/data-visualization-block)

LINE, PIE = line(), pie()
SERIES, AXIS = "/chart/series/0", "/chart/axis_config"
TWENTY_ONE = line(("a", [1.0] * 21), categories=[str(i) for i in range(21)])
# A chart outside the rules: (the block, the field at a path set to a value, or DELETE), and
# the field Slack's message points at, below /blocks/0.
CHARTS = [
    (LINE, "/title", DELETE, "", "no title"),
    (LINE, "/title", "t" * 51, "/title", "title of 51"),
    (LINE, "/title", "", "/title", "empty title"),
    (LINE, "/title", 7, "/title", "title not a string"),
    (LINE, "/block_id", "b" * 256, "/block_id", "block_id of 256"),
    (LINE, "/chart", DELETE, "", "no chart"),
    (LINE, "/chart", [], "/chart", "chart not an object"),
    (LINE, "/chart/type", DELETE, "/chart", "no chart type"),
    (LINE, "/chart/type", "scatter", "/chart/type", "unknown chart type"),
    (LINE, "/chart/type", "pie", "/chart", "a line chart called pie"),
    (PIE, "/chart/type", "line", "/chart", "a pie called line"),
    (PIE, "/chart/segments", DELETE, "/chart", "no segments"),
    (PIE, "/chart/segments", [], "/chart/segments", "no segment"),
    (PIE, "/chart/segments", {"a": 1}, "/chart/segments", "segments not an array"),
    (PIE, "/chart/segments", [{"label": str(i), "value": 1} for i in range(7)],
     "/chart/segments", "seven segments"),
    (PIE, "/chart/segments/0", "a", "/chart/segments/0", "segment not an object"),
    (PIE, "/chart/segments/0/label", "l" * 21, "/chart/segments/0/label", "label of 21"),
    (PIE, "/chart/segments/0/label", DELETE, "/chart/segments/0", "segment without label"),
    (PIE, "/chart/segments/0/value", DELETE, "/chart/segments/0", "segment without value"),
    (PIE, "/chart/segments/0/value", 0, "/chart/segments/0/value", "segment of 0"),
    (PIE, "/chart/segments/0/value", -1, "/chart/segments/0/value", "negative segment"),
    (PIE, "/chart/segments/0/value", "12", "/chart/segments/0/value", "segment a string"),
    (PIE, "/chart/segments/0/value", True, "/chart/segments/0/value", "segment a boolean"),
    (PIE, "/chart/segments/0/value", float("inf"), "/chart/segments/0/value",
     "segment infinite"),
    (LINE, "/chart/series", DELETE, "/chart", "no series"),
    (LINE, "/chart/series", [], "/chart/series", "empty series"),
    (line(*((f"s{i}", [1, 2, 3]) for i in range(7))), "/title", "t", "/chart/series",
     "seven series"),
    (LINE, f"{SERIES}/name", DELETE, SERIES, "series without name"),
    (LINE, f"{SERIES}/name", "n" * 21, f"{SERIES}/name", "name of 21"),
    (LINE, f"{SERIES}/name", 3, f"{SERIES}/name", "name not a string"),
    (line(("same", [1, 2, 3]), ("same", [3, 2, 1])), "/title", "t", "/chart/series/1/name",
     "names repeated"),
    (LINE, f"{SERIES}/data", DELETE, SERIES, "series without data"),
    (LINE, f"{SERIES}/data", [], f"{SERIES}/data", "series of no point"),
    (TWENTY_ONE, "/title", "t", f"{SERIES}/data", "21 points"),
    (LINE, f"{SERIES}/data/0", 3, f"{SERIES}/data/0", "point not an object"),
    (LINE, f"{SERIES}/data/0/label", DELETE, f"{SERIES}/data/0", "point without label"),
    (LINE, f"{SERIES}/data/0/value", DELETE, f"{SERIES}/data/0", "point without value"),
    (LINE, f"{SERIES}/data/0/value", "3", f"{SERIES}/data/0/value", "value a string"),
    (LINE, f"{SERIES}/data/0/value", False, f"{SERIES}/data/0/value", "value a boolean"),
    (LINE, f"{SERIES}/data/0/value", [3], f"{SERIES}/data/0/value", "value an array"),
    (LINE, f"{SERIES}/data/0/value", float("nan"), f"{SERIES}/data/0/value", "value NaN"),
    (LINE, f"{SERIES}/data/0/value", float("-inf"), f"{SERIES}/data/0/value", "value -inf"),
    (LINE, f"{SERIES}/data/0/value", 10**400, f"{SERIES}/data/0/value", "value past a double"),
    (LINE, AXIS, DELETE, "/chart", "no axis_config"),
    (LINE, AXIS, "x", AXIS, "axis_config not an object"),
    (LINE, f"{AXIS}/categories", DELETE, AXIS, "no categories"),
    (LINE, f"{AXIS}/categories", [], f"{AXIS}/categories", "empty categories"),
    (TWENTY_ONE, "/title", "t", f"{AXIS}/categories", "21 categories"),
    (LINE, f"{AXIS}/categories/0", "c" * 21, f"{AXIS}/categories/0", "category of 21"),
    (LINE, f"{AXIS}/categories/0", 8, f"{AXIS}/categories/0", "category not a string"),
    (LINE, f"{AXIS}/categories/2", "08:00", f"{AXIS}/categories", "category repeated"),
    (LINE, f"{AXIS}/x_label", "x" * 51, f"{AXIS}/x_label", "x_label of 51"),
    (LINE, f"{AXIS}/y_label", "y" * 51, f"{AXIS}/y_label", "y_label of 51"),
    (LINE, f"{SERIES}/data/0/label", "09:00", f"{SERIES}/data", "label not a category"),
    (LINE, f"{SERIES}/data/0/label", "08:05", f"{SERIES}/data", "two values, one missing"),
    (LINE, f"{SERIES}/data", LINE["chart"]["series"][0]["data"][:2], f"{SERIES}/data",
     "category missed"),
]  # fmt: skip


def chart(block: dict[str, Any], path: str, value: object) -> Ask:
    return sdk(
        lambda c: c.chat_postMessage(
            channel=CHANNEL, text="trend", blocks=[changed(block, path, value)]
        )
    )


CHART_ROWS: list[tuple[str, Ask, Answer]] = [
    (name, chart(block, path, value), blocks_refused_at(f"/blocks/0{pointer}"))
    for block, path, value, pointer, name in CHARTS
]


async def three_charts_in_an_edit(asker: Asker) -> Answer:
    """Two charts go in a message; a third does not."""
    two = [line(), SECTION, pie()]
    ts = (await asker.client.chat_postMessage(channel=CHANNEL, text="t", blocks=two))["ts"]
    blocks = [line(), line(), pie()]
    return await asker.sdk(lambda c: c.chat_update(channel=CHANNEL, ts=ts, text="t", blocks=blocks))


def _post_message(c: AsyncWebClient, blocks: list[Any], ts: str) -> Awaitable[Any]:
    return c.chat_postMessage(channel=CHANNEL, text="trend", blocks=blocks)


def _post_ephemeral(c: AsyncWebClient, blocks: list[Any], ts: str) -> Awaitable[Any]:
    return c.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="trend", blocks=blocks)


def _update(c: AsyncWebClient, blocks: list[Any], ts: str) -> Awaitable[Any]:
    return c.chat_update(channel=CHANNEL, ts=ts, text="trend", blocks=blocks)


# -- the table ---------------------------------------------------------------------------------

UNSUPPORTED_CHART = "[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"
TOO_LONG = "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"
JSON_BODY = {"Content-Type": "application/json"}
MISTAKE = "invalid_arguments"  # the control endpoints' answer to a test's own mistake
BUTTONS = {
    "type": "actions",
    "elements": [
        {"type": "button", "action_id": "go", "text": {"type": "plain_text", "text": "Go"}},
        {"type": "button", "action_id": "stop", "text": {"type": "plain_text", "text": "s" * 76}},
    ],
}
BIG_HOME = {
    "type": "home",
    "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 2900}}] * 95,
}
METADATA = [
    {"event_payload": {"id": 7}},
    {"event_type": "incident"},
    {"event_type": "", "event_payload": {}},
    {"event_type": 7, "event_payload": {}},
    {"event_type": "incident", "event_payload": "id=7"},
    ["incident"],
    "{not json",
]
TEXT_SENDS = {
    "chat.postMessage": lambda c, text, ts: c.chat_postMessage(channel=CHANNEL, text=text),
    "chat.postEphemeral": lambda c, text, ts: c.chat_postEphemeral(
        channel=CHANNEL, user="U0BOB", text=text
    ),
    "chat.update": lambda c, text, ts: c.chat_update(channel=CHANNEL, ts=ts, text=text),
}
BLOCK_SENDS = {
    "chat.postMessage": _post_message,
    "chat.postEphemeral": _post_ephemeral,
    "chat.update": _update,
}
# Retry-After: the rest of Tier 1's minute, less the seconds a loaded machine took since the call
SOON = Like("4[0-9]|5[0-9]|60")
LATER = Like("[1-9][0-9]*")

ROWS: list[tuple[str, Ask, Answer]] = [
    # -- who calls
    ("a token Slack does not know", lambda a: a.sdk(
        lambda c: AsyncWebClient(token="xoxb-revoked", base_url=c.base_url).auth_test()),
     refused("invalid_auth")),
    ("no token", raw("/api/auth.test", token=None), refused("not_authed")),
    # Apps created after 2021-02-24 may not send a token in the query string (changelog
    # 2020-11), even beside a good Authorization header (slack-rs/slack-rs-api#107)...
    ("a token in the query string", raw("/api/auth.test", params={"token": BOT_TOKEN}),
     refused("invalid_auth")),
    # ...and a JSON body's is not read: JSON calls carry it in the header (changelog 2017-10).
    ("a token in a JSON body", raw("/api/auth.test", token=None, json={"token": BOT_TOKEN}),
     refused("not_authed")),
    # The scope the method needs and the token's (apache/superset#15904 quotes {'ok': False,
    # 'error': 'missing_scope', 'needed': 'chat:write:bot', 'provided': 'incoming-webhook,...'}).
    ("missing_scope", with_scopes("chat:write", "commands",
                                  call=lambda c: c.users_info(user="U0ALICE")),
     refused("missing_scope", needed="users:read", provided="chat:write,commands")),
    ("missing_scope: chat:write", without_scopes(
        "chat:write", call=lambda c: c.chat_postMessage(channel=CHANNEL, text="x")),
     refused("missing_scope", needed="chat:write", provided=Like(r"(?!.*chat:write)[a-z:,_]+"))),
    ("unknown_method", sdk(lambda c: c.api_call("chat.nonsense")), refused("unknown_method")),
    # -- bodies Slack cannot read
    ("a JSON body that is no object",
     raw("/api/chat.postMessage", content=b"[1, 2]", headers=JSON_BODY),
     refused("json_not_object")),
    ("a body that is no JSON",
     raw("/api/chat.postMessage", content=b"{not json", headers=JSON_BODY),
     refused("invalid_json")),
    ("a body without its type",
     raw("/api/chat.postMessage", content=b"channel=C0QUEUE"), refused("missing_post_type")),
    ("a body of a type Slack does not take",
     raw("/api/chat.postMessage", content=b"<x/>", headers={"Content-Type": "application/xml"}),
     refused("invalid_post_type")),
    ("a multipart form", raw("/api/chat.postMessage", files={"channel": (None, CHANNEL)}),
     refused("invalid_form_data")),
    # -- arguments: absent is invalid_arguments, empty is the lookup's own error (backlot#84);
    # the query string and a form body both count.
    *TABLE_ROWS,
    ("an empty channel", raw("/api/conversations.history", method="GET", params={"channel": ""}),
     refused("channel_not_found")),
    ("arguments from the query string and the form together",
     raw(f"/api/conversations.replies?channel={CHANNEL}", data={"ts": "1.000001"}),
     refused("thread_not_found")),
    ("a limit that is no number",
     sdk(lambda c: c.conversations_history(channel=CHANNEL, limit="ten")), SOME_ARGUMENT_REFUSED),
    ("invalid_cursor", sdk(lambda c: c.conversations_history(channel=CHANNEL, cursor="x")),
     refused("invalid_cursor")),
    ("invalid_ts_oldest", sdk(lambda c: c.conversations_history(channel=CHANNEL, oldest="soon")),
     refused("invalid_ts_oldest")),
    ("invalid_ts_latest", sdk(lambda c: c.conversations_history(channel=CHANNEL, latest="soon")),
     refused("invalid_ts_latest")),
    # -- channels, messages, users
    ("channel_not_found", sdk(lambda c: c.chat_postMessage(channel="C0NOWHERE", text="x")),
     refused("channel_not_found")),
    ("conversations.info: channel_not_found",
     sdk(lambda c: c.api_call("conversations.info", http_verb="GET", params={"channel": "C0NO"})),
     refused("channel_not_found")),
    ("chat.postMessage: not_in_channel",
     in_channels(lambda c: c.chat_postMessage(channel=OUTSIDE, text="x")),
     refused("not_in_channel")),
    ("conversations.history: not_in_channel",
     in_channels(lambda c: c.conversations_history(channel=OUTSIDE)), refused("not_in_channel")),
    ("conversations.replies: not_in_channel",
     in_channels(lambda c: c.conversations_replies(channel=OUTSIDE, ts="1.000001")),
     refused("not_in_channel")),
    ("chat.postMessage: is_archived",
     in_channels(lambda c: c.chat_postMessage(channel=ARCHIVED, text="x")), refused("is_archived")),
    ("chat.update: is_archived", edit_in_an_archived_channel, refused("is_archived")),
    ("thread_not_found", sdk(lambda c: c.conversations_replies(channel=CHANNEL, ts="1.000001")),
     refused("thread_not_found")),
    ("no_text", sdk(lambda c: c.api_call("chat.postMessage", json={"channel": CHANNEL})),
     refused("no_text")),
    *((f"{name}: msg_too_long", text_at_the_limit(send_text), refused("msg_too_long"))
      for name, send_text in TEXT_SENDS.items()),
    ("message_not_found", sdk(lambda c: c.chat_update(channel=CHANNEL, ts="1.000001", text="x")),
     refused("message_not_found")),
    ("cant_update_message", someone_elses_message, refused("cant_update_message")),
    # chat.postEphemeral's errors have no user_not_found: one not in the workspace is not in the
    # channel either.
    ("not a member", ephemeral_outside("U0BOB"), refused("user_not_in_channel")),
    ("not in the workspace", ephemeral_outside("U0NOBODY"), refused("user_not_in_channel")),
    ("user_not_found", sdk(lambda c: c.users_info(user="U0NOBODY")), refused("user_not_found")),
    ("no_such_subteam", sdk(lambda c: c.usergroups_users_list(usergroup="S0NOPE")),
     refused("no_such_subteam")),
    *((f"{method}: metadata {json.dumps(metadata)}", with_metadata(method, metadata),
       refused("invalid_metadata_format"))
      for method in ("chat.postMessage", "chat.update") for metadata in METADATA),
    # -- blocks: the fault first at its object when a schema fails, then at its field (a
    # chat.postMessage answer quoted whole at brainxx.org/blog/fixing-slack-api-error-message).
    ("section text too long",
     post(SECTION, {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}),
     blocks_refused(
         "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/1/text]",
         "[ERROR] must be less than 3001 characters [json-pointer:/blocks/1/text/text]")),
    ("header text too long",
     post(SECTION, {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}),
     blocks_refused_at("/blocks/1/text/text")),
    ("button label too long", post(SECTION, BUTTONS), blocks_refused(
        "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/1/elements/1/text]",
        "[ERROR] must be less than 76 characters [json-pointer:/blocks/1/elements/1/text/text]")),
    # More than 50 blocks, at the array (symfony's Notifier SlackTransportTest).
    ("too many blocks", post(*[{"type": "divider"}] * 51),
     blocks_refused("[ERROR] no more than 50 items allowed [json-pointer:/blocks]")),
    # A type Slack does not know, at its `type` (node-slack-sdk's WebClient tests).
    ("unknown block type", post(SECTION, {"type": "sections", "text": SECTION["text"]}),
     blocks_refused("[ERROR] unsupported type: sections [json-pointer:/blocks/1/type]")),
    # A missing field at the object that lacks it (raycharius/slack-block-builder#120 quotes
    # "missing required field: source [json-pointer:/blocks/0]").
    ("button without text",
     post(SECTION, {"type": "actions", "elements": [{"type": "button", "action_id": "go"}]}),
     blocks_refused("[ERROR] missing required field: text [json-pointer:/blocks/1/elements/0]")),
    ("blocks that are no array", sdk(lambda c: c.api_call("chat.postMessage", json={
        "channel": CHANNEL, "text": "x", "blocks": {"type": "divider"}})),
     refused("invalid_blocks_format")),
    # -- charts: each rule of the block's reference page, then the message's two at most
    *CHART_ROWS,
    ("each fault of a chart at its field",
     post(changed(changed(LINE, "/title", "t" * 51), f"{SERIES}/data/1/value", "9")),
     blocks_refused(
         "[ERROR] must be less than 51 characters [json-pointer:/blocks/0/title]",
         f"[ERROR] must be a number [json-pointer:/blocks/0{SERIES}/data/1/value]")),
    ("three charts in a message", post(line(), SECTION, pie(), line()), blocks_refused(
        "[ERROR] no more than 2 data_visualization blocks allowed [json-pointer:/blocks/3]")),
    ("three charts in an edit", three_charts_in_an_edit, blocks_refused(
        "[ERROR] no more than 2 data_visualization blocks allowed [json-pointer:/blocks/2]")),
    *((f"{name}: a chart where the workspace takes none", without_charts(send_blocks),
       blocks_refused(UNSUPPORTED_CHART)) for name, send_blocks in BLOCK_SENDS.items()),
    # -- views: the view first (it matches none of its schemas), then each fault at its field
    # (a views.open answer quoted by an app's notes: "[ERROR] failed to match all allowed
    # schemas [json-pointer:/view]", "[ERROR] must be less than 3001 characters
    # [json-pointer:/view/private_metadata]"). No `errors` beside them.
    ("view private_metadata too long",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view=modal(private_metadata="m" * 3001))),
     arguments_refused(
         "[ERROR] failed to match all allowed schemas [json-pointer:/view]",
         "[ERROR] must be less than 3001 characters [json-pointer:/view/private_metadata]")),
    ("view title too long",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view=modal("A title far longer than 24"))),
     arguments_refused(
         "[ERROR] failed to match all allowed schemas [json-pointer:/view]",
         "[ERROR] failed to match all allowed schemas [json-pointer:/view/title]",
         "[ERROR] must be less than 25 characters [json-pointer:/view/title/text]")),
    ("a modal without a title",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view={"type": "modal", "blocks": []})),
     arguments_refused("[ERROR] missing required field: title [json-pointer:/view]")),
    ("a view neither modal nor home",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view={**modal(), "type": "page"})),
     SOME_ARGUMENT_REFUSED),
    # An input in a modal without `submit` (node-slack-sdk#875 quotes the message).
    ("input without submit",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view={**modal(), "blocks": [INPUT]})),
     arguments_refused("[ERROR] must define `submit` to use `input` block "
                       "[json-pointer:/view/blocks/0/input]")),
    # Two blocks of one block_id in a view (slack-go/slack#725: Slack answered invalid_arguments).
    ("a view with two blocks of one block_id",
     sdk(lambda c: c.views_open(trigger_id="1.2.abc", view={
         **modal(), "blocks": [{**SECTION, "block_id": "b"}, {**SECTION, "block_id": "b"}]})),
     SOME_ARGUMENT_REFUSED),
    ("exchanged_trigger_id", a_trigger_used_twice, refused("exchanged_trigger_id")),
    ("expired_trigger_id", a_trigger_past_three_seconds, refused("expired_trigger_id")),
    ("push_limit_reached", a_fourth_view, refused("push_limit_reached")),
    ("duplicate_external_id", an_external_id_taken, refused("duplicate_external_id")),
    ("views.update: hash_conflict", stale_view_hash, refused("hash_conflict")),
    ("views.update: not_found", sdk(lambda c: c.views_update(view_id="V0NO", view=modal())),
     refused("not_found")),
    ("views.update: neither view_id nor external_id",
     sdk(lambda c: c.api_call("views.update", json={"view": modal()})), SOME_ARGUMENT_REFUSED),
    # views.publish's page: its own example of an error, "invalid `user_id`".
    ("views.publish: a user Slack does not know",
     sdk(lambda c: c.views_publish(user_id="U0NOBODY", view=HOME)),
     arguments_refused("invalid `user_id`")),
    ("views.publish: a modal", sdk(lambda c: c.views_publish(user_id="U0ALICE", view=modal())),
     arguments_refused("[ERROR] failed to match all allowed schemas [json-pointer:/view]",
                       "[ERROR] must be home [json-pointer:/view/type]")),
    ("views.publish: 101 blocks", sdk(lambda c: c.views_publish(
        user_id="U0ALICE", view={"type": "home", "blocks": [{"type": "divider"}] * 101})),
     arguments_refused("[ERROR] failed to match all allowed schemas [json-pointer:/view]",
                       "[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]")),
    ("views.publish: over 250 kB",
     sdk(lambda c: c.views_publish(user_id="U0ALICE", view=BIG_HOME)), refused("view_too_large")),
    ("views.publish: no Home tab", no_home_tab, refused("not_enabled")),
    ("views.publish: hash_conflict", a_stale_home_hash, refused("hash_conflict")),
    # -- files
    ("files.info: file_not_found", sdk(lambda c: c.files_info(file="F0NOWHERE")),
     refused("file_not_found")),
    ("files.completeUploadExternal: nothing uploaded", a_file_never_uploaded,
     refused("file_not_found")),
    ("files.completeUploadExternal: no files",
     sdk(lambda c: c.api_call("files.completeUploadExternal", json={"files": []})),
     missing("files")),
    ("files.getUploadURLExternal: a negative length", sdk(lambda c: c.api_call(
        "files.getUploadURLExternal", params={"filename": "q.log", "length": "-1"})),
     missing("length")),
    ("an upload to a file never reserved", raw("/_emulator/upload/F0NOWHERE", content=b"abc"),
     Answer(404, {"ok": False, "error": "file_not_found"})),
    # -- rate limits
    ("posts: one a second", a_fourth_post_in_a_second, rate_limited("1")),
    ("edits: Tier 3, app-wide", edits_elsewhere_after_fifty_a_minute, rate_limited(LATER)),
    ("history: Tier 3", a_51st_history_call, rate_limited(LATER)),
    ("views.publish: Tier 4", a_sixth_home_in_a_burst, rate_limited(LATER)),
    ("history: Tier 1, a call a minute", at_tier_1(history(), history()), rate_limited(SOON)),
    ("history: Tier 1, app-wide", at_tier_1(history(OTHER), history()), rate_limited(SOON)),
    ("replies: Tier 1, a minute of its own", at_tier_1(replies, history(), replies),
     rate_limited(SOON)),
    # What is left of 2.5 s, rounded up (a loaded machine's calls may be a second apart).
    ("history: Tier 1, Retry-After in whole seconds",
     at_tier_1(history(), history(), interval_s=2.5), rate_limited(Like("[1-3]"))),
    ("history: Tier 1 counts its own calls", tier_1_after_calls_at_tier_3, rate_limited(SOON)),
    # -- what a test queues, answered as Slack answers
    ("a queued 429", queued("chat.postMessage", lambda c: c.chat_postMessage(
        channel=CHANNEL, text="x"), status=429, retry_after=7), rate_limited("7")),
    ("a queued 503", queued("chat.postMessage", lambda c: c.chat_postMessage(
        channel=CHANNEL, text="x"), status=503), Answer(503, Holding(ok=False))),
    ("a queued invalid_blocks", queued("chat.postMessage", lambda c: c.chat_postMessage(
        channel=CHANNEL, text="s", blocks=[SECTION, pie()]),
        status=200, error="invalid_blocks", messages=[UNSUPPORTED_CHART]),
     blocks_refused(UNSUPPORTED_CHART)),
    ("a queued missing_scope", queued("conversations.history", lambda c: c.conversations_history(
        channel=CHANNEL), status=200, error="missing_scope"),
     refused("missing_scope", needed="channels:history",
             provided=Like(r"(?!.*channels:history)[a-z:,_]+"))),
    ("a 429 queued over HTTP", queued_over_http(
        {"method": "auth.test", "status": 429, "retry_after": 7}, "/api/auth.test"),
     rate_limited("7")),
    ("an invalid_blocks queued over HTTP", queued_over_http(
        {"method": "chat.postMessage", "status": 200, "error": "invalid_blocks",
         "messages": [TOO_LONG]}, "/api/chat.postMessage", json={"channel": CHANNEL, "text": "x"}),
     blocks_refused(TOO_LONG)),
    # A test's own mistake, refused by the control endpoints: Slack always says why it refuses
    # blocks or arguments, so such a fault needs its messages.
    *((f"a queued {error} without Slack's messages", raw("/_emulator/faults", token=None, json={
        "method": "chat.postMessage", "status": 200, "error": error}),
       Answer(400, {"ok": False, "error": MISTAKE, "detail": Like(".*messages.*")}))
      for error in ("invalid_blocks", "invalid_arguments")),
    ("a fault for no method", raw("/_emulator/faults", token=None, json={"status": 503}),
     Answer(400, {"ok": False, "error": MISTAKE, "detail": Like(".*method.*")})),
    ("a stall that is no object", raw("/_emulator/stalls", token=None, content=b"[1]"),
     Answer(400, {"ok": False, "error": MISTAKE, "detail": Like(".+")})),
]  # fmt: skip

# An entry of `response_metadata.messages` that names where Slack found the fault.
POINTED = re.compile(r"^\[ERROR\] .+ \[json-pointer:/\S*\]$")


@pytest.mark.parametrize(
    ("ask", "expected"), [pytest.param(ask, expected, id=name) for name, ask, expected in ROWS]
)
async def test_slack_refuses_it_so(asker: Asker, ask: Ask, expected: Answer) -> None:
    answer = await ask(asker)

    assert_answered(answer, expected)
    assert asker.unchanged, "a refused call changes nothing"
    body = answer.body if isinstance(answer.body, dict) else {}
    messages = body.get("response_metadata", {}).get("messages", [])
    for message in messages:
        assert "json-pointer" not in message or POINTED.match(message), message
    if "errors" in body:
        assert body["errors"] == [m.removeprefix("[ERROR] ") for m in messages]


# -- the same rules, at random ------------------------------------------------------------------

CHART_KEYS = ["type", "segments", "series", "axis_config", "categories", "name", "data", "label",
              "value"]  # fmt: skip
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
def test_anything_in_place_of_a_chart_is_taken_or_invalid_blocks(
    slack: Slack, chart: object, title: object
) -> None:
    """Never a crash: a chart is posted exactly when its rules hold, else refused as above."""
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
