"""The stages of one post, in the manner of Alertmanager's notification pipeline.

Each stage is a small value with one method, `run`: it takes the attempt so far and carries it on,
or returns None when it has finished it (nothing left to send, or recorded). The channel's sender
composes them in order (`Pipeline`), after the two steps every post begins with:

1. pace: wait for the channel's next post slot; nothing is read for a post before its slot is
   taken, so what goes out is the state at that moment;
2. select: the most urgent member of the channel's posts and its in-flight mark;
3. `StormGate`: when enough new roots wait at once, the storm digest goes first;
4. `Read`: what the member stands for now, by its kind's reader (`bot.outbound.kinds`);
5. `LookUp`: if this very item was in flight when its last attempt failed uncertainly (a timeout,
   a 5xx) or its sender died, a post that landed is recorded, not posted again. It comes before
   the new mark, whose time would move the window it reads;
6. `Prepare`: draw it (a root as it is now, a chart's picture): a failure here leaves no mark;
7. `Mark`: mark it in flight, only while this sender still holds the channel's lease;
8. `Send`: call Slack, spending the slot, and record the result. How Slack's answer to the
   call is taken is decided here and only here: a 429 or a refused connection clears the mark
   (nothing was posted); an uncertain failure keeps it, for the next attempt's lookup; both are
   raised for the sender's backoff, so an outage delays the channel and never drops an update;
   a permanent refusal drops that one item, with a record.

`Strikes` keeps a bug or unreadable state from stopping the channel: an item that fails three
times in a row is dropped like one Slack refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from redis.exceptions import RedisError

from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.kinds import UNREADABLE, Queued, Reader, chart_refused
from bot.outbound.outgoing import DigestPost, Ledger, Outgoing
from bot.storage.send_queue import InFlight
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# A thread's post lands within the call's timeout (10 s); Slack's clock is not ours and its
# history can lag a post by a moment: a lookup reads this far either side of the attempt.
LOOKUP_MARGIN_S = 60.0
# An item that failed this many times in a row is dropped, so one bug costs one item.
STRIKES = 3


class LostLease(Exception):
    """Another replica took this channel over: this sender stops before it posts anything."""


@dataclass(frozen=True)
class Attempt:
    """One post on its way: the member selected, the mark an earlier attempt left on it (which
    may have landed), what it stands for once read, and this attempt's own mark once made."""

    queued: Queued
    in_flight: InFlight | None = None
    outgoing: Outgoing | None = None
    mark: InFlight | None = None

    @property
    def ready(self) -> Outgoing:
        assert self.outgoing is not None, "read first"
        return self.outgoing


class Stage(Protocol):
    async def run(self, attempt: Attempt) -> Attempt | None: ...


# -- what the stages need, each as small as its use (the send queue and the gateway fit) -------


class Posts(Protocol):
    """The channel's send queue, as the stages see it."""

    async def next_post(self, channel: str) -> tuple[str | None, InFlight | None]: ...
    async def in_flight(self, channel: str, member: str) -> InFlight | None: ...
    async def begin(self, channel: str, lease_token: str, marker: InFlight) -> bool: ...
    async def end_attempt(self, channel: str, marker: InFlight) -> None: ...


class Slot(Protocol):
    """The channel's post budget (`bot.outbound.budget.Budget`)."""

    async def post_slot(self) -> None: ...
    def spend_post(self) -> None: ...
    def encode(self) -> str: ...


class Finder(Protocol):
    async def find(
        self,
        method: str,
        channel: str,
        landed: Callable[[dict[str, Any]], bool],
        *,
        ts: str | None,
        oldest: float,
        latest: float,
    ) -> dict[str, Any] | None: ...


class ChartRefusals(Protocol):
    async def refused(self, error: str) -> None: ...


class Gate(Protocol):
    async def gate(self, queued: Queued) -> DigestPost | None: ...


# -- the stages ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StormGate:
    channel: str
    storm: Gate
    posts: Posts

    async def run(self, attempt: Attempt) -> Attempt | None:
        digest = await self.storm.gate(attempt.queued)
        if digest is None:
            return attempt
        # The digest, in place of the root selected: its own mark is the one that counts.
        in_flight = await self.posts.in_flight(self.channel, digest.member)
        return replace(attempt, outgoing=digest, in_flight=in_flight)


@dataclass(frozen=True)
class Read:
    readers: Mapping[str, Reader]
    strays: Reader

    def reader(self, queued: Queued) -> Reader:
        return self.readers.get(queued.kind, self.strays)

    async def run(self, attempt: Attempt) -> Attempt | None:
        if attempt.outgoing is not None:
            return attempt
        outgoing = await self.reader(attempt.queued).read(attempt.queued, attempt.in_flight)
        return None if outgoing is None else replace(attempt, outgoing=outgoing)


@dataclass(frozen=True)
class LookUp:
    """The ts of a post that may have landed before its sender heard back, if it did.

    It reads what the channel (or the thread) shows from shortly before the attempt to shortly
    after it, whatever the clocks' skew. A lookup Slack refuses for good (a scope removed from
    the app, say) finds nothing: posting again is the lesser harm, a possible duplicate beats a
    channel that never posts again."""

    channel: str
    finder: Finder
    ledger: Ledger
    slot: Slot
    telemetry: Telemetry
    margin_s: float = LOOKUP_MARGIN_S

    async def run(self, attempt: Attempt) -> Attempt | None:
        outgoing, in_flight = attempt.ready, attempt.in_flight
        if in_flight is None or in_flight.item != outgoing.item:
            return attempt
        thread = outgoing.thread
        try:
            found = await self.finder.find(
                "conversations.history" if thread is None else "conversations.replies",
                self.channel,
                outgoing.landed,
                ts=thread.ts if thread else None,
                oldest=in_flight.since - self.margin_s,
                latest=in_flight.since + self.margin_s,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            log.error(
                "sender %s: cannot look %s up (%s); sending it again, it may show twice",
                self.channel,
                outgoing.item,
                exc.error,
            )
            self.telemetry.slack_lookups.labels("failed").inc()
            return attempt
        if found is None:
            self.telemetry.slack_lookups.labels("not_found").inc()
            return attempt
        log.info("sender %s: %s had landed; not posted again", self.channel, outgoing.item)
        self.telemetry.slack_lookups.labels("found").inc()
        ts = str(found.get("ts", ""))
        await outgoing.record(self.ledger, ts, bucket=self.slot.encode(), found=True)
        return None


@dataclass(frozen=True)
class Prepare:
    async def run(self, attempt: Attempt) -> Attempt | None:
        await attempt.ready.prepare()
        return attempt


@dataclass(frozen=True)
class Mark:
    channel: str
    posts: Posts
    lease_token: str
    now: Callable[[], float] = time.time

    async def run(self, attempt: Attempt) -> Attempt | None:
        outgoing = attempt.ready
        mark = InFlight(outgoing.member, outgoing.item, self.now())
        if not await self.posts.begin(self.channel, self.lease_token, mark):
            raise LostLease
        return replace(attempt, mark=mark)


@dataclass(frozen=True)
class Send:
    channel: str
    slack: SlackGateway
    slot: Slot
    posts: Posts
    charts: ChartRefusals
    ledger: Ledger

    async def run(self, attempt: Attempt) -> Attempt | None:
        outgoing, mark = attempt.ready, attempt.mark
        assert mark is not None, "marked first"
        self.slot.spend_post()
        try:
            ts = await outgoing.send(self.slack, self.channel)
        except SlackError as exc:
            if exc.retryable:
                if not exc.uncertain:  # a 429 or a refused connection: nothing was posted
                    await self.posts.end_attempt(self.channel, mark)
                raise  # the mark stays when uncertain: the next attempt looks it up first
            shown = outgoing.shown()
            if shown is not None and chart_refused(exc, shown):
                # The workspace does not take Slack's chart block: pictures from now on, and
                # this goes again at once without it (its reader takes the chart out).
                await self.charts.refused(exc.error)
                await self.posts.end_attempt(self.channel, mark)
                return None
            await outgoing.refused(self.ledger, exc.error)
            return None
        await outgoing.record(self.ledger, ts, bucket=self.slot.encode(), found=False)
        return None


# -- the composition --------------------------------------------------------------------------


@dataclass(frozen=True)
class Pipeline:
    """One post, start to end: pace, select, then each stage in order."""

    channel: str
    slot: Slot
    posts: Posts
    stages: Sequence[Stage]
    strikes: Strikes

    async def next(self) -> bool:
        """Send the channel's most urgent post; False when none was waiting."""
        await self.slot.post_slot()
        member, in_flight = await self.posts.next_post(self.channel)
        if member is None:
            return False
        attempt = Attempt(Queued.of(member), in_flight)
        try:
            for stage in self.stages:
                carried = await stage.run(attempt)
                if carried is None:
                    break
                attempt = carried
        except (SlackError, RedisError, LostLease):
            raise  # the sender's backoff retries these; a lost lease stops it
        except Exception:
            await self.strikes.failed(attempt)
            raise Struck from None
        self.strikes.cleared(attempt)
        return True


class Struck(Exception):
    """The attempt failed in a way already logged (and counted): try again after a backoff."""


class Strikes:
    """Failures per item, in a row: the third drops it (`Outgoing.refused` once read, else its
    kind's `unreadable`), so a bug or unreadable state costs that one item, never the channel."""

    def __init__(self, channel: str, read: Read, ledger: Ledger) -> None:
        self.channel = channel
        self._read = read
        self._ledger = ledger
        self._counts: dict[str, int] = {}

    async def _name(self, attempt: Attempt) -> str:
        if attempt.outgoing is not None:
            return f"{attempt.outgoing.member}/{attempt.outgoing.item}"
        item = await self._read.reader(attempt.queued).item(attempt.queued)
        return f"{attempt.queued.member}/{item}"

    async def failed(self, attempt: Attempt) -> None:
        name = await self._name(attempt)
        count = self._counts[name] = self._counts.get(name, 0) + 1
        log.exception("sender %s: %s failed (%d times)", self.channel, name, count)
        if count < STRIKES:
            return
        del self._counts[name]
        if attempt.outgoing is not None:
            await attempt.outgoing.refused(self._ledger, UNREADABLE)
        else:
            await self._read.reader(attempt.queued).unreadable(attempt.queued)

    def cleared(self, attempt: Attempt) -> None:
        if attempt.outgoing is not None:
            self._counts.pop(f"{attempt.outgoing.member}/{attempt.outgoing.item}", None)
