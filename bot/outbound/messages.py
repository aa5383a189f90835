"""The kinds of message a channel's sender posts, as data: what a queue member stands for.

A member of a channel's queue is `<kind>:<key>`, as the commit scripts and the warning and
notice stores queue it. `KINDS` maps each kind to two functions: `read` (what it stands for
now: one `Post`, or None when nothing is left to post, with that recorded) and `unreadable`
(how it leaves the queue when it fails every time it is read). The storm digest is the one
post no member names: `bot.outbound.storm` builds it in place of the roots it lists.

| kind      | posts                                               | found again by       |
|-----------|-----------------------------------------------------|----------------------|
| `root`    | the incident's root, rendered as it goes out        | its metadata         |
| `replies` | the thread's first waiting reply: an action's       | its metadata; a file |
|           | answer, an event, a status (or an edit of the last  | by its name          |
|           | one when quiet), the chart (a PNG drawn now), the   |                      |
|           | postmortem (a Markdown file)                        |                      |
| `warning` | an early warning, a channel message of its own      | its metadata         |
| `notice`  | a one-off channel message (the capacity report)     | its metadata         |
| (digest)  | a storm digest message (`bot.outbound.storm`)       | its metadata         |

A `Post` says what differs between them as fields: where it goes, what it carries, how to draw
it, how its result is recorded and what it means that Slack refuses it for good. Everything
else (pace, lookup, mark, call, classification) is the same for all, in `bot.outbound.send`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bot.domain.message import Rendered, digest_of
from bot.outbound.gateway import SlackError
from bot.render.chart import blames_charts, has_charts, incident_chart, render_chart, without_charts
from bot.render.early_warning import render_warning
from bot.render.replies import StatusShown, render_shown
from bot.render.root import render_root
from bot.storage.early_warning import REFUSED
from bot.storage.incident_store import CHART, POSTMORTEM, RESTATUS
from bot.storage.send_queue import HeadReply, InFlight

if TYPE_CHECKING:
    from bot.outbound.edits import Editor
    from bot.outbound.send import Outbound

log = logging.getLogger(__name__)

ROOT = "root"  # the kind that opens a thread: the one a storm folds into its digest
UNREADABLE = "unreadable"
METADATA_EVENT = "queuepilot_message"
# Slack's answers when the app is not in the channel, or cannot see it at all.
NOT_A_MEMBER = ("not_in_channel", "channel_not_found")


@dataclass(frozen=True)
class Upload:
    """A file shared into a thread (a chart's PNG, a postmortem's Markdown)."""

    data: bytes
    title: str
    alt: str = ""


@dataclass(frozen=True)
class Post:
    """One message a channel owes Slack, whatever its kind (see the module docstring)."""

    member: str  # its place in the in-flight marks: root:<id>, replies:<id>, storm:<id>, ...
    item: str  # what it is, as its mark and its metadata name it
    incident_id: str  # "" for a channel message that is no incident's
    uid: str  # what its metadata names it by, with `item`
    thread_ts: str | None  # the thread it goes to; None for the channel itself
    # Drawn after any lookup and before the mark, so what goes out is current and a failure
    # to draw spends nothing and leaves no mark.
    draw: Callable[[], Awaitable[Rendered | Upload]]
    # It is in the channel at `ts`: with what was drawn, or None when a lookup found it (then
    # it shows what an earlier attempt drew, which may since have changed).
    record: Callable[[str, Rendered | Upload | None], Awaitable[None]]
    # Slack refused it for good (or it failed three times): it is dropped, with a record.
    refuse: Callable[[str], Awaitable[None]]
    filename: str = ""  # a file's: files carry no metadata, a lookup finds them by name


@dataclass(frozen=True)
class Desk:
    """What reading a channel's members needs: the shared parts and the channel's editor."""

    out: Outbound
    channel: str
    editor: Editor


def metadata(post: Post) -> dict[str, Any]:
    """What a post carries, so it can be found again after an uncertain failure."""
    payload = {"incident": post.incident_id, "uid": post.uid, "item": post.item}
    return {"event_type": METADATA_EVENT, "event_payload": payload}


def landed(post: Post, message: dict[str, Any]) -> bool:
    """Whether `message`, read back from Slack, is this very post."""
    if post.filename:
        files = message.get("files")
        return isinstance(files, list) and any(
            isinstance(f, dict) and f.get("name") == post.filename for f in files
        )
    payload = (message.get("metadata") or {}).get("event_payload") or {}
    return payload.get("uid") == post.uid and payload.get("item") == post.item


def chart_refused(refused: SlackError, rendered: Rendered) -> bool:
    """Slack refused the message for its chart block (not for another of its blocks)."""
    return refused.error == "invalid_blocks" and blames_charts(rendered, refused.details)


async def undeliverable(desk: Desk, incident_id: str, item: str, error: str) -> None:
    """Slack refused something for good: logged so an operator can act, and kept on record."""
    whose = f"incident {incident_id}" if incident_id else f"sender {desk.channel}"
    if error in NOT_A_MEMBER:
        # A route (or SLACK_CHANNEL) names a channel the app cannot post to: say what fixes it.
        log.error(
            "%s: queuepilot cannot post in channel %s (%s): invite it there "
            "(/invite @queuepilot) or change SLACK_ROUTES / SLACK_CHANNEL; %s dropped",
            whose,
            desk.channel,
            error,
            item,
        )
    else:
        log.error("%s: %s can never be sent (%s); dropped", whose, item, error)
    desk.out.telemetry.slack_undeliverable.labels(error).inc()
    await desk.out.queue.undeliverable(incident_id, item, error)


# -- roots ------------------------------------------------------------------------------------


async def read_root(desk: Desk, incident_id: str, earlier: InFlight | None) -> Post | None:
    out, channel = desk.out, desk.channel
    loaded = await out.store.load(incident_id)
    incident = loaded.incident
    if incident is None or loaded.thread is not None:
        await out.queue.forget(channel, f"root:{incident_id}")  # gone, or posted already
        return None

    def render(*, mentions: bool) -> Rendered:
        # Rendered as it goes out (after any lookup, which may take minutes under a distributed
        # app's limits), so the post says the time it goes out; a change meanwhile is an edit.
        within = out.config.drain_target_minutes
        return render_root(incident, now=out.clock(), mentions=mentions, within_mins=within)

    async def draw() -> Rendered:
        return render(mentions=False)

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        if not isinstance(drawn, Rendered):
            # What landed was drawn by an earlier attempt, from a state that may since have
            # changed: the root is checked by an edit at once.
            digest, differs = "", True
        else:
            digest = digest_of(drawn)
            # Only an owner named in the post (mentioned in edits) makes an edit differ by itself.
            named = bool(incident.acknowledged_by or incident.resolved_by)
            differs = named and digest != digest_of(render(mentions=True))
        await out.queue.record_root(
            incident,
            ts,
            digest,
            version=loaded.version,
            edit_differs=differs,
            edit_after_ms=int(time.time() * 1000),  # a post is not an edit: one may follow at once
        )
        log.info("incident %s: opened thread %s in %s", incident.id, ts, channel)

    async def refuse(error: str) -> None:
        """A root that can never be posted takes its thread with it."""
        await undeliverable(desk, incident_id, ROOT, error)
        await out.queue.drop_thread(channel, incident_id)

    return Post(f"root:{incident_id}", ROOT, incident_id, incident.uid, None, draw, record, refuse)


async def root_unreadable(desk: Desk, incident_id: str) -> None:
    """A root never read takes its thread with it: its replies have nowhere to go."""
    await undeliverable(desk, incident_id, f"root:{incident_id}", UNREADABLE)
    await desk.out.queue.drop_thread(desk.channel, incident_id)


# -- a thread's replies -----------------------------------------------------------------------


async def read_reply(desk: Desk, incident_id: str, earlier: InFlight | None) -> Post | None:
    """The thread's first waiting reply, drawn as it goes out: a status from the incident now
    (or an edit of the last one when quiet), a chart from its trend now."""
    out, channel = desk.out, desk.channel
    head = await out.queue.head_reply(incident_id)
    if head is None:
        await out.queue.forget(channel, f"replies:{incident_id}")
        return None
    if head.thread is None:
        # Its root was refused or expired: the root goes first (band 0), or the thread is
        # dropped if the root can never be posted.
        await out.queue.ensure_root_queued(channel, incident_id)
        return None
    if head.is_status:
        rendered = await _status_now(desk, incident_id, head)
        if rendered is None:
            await out.queue.record_reply(channel, incident_id, head.item)
            return None
        head = replace(head, rendered=rendered)
    if head.kind == CHART:
        return await _chart(desk, incident_id, head)
    if head.kind == POSTMORTEM:
        return _postmortem(desk, incident_id, head)
    if has_charts(head.rendered) and await out.charts.as_images():
        head = replace(head, rendered=without_charts(head.rendered))
    # A quiet status whose post as a reply of its own may have landed is that reply now: it
    # is looked up, not made an edit as well.
    quiet = head.kind == RESTATUS and head.status_ts
    posted_maybe = earlier is not None and earlier.item == head.item
    if quiet and not posted_maybe and await _edited_status(desk, incident_id, head):
        return None
    drawn = head.rendered

    async def draw() -> Rendered:
        return drawn

    return _reply(desk, incident_id, head, draw)


def _reply(
    desk: Desk,
    incident_id: str,
    head: HeadReply,
    draw: Callable[[], Awaitable[Rendered | Upload]],
    filename: str = "",
) -> Post:
    out, channel = desk.out, desk.channel
    assert head.thread is not None, "a reply has its thread"

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        # A status reply is the one a quiet status later edits.
        status_ts = ts if head.is_status else ""
        await out.queue.record_reply(channel, incident_id, head.item, status_ts=status_ts)

    async def refuse(error: str) -> None:
        await undeliverable(desk, incident_id, head.item, error)
        await out.queue.record_reply(channel, incident_id, head.item)

    return Post(
        f"replies:{incident_id}",
        head.item,
        incident_id,
        head.uid,
        head.thread.ts,
        draw,
        record,
        refuse,
        filename,
    )


async def _chart(desk: Desk, incident_id: str, head: HeadReply) -> Post | None:
    """The trend chart as a picture, drawn at send time from the incident's trend now; not
    posted where charts go as blocks (the status or summary it came with carries one)."""
    out = desk.out
    chart = None
    if await out.charts.as_images():
        incident = (await out.store.load(incident_id)).incident
        chart = incident_chart(incident) if incident is not None else None
    if chart is None or not chart.series:
        await out.queue.record_reply(desk.channel, incident_id, head.item)
        return None

    async def draw() -> Upload:
        # Off the event loop: drawing a PNG takes a while.
        return Upload(await asyncio.to_thread(render_chart, chart), chart.title, chart.alt_text)

    filename = f"queue-trend-{incident_id}-{head.item.rsplit(':', 1)[-1]}.png"
    return _reply(desk, incident_id, head, draw, filename)


def _postmortem(desk: Desk, incident_id: str, head: HeadReply) -> Post:
    """A postmortem reply's file: Markdown, named uniquely per reply so a lookup after an
    uncertain upload finds it by its name."""
    extra = head.extra or {}
    markdown = str(extra.get("markdown") or "")
    title = str(extra.get("title") or head.rendered.text or "Postmortem")

    async def draw() -> Upload:
        return Upload(markdown.encode(), title)

    filename = f"postmortem-{incident_id}-{head.item.rsplit(':', 1)[-1]}.md"
    return _reply(desk, incident_id, head, draw, filename)


async def _status_now(desk: Desk, incident_id: str, head: HeadReply) -> Rendered | None:
    """A status reply's blocks, rendered now from the incident it was recorded on (the tick
    only decided it); None when the incident is gone, so there is nothing to show."""
    incident = (await desk.out.store.load(incident_id)).incident
    if incident is None:
        return None
    return render_shown(incident, StatusShown.from_extra(head.extra), now=desk.out.clock())


async def _edited_status(desk: Desk, incident_id: str, head: HeadReply) -> bool:
    """A quiet status edits the previous status reply, in an edit slot. It is posted as a new
    reply instead (False) when that reply can never be edited again (deleted, too old), and
    when Slack holds edits for a 429: this is the posts' path, and an edit's hold must not keep
    the channel's posts waiting (an edit slot is a moment away otherwise: a few intervals)."""
    patience_s = 2 * desk.out.config.slack_update_interval_ms / 1000
    try:
        refused = await desk.editor.update(head.status_ts, head.rendered, within_s=patience_s)
    except SlackError as exc:
        if exc.retry_after is None:
            raise
        return False
    if refused is not None and chart_refused(refused, head.rendered):
        await desk.out.charts.refused(refused.error)
        plain = replace(head, rendered=without_charts(head.rendered))
        return await _edited_status(desk, incident_id, plain)
    if refused is not None:
        log.info("incident %s: status reply not editable (%s); posting", incident_id, refused.error)
        return False
    await desk.out.queue.record_reply(desk.channel, incident_id, head.item)
    return True


async def reply_unreadable(desk: Desk, incident_id: str) -> None:
    """The reply that cannot be read is dropped alone: its thread goes on."""
    queue = desk.out.queue
    item = await queue.head_item(incident_id)
    if not item:
        await queue.forget(desk.channel, f"replies:{incident_id}")
        return
    await undeliverable(desk, incident_id, item, UNREADABLE)
    await queue.record_reply(desk.channel, incident_id, item)


# -- channel messages of no incident: early warnings, notices ---------------------------------


async def read_warning(desk: Desk, runner_type: str, earlier: InFlight | None) -> Post | None:
    """An early warning not posted yet; edited later by `bot.outbound.edits.WarningEdits`."""
    warnings, member = desk.out.warnings, f"warning:{runner_type}"
    if warnings is None:  # early warnings are off here
        return await stray(desk, member)
    state = await warnings.get(runner_type)
    if state is None or state.ts or state.channel != desk.channel:
        await warnings.forget_post(desk.channel, member)  # gone, or posted
        return None

    async def draw() -> Rendered:
        return render_warning(state)

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        # One found by a lookup shows what an earlier attempt drew: recorded as showing nothing
        # of this version, so the next step edits it to the current one.
        await warnings.record_post(state if drawn is not None else replace(state, version=0), ts)

    async def refuse(error: str) -> None:
        """Recorded as never showable: the same warning is not tried again every reading."""
        await undeliverable(desk, "", f"early warning for {runner_type}", error)
        await warnings.record_post(state, REFUSED)

    return Post(state.member, "warning", "", state.uid, None, draw, record, refuse)


async def warning_unreadable(desk: Desk, runner_type: str) -> None:
    member = f"warning:{runner_type}"
    await undeliverable(desk, "", member, UNREADABLE)
    if desk.out.warnings is None:
        await desk.out.queue.forget(desk.channel, member)
    else:
        await desk.out.warnings.forget_post(desk.channel, member)


async def read_notice(desk: Desk, uid: str, earlier: InFlight | None) -> Post | None:
    """A one-off channel message that is no incident's (`notice:<uid>`: the capacity report)."""
    notices = desk.out.notices
    rendered = await notices.get(uid)
    if rendered is None:
        await notices.done(desk.channel, uid)  # gone: nothing to post
        return None
    if has_charts(rendered) and await desk.out.charts.as_images():
        rendered = without_charts(rendered)
    drawn = rendered

    async def draw() -> Rendered:
        return drawn

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        await notices.done(desk.channel, uid)

    async def refuse(error: str) -> None:
        await undeliverable(desk, "", "notice (the capacity report)", error)
        await notices.done(desk.channel, uid)

    return Post(f"notice:{uid}", "notice", "", uid, None, draw, record, refuse)


async def notice_unreadable(desk: Desk, uid: str) -> None:
    await undeliverable(desk, "", f"notice:{uid}", UNREADABLE)
    await desk.out.notices.done(desk.channel, uid)


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    read: Callable[[Desk, str, InFlight | None], Awaitable[Post | None]]
    unreadable: Callable[[Desk, str], Awaitable[None]]


KINDS: dict[str, Kind] = {
    ROOT: Kind(read_root, root_unreadable),
    "replies": Kind(read_reply, reply_unreadable),
    "warning": Kind(read_warning, warning_unreadable),
    "notice": Kind(read_notice, notice_unreadable),
}


async def read(desk: Desk, member: str, earlier: InFlight | None) -> Post | None:
    """What queue member `member` stands for now (see `KINDS`)."""
    kind, _, key = member.partition(":")
    if kind not in KINDS:
        return await stray(desk, member)
    return await KINDS[kind].read(desk, key, earlier)


async def unreadable(desk: Desk, member: str) -> None:
    """`member` failed every time it was read: it leaves the queue, with a record."""
    kind, _, key = member.partition(":")
    if kind not in KINDS:
        await desk.out.queue.forget(desk.channel, member)
        return
    await KINDS[kind].unreadable(desk, key)


async def stray(desk: Desk, member: str) -> None:
    """A member of a kind this replica does not send (an early warning where they are off, a
    kind a newer release queued): it leaves the queue, as a gone one does."""
    log.warning("sender %s: %s is no kind this replica sends; dropped", desk.channel, member)
    await desk.out.queue.forget(desk.channel, member)
