"""The kinds of message a channel's sender posts: a queue member `<kind>:<key>` is a `root`, the
thread's first waiting `replies`, a `warning` or a `notice`. `read` gives the member's `Post`, or
None when nothing is left to post; `drop` takes one Slack refuses for good off the queue. Every
post is found again by its metadata, a file by its name."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

from bot.domain.message import Rendered, digest_of
from bot.outbound.desk import Desk, Post, Upload, ready
from bot.outbound.gateway import INVITE, SlackError
from bot.render.chart import blames_charts, has_charts, incident_chart, render_chart, without_charts
from bot.render.early_warning import render_warning
from bot.render.replies import StatusShown, render_shown
from bot.storage.early_warning import REFUSED
from bot.storage.incident_store import CHART, POSTMORTEM, STATUS_KINDS, SUMMARY_EDIT
from bot.storage.send_queue import HeadReply, InFlight

log = logging.getLogger(__name__)

ROOT = "root"  # the kind that opens a thread: the one a storm folds into its digest
UNREADABLE = "unreadable"
METADATA_EVENT = "queuepilot_message"
# Slack's answers when the app is not in the channel, or cannot see it at all.
NOT_A_MEMBER = ("not_in_channel", "channel_not_found")


def metadata(post: Post) -> dict[str, Any]:
    payload = {"incident": post.incident_id, "uid": post.uid, "item": post.item}
    if post.group:
        payload["group"] = post.group
    return {"event_type": METADATA_EVENT, "event_payload": payload}


def landed(post: Post, message: dict[str, Any]) -> bool:
    if post.filename:
        files = message.get("files")
        return isinstance(files, list) and any(
            isinstance(f, dict) and f.get("name") == post.filename for f in files
        )
    payload = (message.get("metadata") or {}).get("event_payload") or {}
    return payload.get("uid") == post.uid and payload.get("item") == post.item


def chart_refused(refused: SlackError, rendered: Rendered) -> bool:
    return refused.error == "invalid_blocks" and blames_charts(rendered, refused.details)


async def read_root(desk: Desk, incident_id: str, earlier: InFlight | None) -> Post | None:
    out, channel = desk.out, desk.channel
    loaded = await out.store.load(incident_id)
    incident = loaded.incident
    if incident is None or loaded.thread is not None:
        await out.queue.forget(channel, f"root:{incident_id}")  # gone, or posted already
        return None

    async def draw() -> Rendered:
        return desk.root(incident, mentions=False)

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        # Found by a lookup, drawn from an earlier state: an edit checks it at once. Else only
        # an owner named in the post (mentioned in edits) makes an edit differ by itself.
        digest = digest_of(drawn) if isinstance(drawn, Rendered) else ""
        named = bool(incident.acknowledged.by or incident.resolved.by)
        differs = not digest or (named and digest != digest_of(desk.root(incident, mentions=True)))
        await out.queue.record_root(
            incident,
            ts,
            digest,
            version=loaded.version,
            edit_differs=differs,
            edit_after_ms=int(time.time() * 1000),  # a post is not an edit: one may follow at once
        )
        log.info("incident %s: opened thread %s in %s", incident.id, ts, channel)

    member = f"{ROOT}:{incident_id}"
    refuse = partial(drop, desk, member, ROOT)
    group = "" if incident.is_test else incident.group_hash  # a test is never found again
    return Post(member, ROOT, incident_id, incident.uid, None, draw, record, refuse, group=group)


async def read_reply(desk: Desk, incident_id: str, earlier: InFlight | None) -> Post | None:
    out, channel = desk.out, desk.channel
    head = await out.queue.head_reply(incident_id, in_flight=earlier.item if earlier else "")
    if head is None:
        await out.queue.forget(channel, f"replies:{incident_id}")
        return None
    if head.thread is None:
        # Its root was refused or expired: the root goes first, or the thread is dropped.
        await out.queue.ensure_root_queued(channel, incident_id)
        return None
    files = {CHART: "queue-trend", POSTMORTEM: "postmortem"}
    if head.kind in files:
        draw = await _file(desk, incident_id, head)
        if draw is None:
            await out.queue.record_reply(channel, incident_id, head.item)
            return None
        # Named uniquely, so a lookup finds it by its name.
        number = head.item.rsplit(":", 1)[-1]
        filename = f"{files[head.kind]}-{incident_id}-{number}.{draw[1]}"
        return _reply(desk, incident_id, head, draw[0], filename)
    if head.kind in STATUS_KINDS:
        # The tick only decided it: rendered as it goes out.
        incident = (await out.store.load(incident_id)).incident
        if incident is None:
            await out.queue.record_reply(channel, incident_id, head.item)
            return None
        shown = render_shown(incident, StatusShown.from_extra(head.extra), now=out.clock())
        head = replace(head, rendered=shown)
    if has_charts(head.rendered) and await out.charts.as_images():
        head = replace(head, rendered=without_charts(head.rendered))
    if head.kind == SUMMARY_EDIT and not head.edit_ts:
        # A summary whose message was never recorded (posted by a release that did not keep it):
        # a second summary would contradict the first, so the edit is dropped, and logged.
        log.info("incident %s: its summary was not recorded; an edit of it dropped", incident_id)
        await out.queue.record_reply(channel, incident_id, head.item)
        return None
    # An edit posted as a reply of its own that may have landed is looked up, not edited.
    posted_maybe = earlier is not None and earlier.item == head.item
    if head.edit_ts and not posted_maybe and await _edited(desk, incident_id, head):
        return None
    return _reply(desk, incident_id, head, ready(head.rendered))


async def _file(
    desk: Desk, incident_id: str, head: HeadReply
) -> tuple[Callable[[], Awaitable[Upload]], str] | None:
    """A file's `draw` and extension: the postmortem's Markdown, or the trend chart's PNG (none
    where charts go as blocks)."""
    if head.kind == POSTMORTEM:
        extra = head.extra or {}
        markdown = str(extra.get("markdown") or "").encode()
        title = str(extra.get("title") or head.rendered.text or "Postmortem")
        return ready(Upload(markdown, title)), "md"
    out = desk.out
    if not await out.charts.as_images():
        return None
    incident = (await out.store.load(incident_id)).incident
    chart = incident_chart(incident) if incident is not None else None
    if chart is None or not chart.series:
        return None

    async def draw() -> Upload:
        # Off the event loop: drawing a PNG takes a while.
        return Upload(await asyncio.to_thread(render_chart, chart), chart.title, chart.alt_text)

    return draw, "png"


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
        # A status reply is the one a quiet status later edits; a scale-up's, its outcome.
        posted = ts if head.ts_as else ""
        await out.queue.record_reply(channel, incident_id, head.item, ts=posted, ts_as=head.ts_as)

    member, thread_ts = f"replies:{incident_id}", head.thread.ts
    refuse = partial(drop, desk, member, head.item)
    return Post(member, head.item, incident_id, head.uid, thread_ts, draw, record, refuse, filename)


async def _edited(desk: Desk, incident_id: str, head: HeadReply) -> bool:
    """Edit the reply `head` edits (a quiet status, a scale-up's outcome); False (post it as a new
    reply) when that reply cannot be edited, or while Slack holds edits."""
    patience_s = 2 * desk.out.config.slack_update_interval_ms / 1000
    try:
        _, refused = await desk.update(head.edit_ts, ready(head.rendered), within_s=patience_s)
    except SlackError as exc:
        if exc.retry_after is None:
            raise
        return False
    if refused is not None and chart_refused(refused, head.rendered):
        await desk.out.charts.refused(refused.error)
        plain = replace(head, rendered=without_charts(head.rendered))
        return await _edited(desk, incident_id, plain)
    if refused is not None:
        log.info("incident %s: reply not editable (%s); posting", incident_id, refused.error)
        return False
    await desk.out.queue.record_reply(desk.channel, incident_id, head.item)
    return True


async def read_warning(desk: Desk, runner_type: str, earlier: InFlight | None) -> Post | None:
    warnings, member = desk.out.warnings, f"warning:{runner_type}"
    if warnings is None:  # early warnings are off here
        return await stray(desk, member)
    state = await warnings.get(runner_type)
    if state is None or state.ts or state.channel != desk.channel:
        await desk.out.queue.forget(desk.channel, member)  # gone, or posted
        return None

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        # Found by a lookup: recorded as showing no version, so an edit brings it up to date.
        await warnings.record_post(state if drawn is not None else replace(state, version=0), ts)

    async def refuse(error: str) -> None:
        # Recorded as never showable: not tried again every reading.
        await drop(desk, member, f"early warning for {runner_type}", error)
        await warnings.record_post(state, REFUSED)

    draw = ready(render_warning(state))
    return Post(state.member, "warning", "", state.uid, None, draw, record, refuse)


async def read_notice(desk: Desk, uid: str, earlier: InFlight | None) -> Post | None:
    notices = desk.out.notices
    rendered = await notices.get(uid)
    if rendered is None:
        await notices.done(desk.channel, uid)  # gone: nothing to post
        return None
    if has_charts(rendered) and await desk.out.charts.as_images():
        rendered = without_charts(rendered)

    async def record(ts: str, drawn: Rendered | Upload | None) -> None:
        await notices.done(desk.channel, uid)

    member = f"notice:{uid}"
    refuse = partial(drop, desk, member, "notice (the capacity report)")
    return Post(member, "notice", "", uid, None, ready(rendered), record, refuse)


KINDS = {ROOT: read_root, "replies": read_reply, "warning": read_warning, "notice": read_notice}


async def read(desk: Desk, member: str, earlier: InFlight | None) -> Post | None:
    kind, _, key = member.partition(":")
    if kind not in KINDS:
        return await stray(desk, member)
    return await KINDS[kind](desk, key, earlier)


async def drop(desk: Desk, member: str, item: str, error: str) -> None:
    """Slack refused `item` for good, or no read of it made sense: logged, on record, and off the
    queue (a root takes its thread with it, a thread loses only that reply)."""
    kind, _, key = member.partition(":")
    queue, channel = desk.out.queue, desk.channel
    incident_id = key if kind in (ROOT, "replies") else ""
    whose = f"incident {incident_id}" if incident_id else f"sender {channel}"
    if error in NOT_A_MEMBER:
        log.error(
            "%s: queuepilot cannot post in channel %s (%s): %s; %s dropped",
            whose,
            channel,
            error,
            INVITE,
            item,
        )
    else:
        log.error("%s: %s can never be sent (%s); dropped", whose, item, error)
    desk.out.telemetry.slack_undeliverable.labels(error).inc()
    await queue.undeliverable(incident_id, item, error)
    if kind == ROOT:
        await queue.drop_thread(channel, key)
    elif kind == "replies":
        await queue.record_reply(channel, key, item)
    elif kind == "notice":
        await desk.out.notices.done(channel, key)
    else:
        await queue.forget(channel, member)


async def unreadable(desk: Desk, member: str) -> None:
    """No read of `member` made sense (STRIKES times): dropped (of a thread, its head reply)."""
    kind, _, key = member.partition(":")
    item = await desk.out.queue.head_item(key) if kind == "replies" else member
    if kind in KINDS and item:
        await drop(desk, member, item, UNREADABLE)
    else:
        await desk.out.queue.forget(desk.channel, member)


async def stray(desk: Desk, member: str) -> None:
    """A kind this replica does not send (warnings off, a newer release's): dropped."""
    log.warning("sender %s: %s is no kind this replica sends; dropped", desk.channel, member)
    await desk.out.queue.forget(desk.channel, member)
