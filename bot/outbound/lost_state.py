"""A Redis that lost queuepilot's state (a failover to an empty replica, a restart without
persistence, FLUSHALL): found, said loudly, and gone on from.

The marker (`bot.storage.state_marker`) says the state exists. The leader checks it when it takes
the lead and every status tick. Missing while this process saw it before, or while Slack shows
roots of the bot, the state was lost: the roots are read back from the channels' history (their
metadata names the incident, its UID and its alert group; `bot.outbound.history_scan`),
numbering goes on above the highest number used, and an alert group that notifies again goes on
in its root, edited in place, instead of opening a second thread (`bot.intake.consumer`).

Numbers: the highest of those Slack shows and those this process saw used. Numbers stay short
(people type them: `/queue ack 12`), and Slack keeps every root the bot posted, so what Slack shows
is the one record of them that survives Redis. Every channel the bot posts to is read, also to
tell a first start from a loss: a replica that never saw the marker (started beside an emptied
Redis, or a standby taking the lead after a wipe) has only Slack to tell, and the roots may all be
in routed channels.

How deep: each channel back to the window (a week). A group whose incident is still open may
notify again however long ago its root was posted, and a root says nothing of whether its
incident is still open, so nothing short of the window tells that no group of the channel needs
an older root. The numbering needs less: numbers only grow and a channel's roots are posted in
the order they were opened, so a channel's newest root of the bot shows its highest number, and
once every channel has shown its newest root (or been read to the window) new incidents can be
numbered above every number used.

The intake does not wait for all of it. A notification that would open an incident waits only
while its group's root may still be found, that is until its channel (`SLACK_ROUTES` names it from
the group's labels) has been read to the window and new numbers are known to be above all Slack
shows, and at most `HOLD_S` from the start of the read; every other notification is applied at
once. On Tier 3 this is a second or two; on a distributed app's Tier 1 (15 messages, one call a
minute) the read goes on in the background after the hold, saying how far it has got in the log
and `/readyz`, and a group whose root it finds only later opens a thread of its own (the root is
not taken up once the group has one).

A check Slack holds up leaves the intake to go on meanwhile; the marker's `unsure` says so, on
any replica, so that the intake's own writes are never taken for an older release's state, and
the roots posted since the check began are the bot's new ones, not found ones. Only messages this
app posted count (`auth.test`'s bot): another app's in the channel (a second deployment) are not
this deployment's roots.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from redis.exceptions import RedisError

from bot.config import Settings
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.history_scan import Found, Scan, read_all
from bot.storage.state_marker import StateMarker
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

LOOKBACK_S = 7 * 86_400  # how far back a channel is read for the bot's roots
FOUND_KEEP_S = 86_400  # a found root waits this long for its group's next notification
# A notification whose group's root may still be found waits for it at most this long after the
# read began: a slow Slack (a distributed app reads 15 messages a minute) must not keep an alert
# from being shown.
HOLD_S = 10.0
SAY_EVERY_S = 30.0  # how often a long read says in the log how far it has got
GUIDE = "docs/operations.md, Backup and restore"


@dataclass(eq=False)
class StateGuard:
    marker: StateMarker
    slack: SlackGateway
    telemetry: Telemetry
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    hold_s: float = HOLD_S
    _seen: bool = field(default=False, init=False)  # this process saw the marker
    _highest: int = field(default=0, init=False)  # the highest number this process saw used
    _bot_id: str = field(default="", init=False)  # this app's bot, as auth.test names it
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _scan: Scan | None = field(default=None, init=False)  # the read of Slack under way
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _said_at: float = field(default=0.0, init=False)  # when the log last said how far

    async def at_start_of_term(self) -> None:
        """Before the intake applies anything: the marker looked at, and a read of Slack's
        history begun beside the intake when it is missing."""
        try:
            await self._look()
        except RedisError as exc:
            log.warning(
                "state: cannot tell yet whether Redis lost the state (%s): checked again each tick",
                exc,
            )

    async def end_of_term(self) -> None:
        """The read stops with the lead (the next leader reads again); nothing waits for it."""
        task, scan = self._task, self._scan
        self._task = self._scan = None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        if scan is not None:
            scan.end()

    async def tick(self) -> None:
        try:
            await self._look()
        except RedisError as exc:
            log.warning("state: cannot check the state marker now: %s", exc)

    async def check(self) -> None:
        """The marker stands, or is set now: on a first start, or after a loss (said); returns
        once Slack's history, when it had to be read, has been."""
        task = await self._look()
        if task is not None:
            await task

    async def held(self, channel: str) -> None:
        """Until a group routed to `channel` can no longer find its root in what is left to read
        of Slack, and new incidents are numbered above every number it shows; at once when no
        read is under way, and at most `HOLD_S` after it began."""
        scan = self._scan
        if scan is not None:
            await scan.wait(channel)

    async def _look(self) -> asyncio.Task[None] | None:
        """The marker renewed, or set; missing, a read of Slack's history started. The read under
        way, if any, is returned."""
        async with self._lock:
            if self._task is not None and not self._task.done():
                return self._task
            marker, highest = await self.marker.kept()
            if marker is not None:
                if 0 < highest < self._highest:
                    # Redis went back in time (a failover to a replica that lagged, a backup
                    # restored under the bot): the numbers used since are not taken again. (No
                    # sequence at all is one that expired: no incident for the retention.)
                    await self._number_above_seen()
                self._seen, self._highest = True, max(self._highest, highest)
                if marker.lost_at is not None:
                    self.telemetry.state_lost_at.set(marker.lost_at)
                return None
            now = self.clock().timestamp()
            if not self._seen and await self.marker.holds_state():
                await self.marker.create(now)  # a release's state from before the marker
                self._seen = True
                return None
            # Before Slack is read (it may be slow or away, and the intake goes on meanwhile).
            began = await self.marker.unsure(now)
            if self._seen:
                await self._number_above_seen()
            channels = self._channels()
            self._scan = Scan(
                channels,
                Found("", began),
                oldest=now - LOOKBACK_S,
                latest=now + 60,
                hold_s=self.hold_s,
                hold_until=asyncio.get_running_loop().time() + self.hold_s,
            )
            log.info(
                "state: no state marker: checking Slack's history of %d channel(s) for the bot's "
                "roots (a first start, or Redis lost the state); a notification that may go on "
                "in a root found there waits for its channel's read, at most %.0f s",
                len(channels),
                self.hold_s,
            )
            self._said_at = asyncio.get_running_loop().time()
            self._task = asyncio.create_task(self._read(self._scan, now), name="state-check")
            return self._task

    async def _read(self, scan: Scan, now: float) -> None:
        """Every channel read, then the verdict; a failure leaves it to the next tick."""
        try:
            scan.found.bot_id = await self._own_bot()
            await read_all(self.slack, scan, lambda: self._step(scan))
            await self._conclude(scan, now)
        except (SlackError, RedisError) as exc:
            log.warning(
                "state: cannot tell yet whether Redis lost the state (%s): checked again each tick",
                str(exc) or type(exc).__name__,
            )
        finally:
            if self._scan is scan:
                self._scan = None
            scan.end()
            with suppress(RedisError):
                await self.marker.said_checking(None)

    async def _step(self, scan: Scan) -> None:
        """After a page: the numbering raised and the roots of the channels read put where the
        intake finds them, before anyone waiting for them goes on; how far, said."""
        newly = scan.done - scan.recorded
        known = scan.numbering_known and not scan.numbered
        if newly or known:
            roots = {g: r for g, r in scan.found.roots.items() if r.channel in newly}
            highest = max(self._highest, scan.found.highest)
            await self.marker.record_loss(None, highest=highest, roots=roots, keep_s=FOUND_KEEP_S)
            scan.recorded |= newly
            scan.numbered = scan.numbered or known
            scan.changed()
        await self.marker.said_checking(scan.progress())
        at = asyncio.get_running_loop().time()
        if at - self._said_at >= SAY_EVERY_S:
            self._said_at = at
            log.info("state: %s", scan.progress())

    async def _conclude(self, scan: Scan, now: float) -> None:
        found = scan.found
        log.info("state: Slack's history: %s", scan.summary())
        if not self._seen and not found.any_root:
            await self.marker.create(now)
            self._seen = True
            log.info("state: a first start: queuepilot's state begins now")
            return
        await self._lost(found, now)

    async def _own_bot(self) -> str:
        if not self._bot_id:
            self._bot_id = str((await self.slack.call("auth.test")).get("bot_id") or "")
        return self._bot_id

    async def _number_above_seen(self) -> None:
        await self.marker.record_loss(None, highest=self._highest, roots={}, keep_s=1)

    def _channels(self) -> list[str]:
        default = self.config.slack_channel
        others = sorted(self.config.routing.channels - {default})
        return [default, *others] if default else others

    async def _lost(self, found: Found, now: float) -> None:
        highest = max(self._highest, found.highest)
        await self.marker.record_loss(now, highest=highest, roots=found.roots, keep_s=FOUND_KEEP_S)
        self._seen, self._highest = True, highest
        self.telemetry.state_lost.inc()
        self.telemetry.state_lost_at.set(now)
        log.error(
            "state: Redis lost queuepilot's state (its marker %s is gone: a failover to an empty "
            "replica, a restart without persistence, a FLUSHALL): open incidents, who "
            "acknowledged them, silences and scale-ups to watch, timelines and posts not yet sent "
            "are forgotten. %d thread(s) found in Slack go on when their alert notifies again; new "
            "incidents are numbered above %d. Turn on Redis persistence and restore from a backup "
            "if there is one: %s",
            self.marker.keys.state_marker,
            len(found.roots),
            highest,
            GUIDE,
        )
