"""What a member of a channel's send queue stands for: one reader per kind of member.

A member is `<kind>:<key>`, as the commit scripts and the warning and notice stores queue it:
`root:<incident>` (a root to post), `replies:<incident>` (a thread with replies waiting),
`warning:<runner type>` and `notice:<uid>`. It is read once into a `Queued` value; its kind picks
the reader, which is data the stages look up (`bot.outbound.stages`), not a prefix branched on.
A reader says what the member stands for now (`read`: one outgoing item, or None when nothing is
left to post, with that recorded), which item it would send (`item`, to count its failures by),
and how it leaves the queue when it cannot be read at all (`unreadable`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from bot.domain.message import Rendered
from bot.outbound.edits import Editor
from bot.outbound.gateway import SlackError
from bot.outbound.outgoing import (
    FileUpload,
    Ledger,
    NoticePost,
    Outgoing,
    ReplyPost,
    RootPost,
    WarningPost,
    chart_upload,
)
from bot.render.chart import ChartData, incident_chart
from bot.render.chart_block import blames_charts, has_charts, without_charts
from bot.render.replies import StatusShown, render_shown
from bot.storage.chart_delivery import ChartDelivery
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import CHART, POSTMORTEM, RESTATUS, IncidentStore, ThreadRef
from bot.storage.notices import NoticeStore
from bot.storage.send_queue import HeadReply, InFlight, SendQueue

log = logging.getLogger(__name__)

UNREADABLE = "unreadable"
# The kind of member that opens a thread: the one a storm folds into its digest.
ROOT = "root"


@dataclass(frozen=True)
class Queued:
    """A member of a channel's posts, read once: its kind and whose it is."""

    member: str
    kind: str
    key: str

    @classmethod
    def of(cls, member: str) -> Queued:
        kind, _, key = member.partition(":")
        return cls(member, kind, key)


class Reader(Protocol):
    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        """What `queued` stands for now; None when there is nothing to post (gone, posted
        already, or a quiet status that edited the last one), with that recorded."""
        ...

    async def item(self, queued: Queued) -> str:
        """The item it would send now: its failures are counted per item."""
        ...

    async def unreadable(self, queued: Queued) -> None:
        """It failed every time it was read: it leaves the queue, with a record."""
        ...


@dataclass(frozen=True)
class Roots:
    channel: str
    store: IncidentStore
    queue: SendQueue
    ledger: Ledger
    clock: Callable[[], datetime]
    within_mins: float

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        loaded = await self.store.load(queued.key)
        if loaded.incident is None or loaded.thread is not None:
            await self.queue.forget(self.channel, queued.member)  # gone, or posted already
            return None
        return RootPost(loaded.incident, loaded.version, self.clock, self.within_mins)

    async def item(self, queued: Queued) -> str:
        return ROOT

    async def unreadable(self, queued: Queued) -> None:
        """A root never read takes its thread with it: its replies have nowhere to go."""
        await self.ledger.undeliverable(queued.key, queued.member, UNREADABLE)
        await self.queue.drop_thread(self.channel, queued.key)


@dataclass(frozen=True)
class Replies:
    """A thread's first waiting reply: an action's answer, an event, a status (rendered now from
    the incident, or an edit of the last one when quiet), a chart (drawn now)."""

    channel: str
    store: IncidentStore
    queue: SendQueue
    ledger: Ledger
    charts: ChartDelivery
    editor: Editor
    clock: Callable[[], datetime]
    # How long a quiet status may wait for an edit slot before it is posted instead.
    edit_patience_s: float

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        incident_id = queued.key
        head = await self.queue.head_reply(incident_id)
        if head is None:
            await self.queue.forget(self.channel, queued.member)
            return None
        if head.thread is None:
            # Its root was refused or expired: the root goes first (band 0), or the thread is
            # dropped if the root can never be posted.
            await self.queue.ensure_root_queued(self.channel, incident_id)
            return None
        if head.is_status:
            rendered = await self._status_now(incident_id, head)
            if rendered is None:
                await self.queue.record_reply(self.channel, incident_id, head.item)
                return None
            head = replace(head, rendered=rendered)
        if head.kind == CHART:
            # Where charts go as blocks, the picture queued with a status or summary is not
            # posted; else it is drawn from the incident now.
            images = await self.charts.as_images()
            chart = await self._chart_now(incident_id) if images else None
            if chart is None or not chart.series:
                await self.queue.record_reply(self.channel, incident_id, head.item)
                return None
            return chart_upload(incident_id, head, head.thread, chart)
        if head.kind == POSTMORTEM:
            return postmortem_upload(incident_id, head, head.thread)
        if has_charts(head.rendered) and await self.charts.as_images():
            head = replace(head, rendered=without_charts(head.rendered))
        # A quiet status whose post as a reply of its own may have landed is that reply now: it
        # is looked up, not made an edit as well.
        quiet = head.kind == RESTATUS and head.status_ts
        posted_maybe = in_flight is not None and in_flight.item == head.item
        if quiet and not posted_maybe and await self._edited_status(incident_id, head):
            return None
        return ReplyPost(incident_id, head, head.thread)

    async def item(self, queued: Queued) -> str:
        return await self.queue.head_item(queued.key)

    async def unreadable(self, queued: Queued) -> None:
        """The reply that cannot be read is dropped alone: its thread goes on."""
        item = await self.item(queued)
        if not item:
            await self.queue.forget(self.channel, queued.member)
            return
        await self.ledger.undeliverable(queued.key, item, UNREADABLE)
        await self.queue.record_reply(self.channel, queued.key, item)

    async def _chart_now(self, incident_id: str) -> ChartData | None:
        """A picture's series: the incident's trend now; None when the incident is gone."""
        incident = (await self.store.load(incident_id)).incident
        return incident_chart(incident) if incident is not None else None

    async def _status_now(self, incident_id: str, head: HeadReply) -> Rendered | None:
        """A status reply's blocks, rendered now from the incident it was recorded on (the tick
        only decided it); None when the incident is gone, so there is nothing to show."""
        shown = StatusShown.from_extra(head.extra)
        incident = (await self.store.load(incident_id)).incident
        if incident is None:
            return None
        return render_shown(incident, shown, now=self.clock())

    async def _edited_status(self, incident_id: str, head: HeadReply) -> bool:
        """A quiet status edits the previous status reply, in an edit slot. It is posted as a
        new reply instead (False) when that reply can never be edited again (deleted, too old),
        and when Slack holds edits for a 429: this is the posts' path, and an edit's hold must
        not keep the channel's posts waiting."""
        try:
            refused = await self.editor.update(
                head.status_ts, head.rendered, within_s=self.edit_patience_s
            )
        except SlackError as exc:
            if exc.retry_after is None:
                raise
            return False
        if refused is not None and chart_refused(refused, head.rendered):
            await self.charts.refused(refused.error)
            return await self._edited_status(
                incident_id, replace(head, rendered=without_charts(head.rendered))
            )
        if refused is not None:
            log.info(
                "incident %s: status reply not editable (%s); posting", incident_id, refused.error
            )
            return False
        await self.queue.record_reply(self.channel, incident_id, head.item)
        return True


@dataclass(frozen=True)
class Warnings:
    """An early warning not posted yet (`warning:<runner type>`)."""

    channel: str
    warnings: WarningStore
    ledger: Ledger

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        state = await self.warnings.get(queued.key)
        if state is None or state.ts or state.channel != self.channel:
            await self.warnings.forget_post(self.channel, queued.member)  # gone, or posted
            return None
        return WarningPost(state, self.warnings)

    async def item(self, queued: Queued) -> str:
        return "warning"

    async def unreadable(self, queued: Queued) -> None:
        await self.ledger.undeliverable("", queued.member, UNREADABLE)
        await self.warnings.forget_post(self.channel, queued.member)


@dataclass(frozen=True)
class Notices:
    """A one-off channel message (`notice:<uid>`: the weekly capacity report)."""

    channel: str
    notices: NoticeStore
    charts: ChartDelivery
    ledger: Ledger

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        rendered = await self.notices.get(queued.key)
        if rendered is None:
            await self.notices.done(self.channel, queued.key)  # gone: nothing to post
            return None
        if has_charts(rendered) and await self.charts.as_images():
            rendered = without_charts(rendered)
        return NoticePost(queued.key, rendered, self.notices)

    async def item(self, queued: Queued) -> str:
        return "notice"

    async def unreadable(self, queued: Queued) -> None:
        await self.ledger.undeliverable("", queued.member, UNREADABLE)
        await self.notices.done(self.channel, queued.key)


@dataclass(frozen=True)
class Strays:
    """A member of a kind this replica does not send (an early warning where they are off, a
    kind a newer release queued): it leaves the queue, as a gone one does."""

    channel: str
    queue: SendQueue

    async def read(self, queued: Queued, in_flight: InFlight | None) -> Outgoing | None:
        log.warning(
            "sender %s: %s is no kind this replica sends; dropped", self.channel, queued.member
        )
        await self.queue.forget(self.channel, queued.member)
        return None

    async def item(self, queued: Queued) -> str:
        return queued.kind

    async def unreadable(self, queued: Queued) -> None:
        await self.queue.forget(self.channel, queued.member)


def postmortem_upload(incident_id: str, head: HeadReply, thread: ThreadRef) -> FileUpload:
    """A postmortem reply's file: Markdown, named for the incident and the reply."""
    extra = head.extra or {}
    # Unique per reply: a lookup after an uncertain upload finds the file by its name.
    filename = f"postmortem-{incident_id}-{head.item.rsplit(':', 1)[-1]}.md"
    markdown = str(extra.get("markdown") or "")
    title = str(extra.get("title") or head.rendered.text or "Postmortem")
    return FileUpload(incident_id, head, thread, filename, title, data=markdown.encode())


def chart_refused(refused: SlackError, rendered: Rendered) -> bool:
    """Slack refused the message for its chart block (not for another of its blocks)."""
    return refused.error == "invalid_blocks" and blames_charts(rendered, refused.details)
