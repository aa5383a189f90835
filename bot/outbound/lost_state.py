"""A Redis that lost queuepilot's state (a failover to an empty replica, a restart without
persistence, FLUSHALL): found, said loudly, and gone on from. docs/operations.md ("When Redis lost
the state") says what an operator sees.

The marker (`bot.storage.state_marker`) says the state exists; the leader checks it when it takes
the lead and every tick. Missing while this process saw it, or while Slack shows roots of this
app, the state was lost: the channels' history is read back a week for the roots
(`bot.outbound.history_scan`), whose metadata names the incident, its UID and its alert group, so
a group that notifies again goes on in its root (`bot.intake.consumer`). Slack's history is the
one record of the numbers used that survives Redis, so an opening waits for the numbering (every
channel's newest root, which shows its highest number): at most `NUMBER_HOLD_S`, then it is
numbered above the highest read plus `NUMBER_GAP` (a distributed app reads a channel a minute),
and a group that may find its root waits for its channel at most `HOLD_S`. The marker keeps
`unsure` until the read is done, so that a leader taking over reads on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from redis.exceptions import RedisError

from bot.config import Settings
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.history_scan import HISTORY, Found, Scan, read_all
from bot.pacing import Backoff
from bot.storage.leases import Deposed
from bot.storage.state_marker import StateMarker
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

LOOKBACK_S = 7 * 86_400  # how far back a channel is read for the bot's roots
FOUND_KEEP_S = 86_400  # a found root waits this long for its group's next notification
# A notification whose group's root may still be found waits for it at most this long after the
# read began: a slow Slack (a distributed app reads 15 messages a minute) must not keep an alert
# from being shown.
HOLD_S = 10.0
# A notification that opens an incident waits for the numbering at most this long after the read
# began, then goes on numbered above a guess: the highest number read so far and NUMBER_GAP more.
NUMBER_HOLD_S = 120.0
NUMBER_GAP = 1000
UNREAD_AGAIN_S = 600.0  # at most this long before a first start reads a failing channel again
GIVE_UP_AFTER = 8  # failures in a row (5xx, timeouts) after which a channel's read is given up
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
    number_hold_s: float = NUMBER_HOLD_S
    give_up_after: int = GIVE_UP_AFTER
    unread_again_s: float = UNREAD_AGAIN_S
    _seen: bool = field(default=False, init=False)  # this process saw the marker
    _highest: int = field(default=0, init=False)  # the highest number this process saw used
    _bot_id: str = field(default="", init=False)  # this app's bot, as auth.test names it
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _scan: Scan | None = field(default=None, init=False)  # the read of Slack under way
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _watch: asyncio.Task[None] | None = field(default=None, init=False)  # ends it with the lead
    # A failed read's guess at the numbering, kept for what waits on it until the next read.
    _guess: asyncio.Task[None] | None = field(default=None, init=False)
    _said_at: float = field(default=0.0, init=False)  # when the log last said how far
    # A first start's channels that kept failing: read again alone, after a back-off.
    _unread: set[str] = field(default_factory=set, init=False)
    _unread_at: float = field(default=0.0, init=False)
    _unread_backoff: Backoff | None = field(default=None, init=False)

    async def at_start_of_term(self, deposed: asyncio.Event | None = None) -> None:
        """Before the intake applies anything: the marker looked at, and a read of Slack's
        history begun beside the intake when it is missing; it ends when `deposed` is set."""
        if deposed is not None:
            self._watch = asyncio.create_task(self._end_when(deposed), name="state-check-end")
        try:
            await self._look()
        except RedisError as exc:
            log.warning(
                "state: cannot tell yet whether Redis lost the state (%s): checked again each tick",
                exc,
            )

    async def end_of_term(self) -> None:
        """The read stops with the lead (the next leader reads again); nothing waits for it."""
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = None
        if self._guess is not None:
            self._guess.cancel()
            self._guess = None
        task, scan = self._task, self._scan
        self._task = self._scan = None
        if scan is not None:
            scan.stopped = True
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        if scan is not None:
            await scan.end()

    async def tick(self) -> None:
        try:
            await self._look()
            if (scan := self._scan) is not None:  # a long wait between pages says it again
                await self.marker.said_checking(scan.progress(self.slack.pacing.spacing_s(HISTORY)))
        except RedisError as exc:
            log.warning("state: cannot check the state marker now: %s", exc)

    async def check(self) -> None:
        """The marker stands, or is set now: on a first start, or after a loss (said); returns
        once Slack's history, when it had to be read, has been. A tick that waits for the read:
        the one way a test or the bench sees a whole check through."""
        task = await self._look()
        if task is not None:
            await task

    async def held(self, channel: str | None) -> None:
        """What `Scan.wait` waits for, at once when no read is under way. Raises `Deposed` when
        the read stops with the lead before that: the notification is left unacknowledged for the
        next leader, whose read numbers it (going on would open it under a number Slack may show,
        or a second thread beside its root)."""
        while (scan := self._scan) is not None:
            await scan.wait(channel)
            if scan.lets_through(channel):
                return
            if scan.stopped or (self._scan is None and not scan.numbered):
                raise Deposed("the read of Slack's history stopped with the lead")
            if self._scan is None or self._scan is scan:
                return  # a failed read, numbered: the group opens a thread of its own
            # A failed read, replaced by the next tick's: wait on that one.

    async def _end_when(self, deposed: asyncio.Event) -> None:
        await deposed.wait()
        await self.end_of_term()

    async def _look(self) -> asyncio.Task[None] | None:
        """The marker renewed, or set; missing, or standing while a read of Slack's history
        after a loss is unfinished, a read started. The read under way, if any, is returned."""
        async with self._lock:
            if self._task is not None and not self._task.done():
                return self._task
            marker, highest = await self.marker.kept()
            if marker is not None:
                if 0 < highest < self._highest:
                    # Redis went back in time (a failover to a replica that lagged, a backup
                    # restored under the bot): the numbers used since are not taken again. (No
                    # sequence at all is one that expired: no incident for the retention.)
                    await self._number_above(self._highest)
                self._seen, self._highest = True, max(self._highest, highest)
                if marker.lost_at is not None:
                    self.telemetry.state_lost_at.set(marker.lost_at)
                if not marker.reading:
                    return None
            now = self.clock().timestamp()
            loop = asyncio.get_running_loop()
            channels = self._channels()
            if self._unread and not self._seen and marker is None:
                if loop.time() < self._unread_at:
                    return None
                channels = [c for c in channels if c in self._unread]
            # Before Slack is read (it may be slow or away, and the intake goes on meanwhile).
            began = await self.marker.unsure(now)
            if self._seen and marker is None:
                await self._number_above(self._highest)
            failed, guess = self._scan, self._guess  # a failed read's, replaced by this one
            self._guess = None
            if guess is not None:
                guess.cancel()
            scan = Scan(
                channels,
                Found("", began),
                oldest=now - LOOKBACK_S,
                latest=now + 60,
                # After a failed read, openings wait no longer than from its start.
                began=failed.began if failed is not None else loop.time(),
                hold_s=self.hold_s,
                number_hold_s=self.number_hold_s,
                give_up_after=self.give_up_after,
                # Said by a leader before, whose read did not finish: the sequence is already
                # above every number its read showed (or its guess), so openings need not wait.
                said=marker is not None,
                numbered=marker is not None,
                above=highest if marker is not None else 0,
            )
            log.info(
                "state: %s: checking Slack's history of %d channel(s) for the bot's roots; a "
                "notification that may go on in a root found there waits for its channel's read "
                "(at most %.0f s), a new incident for the numbering (at most %.0f s)",
                "reading on after a loss"
                if scan.said
                else "no state marker (a first start, or Redis lost the state)",
                len(channels),
                self.hold_s,
                self.number_hold_s,
            )
            self._scan, self._said_at = scan, loop.time()
            self._task = asyncio.create_task(self._read(scan, now), name="state-check")
            if failed is not None:  # what waited on it waits on this one
                await failed.end()
            return self._task

    async def _read(self, scan: Scan, now: float) -> None:
        """Every channel read, the loss said as soon as it is known, then the verdict. A failure
        leaves it to the next tick, and the openings waiting for the numbering waiting: on the
        next tick's read, or on the guess when the number hold ends."""
        guess = asyncio.create_task(self._number_by(scan), name="state-check-numbers")
        failed = True
        try:
            scan.found.bot_id = await self._own_bot()
            await read_all(self.slack, scan, lambda: self._step(scan, now))
            await self._conclude(scan, now)
            failed = False
        except Deposed:
            failed, scan.stopped = False, True
            log.info("state: the read of Slack's history stops with the lead")
        except (SlackError, RedisError) as exc:
            log.warning(
                "state: cannot tell yet whether Redis lost the state (%s): checked again each tick",
                str(exc) or type(exc).__name__,
            )
        except Exception:
            log.exception("state: the read of Slack's history failed: checked again each tick")
        finally:
            if failed and not scan.numbered:
                self._guess = guess
            else:
                guess.cancel()
                if self._scan is scan:
                    self._scan = None
                await scan.end()
            with suppress(RedisError):
                await self.marker.said_checking(None)

    async def _number_by(self, scan: Scan) -> None:
        """Once `number_hold_s` is over, new incidents are numbered above a guess (see the
        module's docstring) rather than waiting on: the read goes on and raises it if need be."""
        left = scan.began + scan.number_hold_s - asyncio.get_running_loop().time()
        await asyncio.sleep(max(left, 0.0))
        if scan.numbered:
            return
        highest = max(self._highest, scan.found.highest) + NUMBER_GAP
        await self._recorded(lambda: self._number_above(highest))
        log.warning(
            "state: %s: new incidents go on, numbered above %d (the highest number read so far "
            "and %d more); a number shown only in the channels not read yet may be used again",
            scan.progress(self.slack.pacing.spacing_s(HISTORY)),
            highest,
            NUMBER_GAP,
        )
        scan.above = max(scan.above, highest)
        scan.numbered = True
        await scan.changed()
        await self._say_lost(scan, self.clock().timestamp())

    async def _step(self, scan: Scan, now: float) -> None:
        """After a page: the numbering raised and the roots of the channels read put where the
        intake finds them, before anyone waiting for them goes on; the loss said as soon as it is
        known; how far, said."""
        newly = scan.done - scan.recorded
        known = scan.numbering_known and not scan.exact
        if newly or known:
            roots = {g: r for g, r in scan.found.roots.items() if r.channel in newly}
            highest = max(self._highest, scan.found.highest)
            unseen = scan.numbering_unseen
            if not (self._seen or scan.found.any_root):
                # A first start: the bot has posted no root in a channel Slack refuses it.
                unseen = unseen - scan.refused.keys()
            if known and unseen:  # numbers a channel left out shows are unknown
                highest += NUMBER_GAP
            await self._recorded(
                lambda: self.marker.record_loss(
                    None, highest=highest, roots=roots, keep_s=FOUND_KEEP_S
                )
            )
            scan.above = max(scan.above, highest)
            scan.recorded |= newly
            scan.exact = scan.exact or known
            scan.numbered = scan.numbered or known
            await scan.changed()
        if scan.numbered:
            await self._say_lost(scan, now)
        progress = scan.progress(self.slack.pacing.spacing_s(HISTORY))
        with suppress(RedisError):  # what it says of itself: the next page says it again
            await self.marker.said_checking(progress)
        at = asyncio.get_running_loop().time()
        if at - self._said_at >= SAY_EVERY_S:
            self._said_at = at
            log.info("state: %s", progress)

    async def _conclude(self, scan: Scan, now: float) -> None:
        log.info("state: Slack's history: %s", scan.summary())
        if scan.said:
            await self._recorded(self.marker.read_done)
            return
        if not self._seen and not scan.found.any_root:
            if failing := scan.left_out - scan.refused.keys():
                # Only those are read again: the channels read showed no root.
                self._unread = failing
                self._unread_backoff = self._unread_backoff or Backoff(self.unread_again_s)
                wait = self._unread_backoff.next()
                self._unread_at = asyncio.get_running_loop().time() + wait
                log.warning(
                    "state: no root of the bot in the channels read, but %d kept failing: "
                    "whether Redis lost the state is known once they are read, tried again in "
                    "%.0f s",
                    len(failing),
                    wait,
                )
                return
            await self._recorded(lambda: self.marker.create(now))
            self._seen, self._unread = True, set()
            log.info("state: a first start: queuepilot's state begins now")
            for channel, error in sorted(scan.refused.items()):
                log.warning(
                    "state: Slack refuses the bot channel %s (%s): alerts routed there cannot be "
                    "posted; invite the bot to it (/invite) or fix SLACK_ROUTES",
                    channel,
                    error,
                )
            return
        await self._say_lost(scan, now)
        await self._recorded(self.marker.read_done)

    async def _say_lost(self, scan: Scan, now: float) -> None:
        """The loss said once: a root of this app seen (or the marker, by this process) and new
        incidents numbered; the roots of the channels read so far go with it."""
        if scan.said or not (self._seen or scan.found.any_root):
            return
        scan.said = True
        highest = max(self._highest, scan.above, scan.found.highest)
        roots = {g: r for g, r in scan.found.roots.items() if r.channel in scan.recorded}
        await self._recorded(
            lambda: self.marker.record_loss(now, highest=highest, roots=roots, keep_s=FOUND_KEEP_S)
        )
        self._seen, self._highest = True, highest
        self.telemetry.state_lost.inc()
        self.telemetry.state_lost_at.set(now)
        unread = len(scan.channels) - len(scan.done)
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

    async def _recorded(self, write: Callable[[], Awaitable[object]]) -> None:
        """A write of what the read found, retried while Redis fails (a blip must not throw the
        read away); a lead lost is not retried."""
        backoff = Backoff(5.0)
        while True:
            try:
                await write()
                return
            except Deposed:
                raise
            except RedisError as exc:
                wait = backoff.next()
                log.warning(
                    "state: Redis failed (%s); writing what was read again in %.1f s", exc, wait
                )
                await asyncio.sleep(wait)

    async def _own_bot(self) -> str:
        if not self._bot_id:
            self._bot_id = str((await self.slack.call("auth.test")).get("bot_id") or "")
        return self._bot_id

    async def _number_above(self, highest: int) -> None:
        await self.marker.record_loss(None, highest=highest, roots={}, keep_s=1)

    def _channels(self) -> list[str]:
        default = self.config.slack_channel
        others = sorted(self.config.routing.channels - {default})
        return [default, *others] if default else others
