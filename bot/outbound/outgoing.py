"""What a channel's sender posts: one outgoing item, of seven kinds.

Every post goes through the same stages (`bot.outbound.sender`): its slot, a lookup when its last
attempt may have landed, the in-flight mark, the call, the record. A kind says only what differs:
how a lookup recognises it among the channel's messages (`landed`), what it draws just before it
goes out (`prepare`), how it is sent (`send`), how its result is kept (`record`), and what it
means that it can never be sent (`refused`).
- `RootPost`: an incident's root message, which opens its thread; rendered as it goes out;
- `ReplyPost`: a reply in the thread (an action's answer, an event, a status);
- `ChartUpload`: the trend chart, a PNG drawn at send time and shared into the thread;
- `FileUpload`: a file shared into the thread (a postmortem's Markdown);
- `WarningPost`: an early warning, a channel message of its own before any incident;
- `NoticePost`: a one-off channel message, no incident's (the weekly capacity report);
- `DigestPost`: a storm digest message, listing the groups of an alert storm (the first, or a
  continuation for groups an edit could not add soon).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from bot.domain.early_warning import WarningState
from bot.domain.incidents import Incident
from bot.domain.message import Rendered
from bot.outbound.gateway import SlackGateway
from bot.outbound.marks import carries, digest_of, metadata
from bot.render.chart import ChartData, render_chart
from bot.render.early_warning import render_warning
from bot.render.root import render_root
from bot.storage.early_warning import REFUSED, WarningStore
from bot.storage.incident_store import ThreadRef
from bot.storage.notices import NoticeStore
from bot.storage.send_queue import HeadReply, SendQueue
from bot.storage.storm_queue import Storm, StormQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
# Slack's answers when the app is not in the channel, or cannot see it at all.
NOT_A_MEMBER = ("not_in_channel", "channel_not_found")


@dataclass(frozen=True)
class Ledger:
    """Where a channel's results are kept: its send queue, its storm, its counters."""

    channel: str
    queue: SendQueue
    storms: StormQueue
    telemetry: Telemetry

    async def undeliverable(self, incident_id: str, item: str, error: str) -> None:
        whose = f"incident {incident_id}" if incident_id else f"sender {self.channel}"
        if error in NOT_A_MEMBER:
            # A route (or SLACK_CHANNEL) names a channel the app cannot post to: say what fixes it.
            log.error(
                "%s: queuepilot cannot post in channel %s (%s): invite it there "
                "(/invite @queuepilot) or change SLACK_ROUTES / SLACK_CHANNEL; %s dropped",
                whose,
                self.channel,
                error,
                item,
            )
        else:
            log.error("%s: %s can never be sent (%s); dropped", whose, item, error)
        self.telemetry.slack_undeliverable.labels(error).inc()
        await self.queue.undeliverable(incident_id, item, error)


class Outgoing(ABC):
    """One post the channel owes Slack; see the module docstring."""

    member: str  # its place in the channel's queue: root:<id>, replies:<id>, storm:<id>
    item: str  # what it is, as its in-flight mark and its metadata name it
    incident_id: str
    uid: str  # what its metadata names it by, with `item`
    thread: ThreadRef | None  # the thread it goes to; None for the channel itself

    def carried(self) -> dict[str, Any]:
        """What the post carries, so a lookup can find it again after an uncertain failure."""
        return metadata(self.incident_id, self.uid, self.item)

    def landed(self, message: dict[str, Any]) -> bool:
        """Whether `message`, read back from Slack, is this very post."""
        return carries(message, self.uid, self.item)

    def shown(self) -> Rendered | None:
        """What it shows, where it may carry Slack's chart block (which a workspace may refuse);
        None for kinds that never do."""
        return None

    async def prepare(self) -> None:  # noqa: B027 - optional: most kinds come drawn
        """Draw what goes out, after any lookup and before the mark: a failure here spends
        nothing and leaves no mark behind."""

    @abstractmethod
    async def send(self, slack: SlackGateway, channel: str) -> str:
        """Make the call; the ts of what it posted."""

    @abstractmethod
    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        """It is in the channel at `ts`: posted now, or `found` by a lookup (then what it
        shows is what an earlier attempt drew, which may since have changed)."""

    async def refused(self, ledger: Ledger, error: str) -> None:
        """It can never be sent (Slack refused it for good): this one item is dropped, with a
        record."""
        await ledger.undeliverable(self.incident_id, self.item, error)
        await ledger.queue.record_reply(ledger.channel, self.incident_id, self.item)


@dataclass
class RootPost(Outgoing):
    incident: Incident
    version: int
    clock: Callable[[], datetime]
    within_mins: float  # the drain target of its advice (`DRAIN_TARGET_MINUTES`)
    # Rendered as the call is made (after any lookup, which may take minutes under a distributed
    # app's limits), so the post says the time it goes out; a change meanwhile becomes an edit.
    rendered: Rendered | None = field(default=None, init=False)

    item = "root"
    thread = None

    @property
    def member(self) -> str:  # type: ignore[override]
        return f"root:{self.incident.id}"

    @property
    def incident_id(self) -> str:  # type: ignore[override]
        return self.incident.id

    @property
    def uid(self) -> str:  # type: ignore[override]
        return self.incident.uid

    async def prepare(self) -> None:
        self.rendered = self._render(mentions=False)

    def _render(self, *, mentions: bool) -> Rendered:
        return render_root(
            self.incident, now=self.clock(), mentions=mentions, within_mins=self.within_mins
        )

    async def send(self, slack: SlackGateway, channel: str) -> str:
        assert self.rendered is not None, "prepared first"
        return await slack.post(
            channel,
            self.rendered.text,
            self.rendered.blocks,
            metadata=self.carried(),
        )

    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        incident = self.incident
        if found or self.rendered is None:
            # What landed was drawn by an earlier attempt, from a state that may since have
            # changed: the root is checked by an edit at once.
            digest, differs = "", True
        else:
            digest = digest_of(self.rendered)
            # Only an owner named in the post (mentioned in edits) makes an edit differ by itself.
            differs = bool(incident.acknowledged_by or incident.resolved_by) and digest != (
                digest_of(self._render(mentions=True))
            )
        await ledger.queue.record_root(
            incident,
            ts,
            digest,
            version=self.version,
            edit_differs=differs,
            # A post is not an edit: the first edit may follow at once.
            edit_after_ms=int(time.time() * 1000),
            bucket=bucket,
        )
        log.info("incident %s: opened thread %s in %s", incident.id, ts, ledger.channel)

    async def refused(self, ledger: Ledger, error: str) -> None:
        """A root that can never be posted takes its thread with it."""
        await ledger.undeliverable(self.incident_id, self.item, error)
        await ledger.queue.drop_thread(ledger.channel, self.incident_id)


@dataclass
class ReplyPost(Outgoing):
    incident_id: str
    head: HeadReply
    thread: ThreadRef  # type: ignore[misc]

    @property
    def member(self) -> str:  # type: ignore[override]
        return f"replies:{self.incident_id}"

    @property
    def item(self) -> str:  # type: ignore[override]
        return self.head.item

    @property
    def uid(self) -> str:  # type: ignore[override]
        return self.head.uid

    def shown(self) -> Rendered | None:
        return self.head.rendered

    async def send(self, slack: SlackGateway, channel: str) -> str:
        return await slack.post(
            channel,
            self.head.rendered.text,
            self.head.rendered.blocks,
            thread_ts=self.thread.ts,
            metadata=self.carried(),
        )

    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        # A status reply is the one a quiet status later edits.
        status_ts = ts if self.head.is_status else ""
        await ledger.queue.record_reply(
            ledger.channel, self.incident_id, self.item, bucket=bucket, status_ts=status_ts
        )


@dataclass
class FileUpload(ReplyPost):
    """A reply of its own kind: a file shared into the thread (a postmortem's Markdown), found
    again by its file name, not its metadata (files carry none)."""

    filename: str
    title: str
    data: bytes = b""
    alt: str = ""

    def landed(self, message: dict[str, Any]) -> bool:
        files = message.get("files")
        return isinstance(files, list) and any(
            isinstance(f, dict) and f.get("name") == self.filename for f in files
        )

    async def send(self, slack: SlackGateway, channel: str) -> str:
        await slack.upload_file(
            channel,
            self.thread.ts,
            data=self.data,
            filename=self.filename,
            title=self.title,
            alt=self.alt,
        )
        return ""  # a file share is not a message this bot keeps the ts of


@dataclass
class ChartUpload(FileUpload):
    """The trend chart: a PNG drawn at send time from the incident's trend now."""

    chart: ChartData | None = None

    async def prepare(self) -> None:
        # Drawn off the event loop, at send time, from the incident's trend now.
        assert self.chart is not None, "a chart to draw"
        self.data = await asyncio.to_thread(render_chart, self.chart)


def chart_upload(
    incident_id: str, head: HeadReply, thread: ThreadRef, chart: ChartData
) -> ChartUpload:
    """A chart reply's upload: its file name is how a lookup recognises it."""
    filename = f"queue-trend-{incident_id}-{head.item.rsplit(':', 1)[-1]}.png"
    return ChartUpload(
        incident_id, head, thread, filename, chart.title, alt=chart.alt_text, chart=chart
    )


@dataclass
class WarningPost(Outgoing):
    """An early warning: a channel message of its own, edited later by `WarningEdits`."""

    state: WarningState
    warnings: WarningStore
    rendered: Rendered | None = field(default=None, init=False)

    incident_id = ""
    thread = None
    item = "warning"

    @property
    def member(self) -> str:  # type: ignore[override]
        return self.state.member

    @property
    def uid(self) -> str:  # type: ignore[override]
        return self.state.uid

    async def prepare(self) -> None:
        self.rendered = render_warning(self.state)

    async def send(self, slack: SlackGateway, channel: str) -> str:
        assert self.rendered is not None, "prepared first"
        return await slack.post(
            channel, self.rendered.text, self.rendered.blocks, metadata=self.carried()
        )

    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        # One found by a lookup shows what an earlier attempt drew: recorded as showing
        # nothing of this version, so the next step edits it to the current one.
        shown = self.state if not found else replace(self.state, version=0)
        await self.warnings.record_post(shown, ts)

    async def refused(self, ledger: Ledger, error: str) -> None:
        """Recorded as never showable: the same warning is not tried again every reading."""
        await ledger.undeliverable("", f"early warning for {self.state.runner_type}", error)
        await self.warnings.record_post(self.state, REFUSED)


@dataclass
class NoticePost(Outgoing):
    """A one-off channel message that is no incident's (the weekly capacity report)."""

    notice_uid: str
    rendered: Rendered
    notices: NoticeStore

    incident_id = ""
    thread = None
    item = "notice"

    @property
    def member(self) -> str:  # type: ignore[override]
        return f"notice:{self.notice_uid}"

    @property
    def uid(self) -> str:  # type: ignore[override]
        return self.notice_uid

    def shown(self) -> Rendered | None:
        return self.rendered

    async def send(self, slack: SlackGateway, channel: str) -> str:
        return await slack.post(
            channel, self.rendered.text, self.rendered.blocks, metadata=self.carried()
        )

    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        await self.notices.done(ledger.channel, self.notice_uid)

    async def refused(self, ledger: Ledger, error: str) -> None:
        await ledger.undeliverable("", "notice (the capacity report)", error)
        await self.notices.done(ledger.channel, self.notice_uid)


@dataclass
class DigestPost(Outgoing):
    storm: Storm
    draw: Callable[[], Awaitable[Rendered]]  # the digest of the storm's groups as they are now
    opened: asyncio.Event  # wakes the digest's upkeep once it is posted
    pause_s: float  # how long no storm opens if this digest can never be sent
    part: int = 0  # which digest message: 0 the first, then its continuations
    rendered: Rendered | None = field(default=None, init=False)

    incident_id = ""
    thread = None

    @property
    def member(self) -> str:  # type: ignore[override]
        return self.storm.member

    @property
    def item(self) -> str:  # type: ignore[override]
        return self.storm.item(self.part)

    @property
    def uid(self) -> str:  # type: ignore[override]
        return self.storm.metadata_uid(self.part)

    async def prepare(self) -> None:
        self.rendered = await self.draw()

    async def send(self, slack: SlackGateway, channel: str) -> str:
        assert self.rendered is not None, "prepared first"
        return await slack.post(
            channel,
            self.rendered.text,
            self.rendered.blocks,
            metadata=self.carried(),
        )

    async def record(self, ledger: Ledger, ts: str, *, bucket: str, found: bool) -> None:
        # A digest found by a lookup shows what an earlier attempt drew (fewer groups, maybe):
        # recorded as showing nothing known, its next step edits it.
        shown = "" if found or self.rendered is None else digest_of(self.rendered)
        await ledger.storms.record_digest(
            ledger.channel, self.storm, ts, bucket=bucket, shown=shown, part=self.part
        )
        self.opened.set()

    async def refused(self, ledger: Ledger, error: str) -> None:
        """The roots go on alone; a later storm gets a digest of its own."""
        log.error("sender %s: the storm digest can never be sent: %s", ledger.channel, error)
        ledger.telemetry.slack_undeliverable.labels(error).inc()
        pause_ms = int(self.pause_s * 1000)
        await ledger.storms.abandon(ledger.channel, self.storm, pause_ms=pause_ms)
