"""The send path's stages, each alone and composed, with a fake gateway, queue and clock: what
Slack is asked, in which order, and what the channel's queue keeps, for each way a post can end.

No servers: the queue and Slack here are small in-memory stand-ins of the parts the stages use.
What a user sees end to end (a lost answer looked up, a 429 waited out) is in test_sender.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from bot.domain.message import Rendered
from bot.outbound.gateway import SlackError
from bot.outbound.kinds import Queued, Strays, postmortem_upload
from bot.outbound.outgoing import Ledger, Outgoing, ReplyPost
from bot.outbound.stages import (
    LOOKUP_MARGIN_S,
    Attempt,
    LookUp,
    LostLease,
    Mark,
    Pipeline,
    Prepare,
    Read,
    Send,
    StormGate,
    Strikes,
    Struck,
)
from bot.render.chart_block import BLOCK_TYPE
from bot.storage.incident_store import ThreadRef
from bot.storage.send_queue import HeadReply, InFlight
from bot.telemetry import Telemetry

CHANNEL = "C0STAGES"
TOKEN = "lease-token"
THREAD = ThreadRef(CHANNEL, "1700000000.000100")


class Clock:
    def __init__(self, at: float = 1_800_000_000.0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


@dataclass
class FakeQueue:
    """The channel's posts, marks and records, as the stages and the ledger use them."""

    members: list[str] = field(default_factory=list)
    marks: dict[str, InFlight] = field(default_factory=dict)
    holder: str = TOKEN
    replies_recorded: list[tuple[str, str, str, str]] = field(default_factory=list)
    dropped_threads: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    undeliverable_items: list[tuple[str, str, str]] = field(default_factory=list)

    async def next_post(self, channel: str) -> tuple[str | None, InFlight | None]:
        if not self.members:
            return None, None
        return self.members[0], self.marks.get(self.members[0])

    async def in_flight(self, channel: str, member: str) -> InFlight | None:
        return self.marks.get(member)

    async def begin(self, channel: str, lease_token: str, marker: InFlight) -> bool:
        if lease_token != self.holder:
            return False
        self.marks[marker.member] = marker
        return True

    async def end_attempt(self, channel: str, marker: InFlight) -> None:
        if self.marks.get(marker.member) == marker:
            del self.marks[marker.member]

    async def record_reply(
        self, channel: str, incident_id: str, item: str, *, bucket: str = "", status_ts: str = ""
    ) -> None:
        self.replies_recorded.append((incident_id, item, bucket, status_ts))
        self.marks.pop(f"replies:{incident_id}", None)
        self.members.remove(f"replies:{incident_id}")

    async def drop_thread(self, channel: str, incident_id: str) -> None:
        self.dropped_threads.append(incident_id)

    async def forget(self, channel: str, member: str) -> None:
        self.forgotten.append(member)
        self.members.remove(member)

    async def undeliverable(self, incident_id: str, item: str, error: str) -> None:
        self.undeliverable_items.append((incident_id, item, error))


@dataclass
class FakeSlack:
    """The gateway's calls the stages make, each answered from a script; every call is kept
    with what the queue's marks were as it was made."""

    queue: FakeQueue
    answers: list[str | SlackError] = field(default_factory=list)
    found: dict[str, Any] | SlackError | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]],
        *,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        self.calls.append(
            ("chat.postMessage", {"thread_ts": thread_ts, "marks": dict(self.queue.marks)})
        )
        answer = self.answers.pop(0) if self.answers else "1700000001.000200"
        if isinstance(answer, SlackError):
            raise answer
        return answer

    async def upload_file(self, channel: str, thread_ts: str, **file: Any) -> str:
        self.calls.append(("files.completeUploadExternal", {"thread_ts": thread_ts, **file}))
        answer = self.answers.pop(0) if self.answers else "F0FILE"
        if isinstance(answer, SlackError):
            raise answer
        return answer

    async def find(self, method: str, channel: str, landed: Any, **window: Any) -> Any:
        self.calls.append((method, window))
        if isinstance(self.found, SlackError):
            raise self.found
        return self.found if self.found is not None and landed(self.found) else None


@dataclass
class FakeSlot:
    events: list[str] = field(default_factory=list)

    async def post_slot(self) -> None:
        self.events.append("slot")

    def spend_post(self) -> None:
        self.events.append("spent")

    def encode(self) -> str:
        return "bucket-state"


@dataclass
class FakeCharts:
    refusals: list[str] = field(default_factory=list)

    async def refused(self, error: str) -> None:
        self.refusals.append(error)


@dataclass
class FakeReader:
    """A kind's reader: what each member stands for, or an error as it is read."""

    queue: FakeQueue
    outgoing: dict[str, Outgoing | None] = field(default_factory=dict)
    fails: bool = False
    dropped: list[str] = field(default_factory=list)

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        if self.fails:
            raise ValueError("an incident this release cannot read")
        return self.outgoing.get(queued.member)

    async def item(self, queued: Queued) -> str:
        return "event:1:7"

    async def unreadable(self, queued: Queued) -> None:
        self.dropped.append(queued.member)
        await self.queue.forget(CHANNEL, queued.member)


def reply(incident_id: str = "inc-1", item: str = "event:1:7", *, chart: bool = False) -> ReplyPost:
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]
    if chart:
        blocks.append({"type": BLOCK_TYPE})
    head = HeadReply(item, Rendered("hi", blocks), THREAD, uid=f"uid-{incident_id}")
    return ReplyPost(incident_id, head, THREAD)


@dataclass
class Rig:
    queue: FakeQueue
    slack: FakeSlack
    slot: FakeSlot
    charts: FakeCharts
    reader: FakeReader
    telemetry: Telemetry
    clock: Clock
    pipeline: Pipeline

    def lookups(self, outcome: str) -> float:
        return self.telemetry.slack_lookups.labels(outcome)._value.get()


def rig(*members: str, token: str = TOKEN) -> Rig:
    queue = FakeQueue(members=list(members))
    slack = FakeSlack(queue)
    slot, charts, telemetry, clock = FakeSlot(), FakeCharts(), Telemetry(), Clock()
    ledger = Ledger(CHANNEL, queue, None, telemetry)  # type: ignore[arg-type]
    reader = FakeReader(queue)
    read = Read({"replies": reader}, reader)
    stages = (
        read,
        LookUp(CHANNEL, slack, ledger, slot, telemetry),
        Prepare(),
        Mark(CHANNEL, queue, token, now=clock),
        Send(CHANNEL, slack, slot, queue, charts, ledger),  # type: ignore[arg-type]
    )
    pipeline = Pipeline(CHANNEL, slot, queue, stages, Strikes(CHANNEL, read, ledger))
    return Rig(queue, slack, slot, charts, reader, telemetry, clock, pipeline)


def posts(r: Rig) -> list[dict[str, Any]]:
    return [args for method, args in r.slack.calls if method == "chat.postMessage"]


async def test_with_nothing_waiting_nothing_is_asked_of_slack() -> None:
    r = rig()
    assert await r.pipeline.next() is False
    assert r.slack.calls == []
    assert r.slot.events == ["slot"]  # the pace comes first, even for nothing


async def test_a_reply_is_marked_in_flight_as_it_goes_out_and_recorded_after() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply()
    assert await r.pipeline.next() is True
    (post,) = posts(r)
    assert post["thread_ts"] == THREAD.ts
    # Marked before the call, with this attempt's time; the record clears it.
    assert post["marks"] == {"replies:inc-1": InFlight("replies:inc-1", "event:1:7", r.clock.at)}
    assert r.queue.replies_recorded == [("inc-1", "event:1:7", "bucket-state", "")]
    assert r.queue.marks == {}
    assert r.slot.events == ["slot", "spent"]


async def test_a_status_reply_is_recorded_as_the_one_a_quiet_status_edits() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply(item="status:3:9")
    r.slack.answers = ["1700000002.000300"]
    await r.pipeline.next()
    assert r.queue.replies_recorded == [
        ("inc-1", "status:3:9", "bucket-state", "1700000002.000300")
    ]


async def test_a_post_that_had_landed_is_recorded_not_posted_again() -> None:
    r = rig("replies:inc-1")
    earlier = InFlight("replies:inc-1", "event:1:7", 1_799_999_990.0)
    r.queue.marks["replies:inc-1"] = earlier
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.found = {
        "ts": "1700000001.000200",
        "metadata": {"event_payload": {"uid": "uid-inc-1", "item": "event:1:7"}},
    }
    await r.pipeline.next()
    assert posts(r) == []
    method, window = r.slack.calls[0]
    assert method == "conversations.replies"
    assert window == {
        "ts": THREAD.ts,
        "oldest": earlier.since - LOOKUP_MARGIN_S,
        "latest": earlier.since + LOOKUP_MARGIN_S,
    }
    assert r.queue.replies_recorded == [("inc-1", "event:1:7", "bucket-state", "")]
    assert r.lookups("found") == 1


async def test_a_post_not_found_by_its_lookup_is_posted() -> None:
    r = rig("replies:inc-1")
    r.queue.marks["replies:inc-1"] = InFlight("replies:inc-1", "event:1:7", 1_799_999_990.0)
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.found = {"ts": "1", "metadata": {"event_payload": {"uid": "other", "item": "x"}}}
    await r.pipeline.next()
    assert len(posts(r)) == 1
    assert r.lookups("not_found") == 1


async def test_a_lookup_refused_for_good_costs_a_possible_duplicate_not_the_post() -> None:
    r = rig("replies:inc-1")
    r.queue.marks["replies:inc-1"] = InFlight("replies:inc-1", "event:1:7", 1_799_999_990.0)
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.found = SlackError("conversations.replies", "missing_scope", retryable=False)
    await r.pipeline.next()
    assert len(posts(r)) == 1
    assert r.lookups("failed") == 1


async def test_a_lookup_that_fails_for_now_posts_nothing_and_keeps_the_mark() -> None:
    r = rig("replies:inc-1")
    earlier = InFlight("replies:inc-1", "event:1:7", 1_799_999_990.0)
    r.queue.marks["replies:inc-1"] = earlier
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.found = SlackError("conversations.replies", "ratelimited", retryable=True)
    with pytest.raises(SlackError):
        await r.pipeline.next()
    assert posts(r) == []
    assert r.queue.marks == {"replies:inc-1": earlier}


async def test_a_mark_left_by_another_item_of_the_thread_needs_no_lookup() -> None:
    r = rig("replies:inc-1")
    r.queue.marks["replies:inc-1"] = InFlight("replies:inc-1", "event:1:6", 1_799_999_990.0)
    r.reader.outgoing["replies:inc-1"] = reply()
    await r.pipeline.next()
    assert [method for method, _ in r.slack.calls] == ["chat.postMessage"]


async def test_a_429_clears_the_mark_so_the_next_attempt_posts_without_a_lookup() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.answers = [
        SlackError("chat.postMessage", "ratelimited", retryable=True, retry_after=3.0)
    ]
    with pytest.raises(SlackError):
        await r.pipeline.next()
    assert r.queue.marks == {}
    await r.pipeline.next()
    assert [method for method, _ in r.slack.calls] == ["chat.postMessage", "chat.postMessage"]
    assert r.queue.replies_recorded == [("inc-1", "event:1:7", "bucket-state", "")]


async def test_an_uncertain_failure_keeps_the_mark_and_the_next_attempt_looks_it_up() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.answers = [
        SlackError("chat.postMessage", "TimeoutError", retryable=True, uncertain=True)
    ]
    with pytest.raises(SlackError):
        await r.pipeline.next()
    assert set(r.queue.marks) == {"replies:inc-1"}
    r.clock.at += 30  # the next attempt's own time: the lookup reads the first attempt's
    r.slack.found = {
        "ts": "1700000001.000200",
        "metadata": {"event_payload": {"uid": "uid-inc-1", "item": "event:1:7"}},
    }
    await r.pipeline.next()
    assert [method for method, _ in r.slack.calls] == ["chat.postMessage", "conversations.replies"]
    assert r.slack.calls[1][1]["oldest"] == 1_800_000_000.0 - LOOKUP_MARGIN_S
    assert r.queue.replies_recorded == [("inc-1", "event:1:7", "bucket-state", "")]


async def test_a_permanent_refusal_drops_that_one_reply_with_a_record() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply()
    r.slack.answers = [SlackError("chat.postMessage", "msg_too_long", retryable=False)]
    await r.pipeline.next()
    assert r.queue.undeliverable_items == [("inc-1", "event:1:7", "msg_too_long")]
    assert [item for _, item, _, _ in r.queue.replies_recorded] == ["event:1:7"]
    assert r.telemetry.slack_undeliverable.labels("msg_too_long")._value.get() == 1


def invalid_blocks(detail: str) -> SlackError:
    """Slack's refusal of a message for one of its blocks, naming it in `detail`."""
    return SlackError("chat.postMessage", "invalid_blocks", retryable=False, details=(detail,))


async def test_a_chart_block_refused_sends_the_reply_again_without_dropping_it() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply(chart=True)
    r.slack.answers = [invalid_blocks("[ERROR] unsupported type [json-pointer:/blocks/1/type]")]
    await r.pipeline.next()
    assert r.charts.refusals == ["invalid_blocks"]
    assert r.queue.undeliverable_items == []
    assert r.queue.marks == {}
    assert r.queue.members == ["replies:inc-1"]  # still waiting: it goes again at once


async def test_another_block_refused_is_no_charts_refusal() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = reply(chart=True)
    r.slack.answers = [invalid_blocks("[ERROR] too long [json-pointer:/blocks/0/text]")]
    await r.pipeline.next()
    assert r.charts.refusals == []
    assert r.queue.undeliverable_items == [("inc-1", "event:1:7", "invalid_blocks")]


async def test_a_sender_that_lost_its_lease_posts_nothing() -> None:
    r = rig("replies:inc-1", token="a-token-that-expired")
    r.reader.outgoing["replies:inc-1"] = reply()
    with pytest.raises(LostLease):
        await r.pipeline.next()
    assert r.slack.calls == []
    assert r.slot.events == ["slot"]  # the slot is not spent either


async def test_a_member_with_nothing_left_to_post_ends_at_its_reader() -> None:
    r = rig("replies:inc-1")
    r.reader.outgoing["replies:inc-1"] = None
    assert await r.pipeline.next() is True
    assert r.slack.calls == []
    assert r.queue.marks == {}


async def test_an_item_that_fails_three_times_in_a_row_is_dropped_alone() -> None:
    r = rig("replies:inc-1", "replies:inc-2")
    bad = reply()

    async def broken() -> None:
        raise KeyError("a field this release does not know")

    bad.prepare = broken  # type: ignore[method-assign]
    r.reader.outgoing = {"replies:inc-1": bad, "replies:inc-2": reply("inc-2")}
    for _ in range(2):
        with pytest.raises(Struck):
            await r.pipeline.next()
        assert r.queue.undeliverable_items == []
        assert r.queue.marks == {}  # a failure before the mark leaves none
    with pytest.raises(Struck):
        await r.pipeline.next()
    assert r.queue.undeliverable_items == [("inc-1", "event:1:7", "unreadable")]
    await r.pipeline.next()  # the channel goes on with the next thread
    assert [item for inc, item, _, _ in r.queue.replies_recorded if inc == "inc-2"] == ["event:1:7"]
    assert len(posts(r)) == 1


async def test_a_member_that_cannot_be_read_leaves_the_queue_at_the_third_failure() -> None:
    r = rig("replies:inc-1")
    r.reader.fails = True
    for _ in range(3):
        with pytest.raises(Struck):
            await r.pipeline.next()
    assert r.reader.dropped == ["replies:inc-1"]
    assert r.queue.members == []
    assert r.slack.calls == []


async def test_a_success_between_failures_starts_the_count_again() -> None:
    r = rig("replies:inc-1")
    flaky = reply()
    failures = iter([True, True, False, True, True])
    drawn = asyncio.Event()

    async def sometimes() -> None:
        if next(failures):
            raise RuntimeError("a bug in drawing")
        drawn.set()

    flaky.prepare = sometimes  # type: ignore[method-assign]
    r.reader.outgoing["replies:inc-1"] = flaky

    async def record_again(*args: Any, **kwargs: Any) -> None:  # it stays waiting
        r.queue.marks.clear()

    r.queue.record_reply = record_again  # type: ignore[method-assign]
    for expected in (Struck, Struck, None, Struck, Struck):
        if expected is None:
            await r.pipeline.next()
        else:
            with pytest.raises(Struck):
                await r.pipeline.next()
    assert drawn.is_set()
    assert r.queue.undeliverable_items == []  # four failures, never three in a row


async def test_the_storm_gate_sends_the_digest_in_place_of_the_root_with_its_own_mark() -> None:
    queue = FakeQueue(members=["root:inc-9"])
    digest_mark = InFlight("storm:s1", "digest", 1.0)
    queue.marks["storm:s1"] = digest_mark

    @dataclass(frozen=True)
    class Digest:
        member: str = "storm:s1"

    class Gate:
        async def gate(self, queued: Queued) -> Any:
            return Digest() if queued.kind == "root" else None

    stage = StormGate(CHANNEL, Gate(), queue)
    carried = await stage.run(Attempt(Queued.of("root:inc-9")))
    assert carried == Attempt(Queued.of("root:inc-9"), digest_mark, Digest())  # type: ignore[arg-type]
    # A thread's replies are never folded into a storm.
    plain = await stage.run(Attempt(Queued.of("replies:inc-9")))
    assert plain == Attempt(Queued.of("replies:inc-9"))


def test_a_member_is_read_once_into_its_kind_and_key() -> None:
    assert Queued.of("warning:linux.2xlarge") == Queued(
        "warning:linux.2xlarge", "warning", "linux.2xlarge"
    )
    assert Queued.of("replies:a:b") == Queued("replies:a:b", "replies", "a:b")


async def test_a_member_of_a_kind_this_replica_does_not_send_leaves_the_queue() -> None:
    queue = FakeQueue(members=["warning:linux.2xlarge"])
    read = Read({}, Strays(CHANNEL, queue))  # type: ignore[arg-type]
    assert await read.run(Attempt(Queued.of("warning:linux.2xlarge"))) is None
    assert queue.forgotten == ["warning:linux.2xlarge"]


async def test_a_postmortem_is_shared_as_a_file_once_even_when_its_answer_was_lost() -> None:
    r = rig("replies:inc-1")
    head = HeadReply(
        "postmortem:1:12",
        Rendered("Postmortem of incident 1", []),
        THREAD,
        uid="uid-inc-1",
        extra={"markdown": "# Incident 1\n", "title": "Postmortem of incident 1"},
    )
    r.reader.outgoing["replies:inc-1"] = postmortem_upload("inc-1", head, THREAD)
    r.slack.answers = [
        SlackError("files.completeUploadExternal", "http_503", retryable=True, uncertain=True)
    ]
    with pytest.raises(SlackError):
        await r.pipeline.next()
    (method, upload), *_ = r.slack.calls
    assert method == "files.completeUploadExternal"
    assert upload["thread_ts"] == THREAD.ts
    assert upload["data"] == b"# Incident 1\n"
    assert upload["filename"] == "postmortem-inc-1-12.md"
    # It had landed: the thread shows the file by its name, so it is not shared again.
    r.slack.found = {"ts": "1700000003.000400", "files": [{"name": "postmortem-inc-1-12.md"}]}
    await r.pipeline.next()
    assert [m for m, _ in r.slack.calls] == [
        "files.completeUploadExternal",
        "conversations.replies",
    ]
    assert r.queue.replies_recorded == [("inc-1", "postmortem:1:12", "bucket-state", "")]
