"""Reading the channels' history for the bot's roots after a possible loss of state
(`bot.outbound.lost_state`): back to the window, as fast as Slack lets this app, saying how far.

Slack serves `conversations.history` to an internal (customer-built) app at Tier 3, up to 999
messages a call, and to a commercially distributed app outside the Marketplace at one call a
minute, 15 messages a call (its 2025-05-29 change). Which one this app is, the app cannot ask; so
every call asks for 999, and Slack's answers tell the rest: a page shorter than asked while it says
there is more is the most it gives a call, and a 429's `Retry-After` is how far apart its calls
must be from then on. The channels take turns, a page each, `READERS` calls at a time: on Tier 3
twenty channels take about as long as one, and on Tier 1 every channel's newest page (which shows
its highest number) comes before anyone's deeper ones. The price, on Tier 1: the first calls side
by side are answered 429 but one, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from bot.backoff import Backoff
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.messages import METADATA_EVENT, ROOT
from bot.storage.state_marker import FoundRoot

log = logging.getLogger(__name__)

HISTORY = "conversations.history"
PAGE = 999  # the largest page Slack gives any app (an internal one's Tier 3); it clamps the rest
READERS = 8  # channels read at once: a Tier 3 burst, well inside its 50 calls a minute


@dataclass
class Found:
    """The bot's roots read back from Slack."""

    bot_id: str  # this app's bot: only its messages are its roots
    before: float  # roots posted since (the check began) are new ones, not found ones
    highest: int = 0  # the highest incident number a root shows
    roots: dict[str, FoundRoot] = field(default_factory=dict)  # group -> its newest root
    any_root: bool = False

    def add(self, message: dict[str, Any], channel: str) -> bool:
        """Whether `message` is one of the bot's roots from before the check (kept if so)."""
        payload = _root_payload(message, self.bot_id)
        ts = str(message.get("ts") or "")
        if payload is None or float(ts or 0) >= self.before:
            return False
        self.any_root = True
        self.highest = max(self.highest, int(payload["incident"]))
        group, uid = str(payload.get("group") or ""), str(payload.get("uid") or "")
        kept = self.roots.get(group)
        # Channels are read side by side: the newest root of a group wins whichever shows it.
        if group and (kept is None or float(kept.ts) < float(ts)):
            self.roots[group] = FoundRoot(payload["incident"], uid, channel, ts)
        return True


@dataclass
class Pace:
    """What Slack's answers told of this app's history reads."""

    interval_s: float = 0.0  # between calls: from the last answered call to a 429's end
    page: int = 0  # messages a call, when Slack gave fewer than asked and said there were more
    answered_at: float = 0.0  # when the last call Slack answered was sent (the event loop's time)

    def text(self) -> str:
        parts = [f"{self.page} messages a call"] if self.page else []
        if self.interval_s:
            parts.append(f"a call every {self.interval_s:.0f} s")
        return f"Slack gives this app {', '.join(parts)}" if parts else ""


@dataclass(eq=False)
class Scan:
    """One read of the channels' history: how far it got, and the notifications waiting for it."""

    channels: list[str]
    found: Found
    oldest: float  # the window's start (Unix time)
    latest: float
    hold_s: float  # how long notifications wait for this read at most
    hold_until: float  # the event loop's time when they stop waiting
    pace: Pace = field(default_factory=Pace)
    messages: dict[str, int] = field(default_factory=dict)  # channel -> messages read so far
    done: set[str] = field(default_factory=set)  # read back to the window, or not readable
    newest: set[str] = field(default_factory=set)  # whose newest root of the bot was read
    recorded: set[str] = field(default_factory=set)  # done, and their roots in Redis
    numbered: bool = False  # new incidents are numbered above every number the channels show
    overdue: bool = False  # notifications went on without waiting for it any more
    ended: bool = False  # finished, failed or stopped: nothing waits for it
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def numbering_known(self) -> bool:
        """Numbers only grow, and one sender posts a channel's roots in the order they were
        opened: a channel's newest root shows its highest number."""
        return all(c in self.done or c in self.newest for c in self.channels)

    def settled(self, channel: str) -> bool:
        return self.numbered and (channel in self.recorded or channel not in self.channels)

    def end(self) -> None:
        self.ended = True
        self.changed()

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, channel: str) -> None:
        """Until a group routed to `channel` can no longer find a root in what is left to read,
        and new numbers are above all Slack shows; at most until the hold ends."""
        loop = asyncio.get_running_loop()
        while not (self.ended or self.settled(channel)):
            left = self.hold_until - loop.time()
            if left <= 0:
                self._went_on()
                return
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    def summary(self) -> str:
        took = asyncio.get_running_loop().time() - (self.hold_until - self.hold_s)
        read = sum(self.messages.values())
        return f"{len(self.done)} channel(s) read, {read:,} messages, in {took:.1f} s"

    def progress(self) -> str:
        read = sum(self.messages.values())
        pace = self.pace.text()
        return (
            "checking Slack's history for roots after a possible loss of state: "
            f"{len(self.done)} of {len(self.channels)} channels read ({read:,} messages"
            + (f"; {pace})" if pace else ")")
        )

    def _went_on(self) -> None:
        if self.overdue:
            return
        self.overdue = True
        left = len(self.channels) - len(self.done)
        numbers = "" if self.numbered else "; new numbers may repeat ones of roots not read yet"
        log.warning(
            "state: %s after %.0f s: notifications go on without waiting for the rest; a group "
            "whose root is in the %d channel(s) not read yet opens a second thread%s",
            self.progress(),
            self.hold_s,
            left,
            numbers,
        )


async def read_all(slack: SlackGateway, scan: Scan, step: Callable[[], Awaitable[None]]) -> None:
    """Every channel's history newest first, back to the window, a page at a time in turns (each
    channel's first page before anyone's second); `step` after every page."""
    cursors: dict[str, str | None] = dict.fromkeys(scan.channels)
    turns = deque(scan.channels)

    async def reader() -> None:
        while turns:
            channel = turns.popleft()
            cursors[channel] = await _read_page(slack, scan, channel, cursors[channel])
            if cursors[channel]:
                turns.append(channel)
            else:
                scan.done.add(channel)
            await step()

    readers = [asyncio.create_task(reader()) for _ in range(min(READERS, len(turns)))]
    try:
        await asyncio.gather(*readers)
    finally:
        for task in readers:  # one failed: the others stop too
            task.cancel()


async def _read_page(
    slack: SlackGateway, scan: Scan, channel: str, cursor: str | None
) -> str | None:
    """One page of `channel` read into `scan`; the next page's cursor, None at the end. A failure
    worth retrying is retried after a back-off; a channel Slack will not show is left out, said."""
    scan.messages.setdefault(channel, 0)
    backoff = Backoff(30.0)
    while True:
        try:
            page = await _page(slack, scan, channel, cursor)
            break
        except SlackError as exc:
            if not exc.retryable:
                log.warning(
                    "state: cannot read the history of %s (%s): its threads are not found",
                    channel,
                    exc.error,
                )
                return None
            wait = backoff.next()
            log.info("state: history of %s: %s; again in %.1f s", channel, exc.error, wait)
            await asyncio.sleep(wait)
    messages = [m for m in page.get("messages") or () if isinstance(m, dict)]
    roots = sum(scan.found.add(message, channel) for message in messages)
    scan.messages[channel] += len(messages)
    cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
    if cursor and len(messages) < PAGE:
        scan.pace.page = max(scan.pace.page, len(messages))
    if roots:
        scan.newest.add(channel)
    return cursor


async def _page(
    slack: SlackGateway, scan: Scan, channel: str, cursor: str | None
) -> dict[str, Any]:
    """One page, in this app's turn. A 429 holds the method for its `Retry-After` (the gateway),
    and from then on calls are as far apart as the last answered one was from the hold's end."""
    loop, pace = asyncio.get_running_loop(), scan.pace
    while True:
        await slack.turn(HISTORY, round(pace.interval_s * 1000), within_s=None)
        sent = loop.time()
        try:
            page = await slack.call(
                HISTORY,
                channel=channel,
                oldest=f"{scan.oldest:.6f}",
                latest=f"{scan.latest:.6f}",
                inclusive=True,
                cursor=cursor,
                limit=PAGE,
                include_all_metadata=True,
            )
        except SlackError as exc:
            if exc.retry_after is None:
                raise
            since = sent - pace.answered_at if pace.answered_at else 0.0
            pace.interval_s = max(pace.interval_s, since + exc.retry_after)
            continue
        pace.answered_at = sent
        return page


def _root_payload(message: dict[str, Any], bot_id: str) -> dict[str, Any] | None:
    """The metadata of one of the bot's roots, None for any other message."""
    if not bot_id or message.get("bot_id") != bot_id:
        return None
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != METADATA_EVENT:
        return None
    payload = metadata.get("event_payload")
    if not isinstance(payload, dict) or payload.get("item") != ROOT:
        return None
    incident = str(payload.get("incident") or "")
    return payload if incident.isdigit() else None
