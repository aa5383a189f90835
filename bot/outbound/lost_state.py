"""A Redis that lost queuepilot's state: found, said loudly, and gone on from, as one state
machine (`Phase`, drawn in docs/architecture.md). The marker (`bot.storage.state_marker`) missing
while this process saw it, or while Slack shows roots of this app, means the state was lost: the
channels' history is read back a week for the roots, whose metadata names the incident, its UID and
its alert group. Slack's history is the one record of the numbers used that survives Redis."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from redis.exceptions import RedisError

from bot.config import Settings
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.history_scan import HISTORY, Found, Scan, read_all
from bot.pacing import Backoff
from bot.storage.leases import Deposed
from bot.storage.state_marker import FoundRoot, Marker, StateMarker
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

LOOKBACK_S = 7 * 86_400  # how far back a channel is read for the bot's roots
FOUND_KEEP_S = 86_400  # a found root waits this long for its group's next notification
# A notification whose group's root may still be found waits at most this long after the read
# began: a slow Slack (a distributed app reads 15 messages a minute) must not hide an alert.
HOLD_S = 10.0
# An opening waits for the numbering at most this long, then goes on numbered above a guess: the
# highest number read so far and NUMBER_GAP more.
NUMBER_HOLD_S = 120.0
NUMBER_GAP = 1000
UNREAD_AGAIN_S = 600.0  # at most this long before a first start reads a failing channel again
GIVE_UP_AFTER = 8  # failures in a row (5xx, timeouts) after which a channel's read is given up
SAY_EVERY_S = 30.0  # how often a long read says in the log how far it has got
GUIDE = "docs/operations.md, Backup and restore"
UNSURE = "state: cannot tell yet whether Redis lost the state (%s): checked again each tick"


class Phase(Enum):
    """Where recovery stands in this process; what an opening waits for in each: `_holds`."""

    STEADY = "steady"  # no read under way: no wait
    READING = "reading"  # the marker missing, the numbers used unknown: an opening waits
    # Numbered (above every channel's newest root, or a guess): an opening goes on, a group that
    # may find its root waits for its channel's read.
    NUMBERED = "numbered"
    SAID = "said"  # the loss said, the read goes on for roots: as NUMBERED
    FAILED = "failed"  # the read failed before the numbering: openings wait for a read or the guess
    RETRY = "retry"  # a first start not told: channels kept failing; read again after a back-off
    STOPPED = "stopped"  # the lead lost mid-read: what waits is the next leader's (`Deposed`)


@dataclass(eq=False)
class Read:
    """One read of the channels' history and what recovery made of it so far."""

    scan: Scan
    began: float  # the event loop's time the holds count from
    above: int = 0  # the highest number this read raised the numbering to
    exact: bool = False  # numbered above every number of every channel read
    recorded: set[str] = field(default_factory=set)  # read, and their roots in Redis
    overdue: bool = False  # a group went on without waiting for its channel any more
    task: asyncio.Task[None] | None = None
    guess: asyncio.Task[None] | None = None  # numbers above a guess once the number hold is over

    def settled(self, channel: str | None) -> bool:  # no root left to find there
        return channel is None or channel in self.recorded or channel not in self.scan.channels


@dataclass(eq=False)
class StateGuard:
    marker: StateMarker
    slack: SlackGateway
    telemetry: Telemetry
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    hold_s: float = HOLD_S
    number_hold_s: float = NUMBER_HOLD_S
    give_up_after: int = GIVE_UP_AFTER
    unread_again_s: float = UNREAD_AGAIN_S
    phase: Phase = field(default=Phase.STEADY, init=False)
    # The read under way, or a failed one that openings still wait on.
    read: Read | None = field(default=None, init=False)
    _seen: bool = field(default=False, init=False)  # this process saw the marker
    _highest: int = field(default=0, init=False)  # the highest number this process saw used
    _bot_id: str = field(default="", init=False)  # this app's bot, as auth.test names it
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _moved: asyncio.Event = field(default_factory=asyncio.Event, init=False)  # set at each change
    _watch: asyncio.Task[None] | None = field(default=None, init=False)  # ends it with the lead
    _said_at: float = field(default=0.0, init=False)  # when the log last said how far
    _unread: set[str] = field(default_factory=set, init=False)
    _unread_at: float = field(default=0.0, init=False)
    _unread_backoff: Backoff | None = field(default=None, init=False)

    async def at_start_of_term(self, deposed: asyncio.Event | None = None) -> None:
        """The marker looked at (a read begun if it is missing) before the intake applies
        anything; the read ends when `deposed` is set."""
        if self.phase is Phase.STOPPED:
            self._enter(Phase.STEADY)
        if deposed is not None:
            self._watch = asyncio.create_task(self._end_when(deposed), name="state-check-end")
        try:
            await self._look()
        except RedisError as exc:
            log.warning(UNSURE, exc)

    async def end_of_term(self) -> None:
        """→ STOPPED: the read ends with the lead (the next leader reads again)."""
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = None
        if (read := self._end(Phase.STOPPED)) is not None and read.task is not None:
            read.task.cancel()
            with suppress(asyncio.CancelledError):
                await read.task

    async def tick(self) -> None:
        try:
            await self._look()
            if (read := self.read) is not None:  # a long wait between pages says it again
                await self.marker.said_checking(self._progress(read))
        except RedisError as exc:
            log.warning("state: cannot check the state marker now: %s", exc)

    async def check(self) -> None:
        """A tick that waits for the read it began, if any (for tests and the bench)."""
        if (task := await self._look()) is not None:
            await task

    async def held(self, channel: str | None) -> None:
        """Until an incident may open (see `Phase`); with `channel`, until its root may be found
        there. Raises `Deposed` when the read stops with the lead: the notification is left to the
        next leader's read (going on could reuse a number or open a second thread)."""
        while (left := self._holds(channel)) > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), None if left == math.inf else left)
        if (read := self.read) is None or read.settled(channel) or read.overdue:
            return
        read.overdue = True
        log.warning(
            "state: %s after %.0f s: notifications go on without waiting for the rest; a group "
            "whose root is in the %d channel(s) not read yet opens a second thread",
            self._progress(read, paced=False),
            self.hold_s,
            len(read.scan.channels) - len(read.scan.done),
        )

    def _holds(self, channel: str | None) -> float:
        """How long more a notification waits (inf: until the phase changes)."""
        match self.phase, self.read:
            case Phase.STOPPED, _:
                raise Deposed("the read of Slack's history stopped with the lead")
            case ((Phase.READING | Phase.FAILED), _):
                return math.inf
            case ((Phase.NUMBERED | Phase.SAID), Read() as read) if not read.settled(channel):
                return read.began + self.hold_s - asyncio.get_running_loop().time()
        return 0.0

    def _enter(self, phase: Phase) -> None:  # and what waits looks at the state again
        self.phase = phase
        self._moved.set()
        self._moved = asyncio.Event()

    async def _end_when(self, deposed: asyncio.Event) -> None:
        await deposed.wait()
        await self.end_of_term()

    async def _look(self) -> asyncio.Task[None] | None:
        """STEADY while the marker stands (renewed), else a read begins; the read under way."""
        async with self._lock:
            if (read := self.read) is not None and read.task is not None and not read.task.done():
                return read.task
            marker, highest = await self.marker.kept()
            if marker is not None:
                if 0 < highest < self._highest:
                    # Redis went back in time (a lagging replica, a backup restored): the numbers
                    # used since are not taken again. No sequence at all is one that expired.
                    await self._number_above(self._highest)
                self._seen, self._highest = True, max(self._highest, highest)
                if marker.lost_at is not None:
                    self.telemetry.state_lost_at.set(marker.lost_at)
                if not marker.reading:
                    return None
            channels = self._channels()
            if self._unread and not self._seen and marker is None:
                if asyncio.get_running_loop().time() < self._unread_at:
                    return None
                channels = [c for c in channels if c in self._unread]
            return await self._begin(marker, highest, channels)

    async def _begin(
        self, marker: Marker | None, highest: int, channels: list[str]
    ) -> asyncio.Task[None]:
        """→ READING; → SAID when the marker says a loss's read is unfinished (a leader taking
        over: the numbering is done, openings need not wait). A failed read's holds count on."""
        now = self.clock().timestamp()
        loop = asyncio.get_running_loop()
        # Before Slack is read (it may be slow or away, and the intake goes on meanwhile).
        began = await self.marker.unsure(now)
        if self._seen and marker is None:
            await self._number_above(self._highest)
        if (failed := self.read) is not None and failed.guess is not None:
            failed.guess.cancel()
        scan = Scan(channels, Found("", began), now - LOOKBACK_S, now + 60, self.give_up_after)
        read = Read(scan, began=failed.began if failed is not None else loop.time())
        read.above = highest if marker is not None else 0
        log.info(
            "state: %s: checking Slack's history of %d channel(s) for the bot's roots; a "
            "notification that may go on in a root found there waits for its channel's read "
            "(at most %.0f s), a new incident for the numbering (at most %.0f s)",
            "reading on after a loss"
            if marker is not None
            else "no state marker (a first start, or Redis lost the state)",
            len(channels),
            self.hold_s,
            self.number_hold_s,
        )
        self.read, self._said_at = read, loop.time()
        read.task = asyncio.create_task(self._read(read, now), name="state-check")
        self._enter(Phase.SAID if marker is not None else Phase.READING)
        return read.task

    async def _read(self, read: Read, now: float) -> None:
        """Every channel read, the loss said as soon as known, then the verdict."""
        read.guess = asyncio.create_task(self._guess(read), name="state-check-numbers")
        try:
            if not self._bot_id:
                self._bot_id = str((await self.slack.call("auth.test")).get("bot_id") or "")
            read.scan.found.bot_id = self._bot_id
            await read_all(self.slack, read.scan, lambda: self._step(read, now))
            await self._conclude(read, now)
        except Deposed:
            self._end(Phase.STOPPED)
            log.info("state: the read of Slack's history stops with the lead")
        except (SlackError, RedisError) as exc:
            log.warning(UNSURE, str(exc) or type(exc).__name__)
            self._failed()
        except Exception:
            log.exception("state: the read of Slack's history failed: checked again each tick")
            self._failed()
        finally:
            with suppress(RedisError):
                await self.marker.said_checking(None)

    def _failed(self) -> None:
        """READING → FAILED (openings wait on); a read numbered already → STEADY."""
        if self.phase is Phase.READING:
            self._enter(Phase.FAILED)
        else:
            self._end(Phase.STEADY)

    def _end(self, phase: Phase) -> Read | None:
        """The read, if any, over (→ STEADY, RETRY or STOPPED), its guess with it."""
        read, self.read = self.read, None
        if read is None:
            return None
        if read.guess is not None:
            read.guess.cancel()
        self._enter(phase)
        return read

    async def _guess(self, read: Read) -> None:
        """READING or FAILED → NUMBERED above a guess once `number_hold_s` is over."""
        left = read.began + self.number_hold_s - asyncio.get_running_loop().time()
        await asyncio.sleep(max(left, 0.0))
        if self.phase not in (Phase.READING, Phase.FAILED):
            return
        highest = max(self._highest, read.scan.found.highest) + NUMBER_GAP
        await self._recorded(self._number_above, highest)
        if self.phase not in (Phase.READING, Phase.FAILED) or self.read is not read:
            return  # a page numbered the read (and may have said the loss) during the write
        log.warning(
            "state: %s: new incidents go on, numbered above %d (the highest number read so far "
            "and %d more); a number shown only in the channels not read yet may be used again",
            self._progress(read),
            highest,
            NUMBER_GAP,
        )
        read.above = max(read.above, highest)
        self._enter(Phase.NUMBERED)
        await self._say_lost(read, self.clock().timestamp())

    async def _step(self, read: Read, now: float) -> None:
        """After a page: the numbering raised and the roots of the channels read recorded before
        anyone waiting goes on (→ NUMBERED once every channel's newest root is read)."""
        scan = read.scan
        newly = scan.done - read.recorded
        known = scan.numbering_known and not read.exact
        if newly or known:
            roots = {g: r for g, r in scan.found.roots.items() if r.channel in newly}
            highest = max(self._highest, scan.found.highest)
            unseen = scan.left_out - scan.newest  # left out before their newest root was read
            if not self._lost(read):
                # A first start: the bot has posted no root in a channel Slack refuses it.
                unseen = unseen - scan.refused.keys()
            if known and unseen:  # numbers a channel left out shows are unknown
                highest += NUMBER_GAP
            await self._recorded(self._said, None, highest, roots)
            read.above = max(read.above, highest)
            read.recorded |= newly
            read.exact = read.exact or known
            self._enter(Phase.NUMBERED if known and self.phase is Phase.READING else self.phase)
        if self.phase is Phase.NUMBERED:
            await self._say_lost(read, now)
        progress = self._progress(read)
        with suppress(RedisError):  # what it says of itself: the next page says it again
            await self.marker.said_checking(progress)
        at = asyncio.get_running_loop().time()
        if at - self._said_at >= SAY_EVERY_S:
            self._said_at = at
            log.info("state: %s", progress)

    async def _conclude(self, read: Read, now: float) -> None:
        """The read done: → STEADY (a loss said, or a first start), or RETRY while channels kept
        failing."""
        scan = read.scan
        log.info(
            "state: Slack's history: %d channel(s) read, %s messages, in %.1f s",
            *(len(scan.done), f"{scan.read:,}", asyncio.get_running_loop().time() - read.began),
        )
        if self.phase is Phase.SAID or self._lost(read):
            await self._say_lost(read, now)
            await self._recorded(self.marker.read_done)
            self._end(Phase.STEADY)
            return
        if failing := scan.left_out - scan.refused.keys():
            # Only those are read again: the channels read showed no root.
            self._unread = failing
            self._unread_backoff = self._unread_backoff or Backoff(self.unread_again_s)
            wait = self._unread_backoff.next()
            self._unread_at = asyncio.get_running_loop().time() + wait
            log.warning(
                "state: no root of the bot in the channels read, but %d kept failing: whether "
                "Redis lost the state is known once they are read, tried again in %.0f s",
                len(failing),
                wait,
            )
            self._end(Phase.RETRY)
            return
        await self._recorded(self.marker.create, now)
        self._seen, self._unread = True, set()
        log.info("state: a first start: queuepilot's state begins now")
        for channel, error in sorted(scan.refused.items()):
            log.warning(
                "state: Slack refuses the bot channel %s (%s): alerts routed there cannot be "
                "posted; invite the bot to it (/invite) or fix SLACK_ROUTES",
                channel,
                error,
            )
        self._end(Phase.STEADY)

    def _lost(self, read: Read) -> bool:
        """A loss, not a first start: a root of this app seen, or the marker, by this process."""
        return self._seen or read.scan.found.any_root

    async def _say_lost(self, read: Read, now: float) -> None:
        """→ SAID, once, with the roots of the channels read so far."""
        if self.phase is Phase.SAID or not self._lost(read):
            return
        self._enter(Phase.SAID)
        highest = max(self._highest, read.above, read.scan.found.highest)
        roots = {g: r for g, r in read.scan.found.roots.items() if r.channel in read.recorded}
        await self._recorded(self._said, now, highest, roots)
        self._seen, self._highest = True, highest
        self.telemetry.state_lost.inc()
        self.telemetry.state_lost_at.set(now)
        unread = len(read.scan.channels) - len(read.scan.done)
        log.error(
            "state: Redis lost queuepilot's state (its marker %s is gone: a failover to an empty "
            "replica, a restart without persistence, a FLUSHALL): open incidents, who "
            "acknowledged them, silences and scale-ups to watch, timelines and posts not yet sent "
            "are forgotten. %d thread(s) found in Slack go on when their alert notifies again%s; "
            "new incidents are numbered above %d. Turn on Redis persistence and restore from a "
            "backup if there is one: %s",
            self.marker.keys.state_marker,
            len(roots),
            f" ({unread} channel(s) still being read for more)" if unread else "",
            highest,
            GUIDE,
        )

    def _progress(self, read: Read, *, paced: bool = True) -> str:
        """What `/readyz` and the log say: how far, at what pace, and what waits for it."""
        scan = read.scan
        spacing_s = self.slack.pacing.spacing_s(HISTORY) if paced else 0
        pace = [f"{scan.page} messages a call"] if scan.page else []
        if spacing_s:
            pace.append(f"a call every {spacing_s:.0f} s")
        said = f"; Slack gives this app {', '.join(pace)}" if pace else ""
        text = (
            "checking Slack's history for roots after a possible loss of state: "
            f"{len(scan.done)} of {len(scan.channels)} channels read ({scan.read:,} messages{said})"
        )
        if self.phase in (Phase.READING, Phase.FAILED):
            left = read.began + self.number_hold_s - asyncio.get_running_loop().time()
            text += (
                "; new incidents wait until every channel's newest roots are read, "
                f"at most {max(left, 0):.0f} s more"
            )
        return text

    async def _recorded(self, write: Callable[..., Awaitable[object]], *args: Any) -> None:
        """A write retried while Redis fails (a blip must not throw the read away)."""
        backoff = Backoff(5.0)
        while True:
            try:
                await write(*args)
                return
            except Deposed:
                raise
            except RedisError as exc:
                wait = backoff.next()
                log.warning(
                    "state: Redis failed (%s); writing what was read again in %.1f s", exc, wait
                )
                await asyncio.sleep(wait)

    async def _said(self, now: float | None, highest: int, roots: dict[str, FoundRoot]) -> None:
        await self.marker.record_loss(now, highest=highest, roots=roots, keep_s=FOUND_KEEP_S)

    async def _number_above(self, highest: int) -> None:
        await self.marker.record_loss(None, highest=highest, roots={}, keep_s=1)

    def _channels(self) -> list[str]:
        default = self.config.slack_channel
        others = sorted(self.config.routing.channels - {default})
        return [default, *others] if default else others
