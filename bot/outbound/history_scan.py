"""Reading the channels' history for the bot's roots after a possible loss of state.

Slack gives an internal app Tier 3 and 999 messages a call, a distributed one a call a minute and
15 messages; the app cannot ask which, so every call asks for 999 and Slack's answers (a short page
with more to come is the most it gives; a 429's `Retry-After`) tell the rest. The channels take
turns, a page each, so every channel's newest page (its highest number) comes first; the readers
grow by one a page up to `READERS`, so a first read meets two 429s at most before it knows the
pace."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.messages import METADATA_EVENT, ROOT
from bot.pacing import Backoff
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


@dataclass(eq=False)
class Scan:
    """How far one read of the channels' history got (`bot.outbound.lost_state` decides on it)."""

    channels: list[str]
    found: Found
    oldest: float  # the window's start (Unix time)
    latest: float
    give_up_after: int  # failures in a row (not 429s) after which a channel is left out
    page: int = 0  # messages a call, when Slack gave fewer than asked and said there were more
    read: int = 0  # messages read so far, every channel's
    done: set[str] = field(default_factory=set)  # read back to the window, or left out
    left_out: set[str] = field(default_factory=set)  # Slack would not show them, or kept failing
    refused: dict[str, str] = field(default_factory=dict)  # left out for good -> Slack's error
    newest: set[str] = field(default_factory=set)  # whose newest root of the bot was read

    @property
    def numbering_known(self) -> bool:
        """Numbers only grow, and a channel's roots are posted in order: its newest root shows its
        highest number."""
        return all(c in self.done or c in self.newest for c in self.channels)


async def read_all(slack: SlackGateway, scan: Scan, step: Callable[[], Awaitable[None]]) -> None:
    """Every channel's history newest first, a page at a time in turns; `step` after each page."""
    cursors: dict[str, str | None] = dict.fromkeys(scan.channels)
    turns = deque(scan.channels)

    readers: list[asyncio.Task[None]] = []

    async def reader() -> None:
        while turns:
            channel = turns.popleft()
            cursors[channel] = await _read_page(slack, scan, channel, cursors[channel])
            if cursors[channel]:
                turns.append(channel)
            else:
                scan.done.add(channel)
            if turns and len(readers) < READERS:  # one more reader each page, up to READERS
                readers.append(asyncio.create_task(reader()))
            await step()

    readers.append(asyncio.create_task(reader()))
    try:
        while not all(task.done() for task in readers):
            await asyncio.gather(*readers)
    finally:
        for task in readers:  # one failed: the others stop too
            task.cancel()


async def _read_page(
    slack: SlackGateway, scan: Scan, channel: str, cursor: str | None
) -> str | None:
    """One page of `channel` read into `scan`; the next cursor, None at the end. A channel Slack
    will not show, or that failed `give_up_after` times in a row, is left out."""
    backoff = Backoff(30.0)
    failures = 0
    while True:
        try:
            # The gateway paces the method as Slack's 429s tell (the lookups share that budget),
            # as fast as Slack lets otherwise (on Tier 3 twenty channels take one's time).
            messages, cursor = await slack.page(
                HISTORY,
                channel,
                oldest=scan.oldest,
                latest=scan.latest,
                cursor=cursor,
                limit=PAGE,
                interval_ms=0,
            )
            break
        except SlackError as exc:
            failures += 1
            if not exc.retryable or failures >= scan.give_up_after:
                tried = "" if not exc.retryable else f" {failures} times"
                log.warning(
                    "state: cannot read the history of %s (%s%s): its threads are not found, "
                    "and numbers it shows may be used again",
                    channel,
                    exc.error,
                    tried,
                )
                scan.left_out.add(channel)
                if not exc.retryable:  # not_in_channel, channel_not_found, missing_scope...
                    scan.refused[channel] = exc.error
                return None
            wait = backoff.next()
            log.info("state: history of %s: %s; again in %.1f s", channel, exc.error, wait)
            await asyncio.sleep(wait)
    roots = sum(scan.found.add(message, channel) for message in messages)
    scan.read += len(messages)
    if cursor and len(messages) < PAGE:
        scan.page = max(scan.page, len(messages))
    if roots:
        scan.newest.add(channel)
    return cursor


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
