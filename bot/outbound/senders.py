"""Which replica sends to which channel: every replica competes for each channel's lease.

The replica that holds a channel's lease runs its `ChannelSender`, renewing the lease while it
runs; the others try again every fifth of the lease TTL, so a dead sender is replaced within
about one TTL. A sender whose lease is lost (it stalled, or Redis lost the key) stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress

from redis.exceptions import RedisError

from bot.outbound.sender import ChannelSender
from bot.outbound.stages import LostLease
from bot.storage.keys import Keys
from bot.storage.leases import Lease, Leases

log = logging.getLogger(__name__)

# A channel's sender renews its lease within this; another replica takes over once it lapses.
LEASE_TTL_MS = 5000


class Senders:
    """Every replica runs one: it leads each channel it can get the lease of, and follows the
    others, ready to take over within about one lease TTL when their sender dies."""

    def __init__(
        self,
        channels: Callable[[], Awaitable[list[str]]],
        make: Callable[[str, Lease], ChannelSender],
        leases: Leases,
        keys: Keys,
        *,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self._channels = channels
        self._make = make
        self._leases = leases
        self._keys = keys
        self._ttl_ms = lease_ttl_ms
        self._led: dict[str, asyncio.Task[None]] = {}

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    for channel in await self._channels():
                        if channel not in self._led:
                            await self._try_lead(channel)
                except RedisError as exc:
                    log.warning("senders: Redis unavailable: %s", exc)
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self._ttl_ms / 5000)
        finally:
            await self.stop()

    async def _try_lead(self, channel: str) -> None:
        lease = await self._leases.try_acquire(self._keys.sender_lease(channel), self._ttl_ms)
        if lease is None:
            return
        log.info("senders: this replica now sends to %s", channel)
        task = asyncio.create_task(self._lead(channel, lease), name=f"sender:{channel}")
        self._led[channel] = task
        task.add_done_callback(lambda _: self._led.pop(channel, None))

    async def _lead(self, channel: str, lease: Lease) -> None:
        sender = asyncio.create_task(self._make(channel, lease).run())
        try:
            while not sender.done():
                done, _ = await asyncio.wait({sender}, timeout=self._ttl_ms / 3000)
                if done:
                    break
                try:
                    if not await self._leases.renew(lease, self._ttl_ms):
                        # Expired (this replica stalled) or gone (Redis lost it): whoever holds
                        # it now sends; this replica competes for it again next round.
                        log.warning("senders: stopped sending to %s: its lease is lost", channel)
                        break
                except RedisError as exc:
                    log.warning("senders: cannot renew %s (%s)", channel, exc)
        finally:
            sender.cancel()
            (outcome,) = await asyncio.gather(sender, return_exceptions=True)
            if isinstance(outcome, LostLease):
                log.warning("senders: stopped sending to %s: its lease is lost", channel)
            elif isinstance(outcome, Exception):
                log.error("senders: the sender of %s failed: %r", channel, outcome)
            with suppress(RedisError):
                await self._leases.release(lease)

    async def stop(self) -> None:
        tasks = list(self._led.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
