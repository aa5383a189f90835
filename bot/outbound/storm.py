"""The storm digest's side of a channel's sender: open it, keep it current, end it. Groups that
join later get a line in an edit; `chat.update` is paced for the whole app (twenty channels
storming: an edit may be half a minute away), so a channel whose edit cannot come soon posts them
as a continuation instead."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from datetime import UTC, datetime
from functools import partial

from bot.domain.message import Rendered, digest_of
from bot.outbound.desk import Desk, Post, Upload
from bot.outbound.gateway import SlackError
from bot.render.digest import MAX_LINES, DigestEntry, render_digest
from bot.storage.storm_queue import Member, Storm

log = logging.getLogger(__name__)

EVERY_GROUP = 1_000_000  # the last message's room when no continuation can follow it
LINKS_PER_STEP = 10  # permalinks asked of Slack per step: each is a Web API call
POLL_S = 0.25
# Groups that joined after the digest was posted get their line in an edit of the last message
# while one may come within this of the first joining, else in a continuation: past the default
# edit interval (1.2 s) and the poll, so a lone storm keeps to one message.
GROW_PATIENCE_MS = 1500


def edit_within_s(waiting_ms: int, now_ms: int, *, roots_waiting: bool) -> float | None:
    """How long an edit adding the groups waiting since `waiting_ms` (0: none) may wait for its
    slot: None for as long as it takes (no post will list them); 0 when a continuation is due."""
    if not waiting_ms or not roots_waiting:
        return None
    return max(0.0, (waiting_ms + GROW_PATIENCE_MS - now_ms) / 1000)


def continuation_due(waiting_ms: int, now_ms: int) -> bool:
    return bool(waiting_ms) and now_ms - waiting_ms >= GROW_PATIENCE_MS


class StormDigest:
    def __init__(self, desk: Desk) -> None:
        self.channel = desk.channel
        self._desk = desk
        self._storms = desk.out.storms
        self._telemetry = desk.out.telemetry
        self._config = desk.out.config
        self._opened = asyncio.Event()
        # What each message was last drawn from: edited only when that changes (at most once per
        # ROOT_EDIT_INTERVAL_MS unless groups joined).
        self._drawn: dict[int, tuple[object, ...]] = {}
        self._groups_drawn: dict[int, int] = {}
        self._next_edit: dict[int, float] = {}

    @property
    def enabled(self) -> bool:
        return self._config.storm_digest_threshold > 0

    async def gate(self) -> Post | None:
        """Fold the roots waiting into the storm (opening one when enough wait): the digest, or a
        continuation due, to post before them."""
        if not self.enabled:
            return None
        is_open, opened, added = await self._storms.sweep(
            self.channel, threshold=self._config.storm_digest_threshold, now_ms=_now_ms()
        )
        if opened:
            log.warning(
                "sender %s: alert storm, %d new groups at once: a digest", self.channel, added
            )
            self._telemetry.storms.inc()
            self._opened.set()
        if added:
            self._telemetry.storm_groups.inc(added)
        if not is_open:  # most roots go out with no storm: nothing more to read
            return None
        storm = await self._storms.current(self.channel)
        if storm is None:
            return None
        part = storm.pending
        if part is None and continuation_due(storm.waiting_ms, _now_ms()):
            # Placed now, in this post's slot: a continuation begins only with groups to list.
            if not await self._storms.place(self.channel, storm, storm.parts, room=MAX_LINES):
                return None
            storm = await self._storms.current(self.channel) or storm
            part = storm.parts - 1
        if part is None:
            return None
        return self._post(storm, part)

    def _post(self, storm: Storm, part: int) -> Post:
        channel, storms = self.channel, self._storms

        async def draw() -> Rendered:  # after any lookup: the groups as they are by then
            return await self._render(storm, part, {}, over=False, room=MAX_LINES)

        async def record(ts: str, drawn: Rendered | Upload | None) -> None:
            # Found by a lookup, drawn earlier: recorded as showing nothing known, so edited.
            shown = digest_of(drawn) if isinstance(drawn, Rendered) else ""
            await storms.record_digest(channel, storm, ts, shown=shown, part=part)
            self._opened.set()

        async def refuse(error: str) -> None:
            # The roots go on alone; a later storm gets a digest of its own.
            log.error("sender %s: the storm digest can never be sent: %s", channel, error)
            self._telemetry.slack_undeliverable.labels(error).inc()
            pause_ms = int(self._config.storm_quiet_seconds * 1000)
            await storms.abandon(channel, storm, pause_ms=pause_ms)

        item, uid = storm.item(part), storm.metadata_uid(part)
        return Post(storm.member, item, "", uid, None, draw, record, refuse)

    async def step(self) -> None:
        """While a storm lasts: take in joining groups, link threads, edit each message when what
        it shows changed, and turn them into a summary at the end."""
        storm = await self._storms.current(self.channel)
        if storm is None or not storm.message_ts[0]:
            self._opened.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._opened.wait(), timeout=1.0)
            return
        now_ms = _now_ms()
        added = (await self._storms.sweep(self.channel, threshold=0, now_ms=now_ms))[2]
        if added:
            self._telemetry.storm_groups.inc(added)
            storm = await self._storms.current(self.channel) or storm
        # Waiting first: with no root waiting, the members read next all show their threads.
        waiting = await self._storms.roots_waiting(self.channel)
        members = await self._storms.members(self.channel)
        # Incident ID -> its thread's link where known ("": the root is gone).
        threads = {(self.channel, m.thread_ts): m.incident_id for m in members if m.threaded}
        found = await self._desk.out.slack.links(list(threads), ask_at_most=LINKS_PER_STEP)
        links = {threads[message]: url for message, url in found.items()}
        over = (
            waiting == 0
            and not any(m.part is None for m in members)
            and storm.pending is None
            and all(m.incident_id in links for m in members if m.threaded)
            and now_ms - storm.last_added_ms >= self._config.storm_quiet_seconds * 1000
        )
        for part in range(storm.parts):
            if storm.message_ts[part]:
                await self._upkeep(storm, part, members, links, over=over, waiting=waiting > 0)
        if over and await self._storms.close(self.channel, storm):
            log.info("sender %s: the alert storm is over (%d groups)", self.channel, len(members))
            self._drawn, self._groups_drawn, self._next_edit = {}, {}, {}
            return
        await asyncio.sleep(POLL_S)

    async def _upkeep(
        self,
        storm: Storm,
        part: int,
        members: list[Member],
        links: dict[str, str],
        *,
        over: bool,
        waiting: bool,
    ) -> None:
        """Edit message `part` if what it shows changed; the last one posted also takes in the
        groups without a line if its slot comes within GROW_PATIENCE_MS."""
        mine = [m for m in members if m.part == part]
        grows = part == storm.last_posted and any(m.part is None for m in members)
        within = (
            edit_within_s(storm.waiting_ms, _now_ms(), roots_waiting=waiting) if grows else None
        )
        drawn: tuple[object, ...] = (
            storm.id,
            tuple((m.incident_id, m.version, m.threaded) for m in mine),
            over,
            sum(m.incident_id in links for m in mine),
            len(members) if part == 0 else 0,  # the first message counts the whole storm
            grows,
            # Whether the edit may list every group left ("+N more"): only while no root waits.
            # A root leaving the queue must draw it again, or they would stay unlisted.
            within is None,
        )
        grew = grows or len(mine) > self._groups_drawn.get(part, 0)
        due = grew or over or time.time() >= self._next_edit.get(part, 0.0)
        if drawn == self._drawn.get(part) or not due:
            return
        if grows and within == 0 and len(mine) <= self._groups_drawn.get(part, 0):
            return  # a continuation lists them; this message has nothing else new to show
        try:
            await self._edit(storm, part, links, over=over, within_s=within)
        except SlackError as exc:
            if grows and exc.method == "chat.update" and exc.error == "ratelimited":
                return  # no edit slot soon enough: the channel's next post lists them instead
            raise
        self._drawn[part], self._groups_drawn[part] = drawn, len(mine)
        self._next_edit[part] = time.time() + self._config.root_edit_interval_ms / 1000

    async def _edit(
        self, storm: Storm, part: int, links: dict[str, str], *, over: bool, within_s: float | None
    ) -> None:
        # The last message places groups once the slot is had (one placed while waiting would stay
        # unseen); with no root waiting no continuation comes, so it takes every group left.
        room = 0
        if part == storm.last_posted:
            room = MAX_LINES if within_s is not None else EVERY_GROUP
        draw = partial(self._render, storm, part, links, over=over, room=room)
        # A digest that can never be edited (deleted) is let be: the threads carry on.
        digest, refused = await self._desk.update(storm.message_ts[part], draw, within_s=within_s)
        if refused is not None:
            self._desk.lost("the storm digest", refused.error)
        await self._storms.record_shown(self.channel, storm, digest_of(digest), part=part)

    async def _render(
        self, storm: Storm, part: int, links: dict[str, str], *, over: bool, room: int
    ) -> Rendered:
        """Message `part`, after placing up to `room` unlisted groups in it."""
        if room:
            await self._storms.place(self.channel, storm, part, room=room)
        members = await self._storms.members(self.channel)
        mine = [m for m in members if m.part == part]
        everyone = members if part == 0 else mine
        incidents = await self._desk.out.store.get_many([m.incident_id for m in everyone])
        by_id = {incident.id: incident for incident in incidents}
        entries = [
            DigestEntry(by_id[m.incident_id], m.threaded, links.get(m.incident_id, ""))
            for m in everyone
            if m.incident_id in by_id
        ]
        listed = {m.incident_id for m in mine}
        return render_digest(
            [e for e in entries if e.incident.id in listed],
            started=datetime.fromtimestamp(storm.started_ms / 1000, tz=UTC),
            now=self._desk.out.clock(),
            over=over,
            command=self._config.slash_command,
            part=part,
            storm_entries=entries,
        )


def _now_ms() -> int:
    return int(time.time() * 1000)
