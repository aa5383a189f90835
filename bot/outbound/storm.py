"""The storm digest's side of a channel's sender: open it, post it, keep it current, end it.

It borrows the channel sender's post budget and lookups (`SenderBudget`), so the digest is one
more post in the channel's pace and never a second writer; its state lives in Redis
(`bot.outbound.storm_queue`) and its message is a pure function of the storm's incidents
(`bot.render.digest`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.marks import digest_of, metadata
from bot.outbound.queue import InFlight, SendQueue
from bot.outbound.storm_queue import Member, Storm, StormQueue
from bot.render.digest import DigestEntry, render_digest
from bot.render.mrkdwn import Rendered
from bot.storage.incident_store import IncidentStore, ThreadRef
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")

# Permalinks for the digest's lines, per step: each is a Web API call.
LINKS_PER_STEP = 10


@dataclass(frozen=True)
class StormConfig:
    # This many new roots waiting at once make a storm: a digest lists them all (0: never).
    threshold: int = 5
    # A storm is over once no group has joined for this long and every group has its thread.
    quiet_s: float = 60.0
    # How often the digest's holder looks for groups joining and threads opening.
    poll_s: float = 0.25
    # Without new groups, the digest is edited at most this often (threads opening).
    edit_interval_s: float = 2.0
    command: str = "/queue"  # the slash command the digest points at for the full list


class SenderBudget(Protocol):
    """What the digest borrows from its channel's sender."""

    async def within_budget(
        self,
        member: str,
        item: str,
        incident_id: str,
        call: Callable[[], Awaitable[T]],
        *,
        refused: Callable[[SlackError], Awaitable[None]] | None = None,
    ) -> T | None: ...

    async def look_up(
        self, in_flight: InFlight, uid: str, *, thread: ThreadRef | None
    ) -> str | None: ...

    async def wait_for_update_slot(self) -> None: ...

    def bucket_state(self) -> str: ...


class StormDigest:
    def __init__(
        self,
        channel: str,
        budget: SenderBudget,
        *,
        storms: StormQueue,
        queue: SendQueue,
        store: IncidentStore,
        slack: SlackGateway,
        telemetry: Telemetry,
        config: StormConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self.channel = channel
        self._budget = budget
        self._storms = storms
        self._queue = queue
        self._store = store
        self._slack = slack
        self._telemetry = telemetry
        self._config = config
        self._clock = clock
        self._opened = asyncio.Event()
        # What the digest was last drawn from: it is edited only when that changes, at once
        # when groups joined, otherwise at most once per `edit_interval_s`.
        self._drawn: tuple[object, ...] = ()
        self._groups_drawn = 0
        self._next_edit = 0.0

    @property
    def enabled(self) -> bool:
        return self._config.threshold > 0

    async def before_root(self) -> Storm | None:
        """Fold the waiting roots into the storm (opening one when enough wait) before a root
        takes a slot: the digest, if there is one to post, goes first."""
        swept = await self._storms.sweep(
            self.channel, threshold=self._config.threshold, now_ms=int(time.time() * 1000)
        )
        if swept.opened:
            log.warning(
                "sender %s: alert storm, %d new groups at once: a digest", self.channel, swept.added
            )
            self._telemetry.storms.inc()
            self._opened.set()
        if swept.added:
            self._telemetry.storm_groups.inc(swept.added)
        # Most roots go out with no storm: then there is nothing more to read.
        return await self._storms.current(self.channel) if swept.open else None

    async def post(self, storm: Storm) -> None:
        """Post the digest in the channel's budget, looked up first if a post may have landed."""
        members = await self._storms.members(self.channel)
        digest = await self._render(storm, members, {}, over=False)
        in_flight = await self._queue.in_flight(self.channel, storm.member)
        if in_flight is not None:
            found = await self._budget.look_up(in_flight, storm.metadata_uid, thread=None)
            if found is not None:
                await self._storms.record_digest(self.channel, storm, found, bucket="", shown="")
                return

        async def refused(exc: SlackError) -> None:
            log.error("sender %s: Slack refused the storm digest: %s", self.channel, exc.error)
            self._telemetry.slack_undeliverable.labels(exc.error).inc()
            await self._storms.abandon(self.channel, storm)

        ts = await self._budget.within_budget(
            storm.member,
            storm.item,
            "",
            lambda: self._slack.post(
                self.channel,
                digest.text,
                digest.blocks,
                metadata=metadata("", storm.metadata_uid, storm.item),
            ),
            refused=refused,
        )
        if ts is not None:
            bucket = self._budget.bucket_state()
            await self._storms.record_digest(
                self.channel, storm, ts, bucket=bucket, shown=digest_of(digest)
            )
            self._opened.set()

    async def step(self) -> None:
        """While a storm lasts: take in the groups joining it, link the threads as they open,
        edit the digest when what it shows changed, and turn it into a summary at the end."""
        storm = await self._storms.current(self.channel)
        if storm is None or not storm.ts:
            self._opened.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._opened.wait(), timeout=1.0)
            return
        now_ms = int(time.time() * 1000)
        added = (await self._storms.sweep(self.channel, threshold=0, now_ms=now_ms)).added
        if added:
            self._telemetry.storm_groups.inc(added)
            storm = await self._storms.current(self.channel) or storm
        # Waiting first: a root leaves the queue as its thread is recorded, so with none
        # waiting, the members read next all show their threads.
        waiting = await self._storms.roots_waiting(self.channel)
        members = await self._storms.members(self.channel)
        links = await self._link_threads(members, await self._storms.links(self.channel))
        over = (
            waiting == 0
            and all(m.incident_id in links for m in members if m.threaded)
            and now_ms - storm.last_added_ms >= self._config.quiet_s * 1000
        )
        drawn = (storm.id, tuple((m.incident_id, m.version, m.threaded) for m in members), over)
        drawn += (len(links),)
        grew = len(members) > self._groups_drawn
        if drawn != self._drawn and (grew or over or time.time() >= self._next_edit):
            await self._edit(storm, members, links, over=over)
            self._drawn, self._groups_drawn = drawn, len(members)
            self._next_edit = time.time() + self._config.edit_interval_s
        if over and await self._storms.close(self.channel, storm):
            log.info("sender %s: the alert storm is over (%d groups)", self.channel, len(members))
            self._drawn, self._groups_drawn = (), 0
            return
        await asyncio.sleep(self._config.poll_s)

    async def _link_threads(self, members: list[Member], links: dict[str, str]) -> dict[str, str]:
        """Permalinks of the threads opened since the last step, a few per step."""
        missing = [m for m in members if m.threaded and m.incident_id not in links]
        for member in missing[:LINKS_PER_STEP]:
            try:
                url = await self._slack.permalink(self.channel, member.thread_ts) or ""
            except SlackError as exc:
                if exc.retryable:
                    break
                url = ""  # never linkable (the root is gone): the line says no more
            await self._storms.add_link(self.channel, member.incident_id, url)
            links[member.incident_id] = url
        return links

    async def _edit(
        self, storm: Storm, members: list[Member], links: dict[str, str], *, over: bool
    ) -> None:
        digest = await self._render(storm, members, links, over=over)
        shown = digest_of(digest)
        if shown == storm.shown:
            return
        await self._budget.wait_for_update_slot()
        try:
            await self._slack.update(self.channel, storm.ts, digest.text, digest.blocks)
        except SlackError as exc:
            if exc.retryable:
                raise
            # The digest was deleted: the threads carry on; a later storm gets a new digest.
            log.error("sender %s: cannot edit the storm digest: %s", self.channel, exc.error)
            self._telemetry.slack_undeliverable.labels(exc.error).inc()
        await self._storms.record_shown(self.channel, storm, shown)

    async def _render(
        self, storm: Storm, members: list[Member], links: dict[str, str], *, over: bool
    ) -> Rendered:
        incidents = await self._store.get_many([m.incident_id for m in members])
        by_id = {incident.id: incident for incident in incidents}
        entries = [
            DigestEntry(by_id[m.incident_id], m.threaded, links.get(m.incident_id, ""))
            for m in members
            if m.incident_id in by_id
        ]
        started = datetime.fromtimestamp(storm.started_ms / 1000, tz=UTC)
        return render_digest(
            entries, started=started, now=self._clock(), over=over, command=self._config.command
        )
