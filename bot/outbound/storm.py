"""The storm digest's side of a channel's sender: open it, keep it current, end it.

The digest is posted like any other post (`gate` hands the sender a `DigestPost` for its one
path, before the roots waiting), and edited through the channel's `Editor`, so it is one more
message in the channel's pace and never a second writer. Its state lives in Redis
(`bot.outbound.storm_queue`) and its message is a pure function of the storm's incidents
(`bot.render.digest`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.domain.message import Rendered
from bot.outbound.edits import Editor
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.marks import digest_of
from bot.outbound.outgoing import DigestPost
from bot.outbound.storm_queue import Member, Storm, StormQueue
from bot.render.digest import DigestEntry, render_digest
from bot.storage.incident_store import IncidentStore
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

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


class StormDigest:
    def __init__(
        self,
        channel: str,
        editor: Editor,
        *,
        storms: StormQueue,
        store: IncidentStore,
        slack: SlackGateway,
        telemetry: Telemetry,
        config: StormConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self.channel = channel
        self._editor = editor
        self._storms = storms
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

    async def gate(self, member: str) -> DigestPost | None:
        """Before a root takes its slot, fold the roots waiting into the storm (opening one when
        enough wait): the digest, while it is not posted yet, goes first."""
        if not self.enabled or not member.startswith("root:"):
            return None
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
        if not swept.open:  # most roots go out with no storm: nothing more to read
            return None
        storm = await self._storms.current(self.channel)
        if storm is None or storm.ts:
            return None

        async def draw() -> Rendered:  # after any lookup: the groups as they are by then
            members = await self._storms.members(self.channel)
            return await self._render(storm, members, {}, over=False)

        return DigestPost(storm, draw, self._opened, self._config.quiet_s)

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
        # A digest that can never be edited (it was deleted) is let be: the threads carry on,
        # and a later storm gets a new digest.
        refused = await self._editor.update(storm.ts, digest)
        if refused is not None:
            self._editor.lost("the storm digest", refused.error)
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
