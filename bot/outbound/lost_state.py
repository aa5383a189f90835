"""A Redis that lost queuepilot's state (a failover to an empty replica, a restart without
persistence, FLUSHALL): found, said loudly, and gone on from.

The marker (`bot.storage.state_marker`) says the state exists. The leader checks it when it takes
the lead and every status tick. Missing while this process saw it before, or while Slack shows
roots of the bot, the state was lost: the roots are read back from the channels' recent history
(their metadata names the incident, its UID and its alert group), numbering goes on above the
highest number used, and an alert group that notifies again goes on in its root, edited in place,
instead of opening a second thread (`bot.intake.consumer`).

Numbers: the highest of those Slack shows and those this process saw used. Numbers stay short
(people type them: `/queue ack 12`), and Slack keeps every root the bot posted, so what Slack shows
is the one record of them that survives Redis. Every channel the bot posts to is read, also to
tell a first start from a loss: a replica that never saw the marker (started beside an emptied
Redis, or a standby taking the lead after a wipe) has only Slack to tell, and the roots may all be
in routed channels.

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
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from bot.config import Settings
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.messages import METADATA_EVENT, ROOT
from bot.storage.state_marker import FoundRoot, StateMarker
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

LOOKBACK_S = 7 * 86_400  # how far back a channel is read for the bot's roots
PAGES_PER_CHANNEL = 5  # 75 messages: a distributed app's 5 minutes a channel at most
FOUND_KEEP_S = 86_400  # a found root waits this long for its group's next notification
# Checked before the leader applies anything, for at most this long: a slow Slack must not keep
# the leader from working (the tick checks again).
START_CHECK_S = 10.0
GUIDE = "docs/operations.md, Backup and restore"


@dataclass
class Found:
    """The bot's roots read back from Slack."""

    bot_id: str  # this app's bot: only its messages are its roots
    before: float  # roots posted since (the check began) are new ones, not found ones
    highest: int = 0  # the highest incident number a root shows
    roots: dict[str, FoundRoot] = field(default_factory=dict)  # group -> its newest root
    any_root: bool = False

    def add(self, message: dict[str, Any], channel: str) -> None:
        payload = _root_payload(message, self.bot_id)
        if payload is None or float(message.get("ts") or 0) >= self.before:
            return
        self.any_root = True
        self.highest = max(self.highest, int(payload["incident"]))
        group, uid = str(payload.get("group") or ""), str(payload.get("uid") or "")
        if group and group not in self.roots:  # read newest first: the newest root wins
            ts = str(message.get("ts") or "")
            self.roots[group] = FoundRoot(payload["incident"], uid, channel, ts)


@dataclass(eq=False)
class StateGuard:
    marker: StateMarker
    slack: SlackGateway
    telemetry: Telemetry
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    _seen: bool = field(default=False, init=False)  # this process saw the marker
    _highest: int = field(default=0, init=False)  # the highest number this process saw used
    _bot_id: str = field(default="", init=False)  # this app's bot, as auth.test names it
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def at_start_of_term(self) -> None:
        try:
            await asyncio.wait_for(self.check(), START_CHECK_S)
        except (TimeoutError, SlackError, RedisError) as exc:
            why = str(exc) or type(exc).__name__
            log.warning(
                "state: cannot tell yet whether Redis lost the state (%s): checked again each tick",
                why,
            )

    async def tick(self) -> None:
        try:
            await self.check()
        except (SlackError, RedisError) as exc:
            log.warning("state: cannot check the state marker now: %s", exc)

    async def check(self) -> None:
        """The marker stands, or is set now: on a first start, or after a loss (said)."""
        async with self._lock:
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
                return
            now = self.clock().timestamp()
            if not self._seen and await self.marker.holds_state():
                await self.marker.create(now)  # a release's state from before the marker
                self._seen = True
                return
            # Before Slack is read (it may be slow or away, and the intake goes on meanwhile).
            began = await self.marker.unsure(now)
            if self._seen:
                await self._number_above_seen()
            found = Found(await self._own_bot(), began)
            await self._read(found, self._channels(), now)
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

    async def _read(self, found: Found, channels: list[str], now: float) -> None:
        """The bot's roots in the channels' recent history; a channel Slack will not show is left
        out, said; a failure worth retrying raises (the check is done again)."""
        for channel in channels:
            pages = self.slack.pages(
                "conversations.history",
                channel,
                oldest=now - LOOKBACK_S,
                latest=now + 60,
                max_pages=PAGES_PER_CHANNEL,
            )
            try:
                async for page in pages:
                    for message in page:
                        found.add(message, channel)
            except SlackError as exc:
                if exc.retryable:
                    raise
                log.warning(
                    "state: cannot read the history of %s (%s): its threads are not found",
                    channel,
                    exc.error,
                )

    async def _lost(self, found: Found, now: float) -> None:
        highest = max(self._highest, found.highest)
        kept = await self.marker.record_loss(
            now, highest=highest, roots=found.roots, keep_s=FOUND_KEEP_S
        )
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
            kept,
            highest,
            GUIDE,
        )


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
