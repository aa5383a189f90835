"""The requests stream's consumer: performs what people asked of queuepilot in Slack.

The replica Slack reached answered at once and appended the request (`bot.storage.requests`);
here its work (the listener's, from the composition root's table) runs with the Slack body, then
the entry is acknowledged. Each request is a lane of its own (`bot.intake.group_loop`), so a slow
backend never holds up a click on another incident. An entry taken over from a consumer that died
carries on that attempt (`bot.storage.interactions.attempt`), so a click acts once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from redis.exceptions import RedisError

from bot.backoff import Backoff
from bot.config import Settings
from bot.intake.group_loop import GroupLoop, sleep_or_stop
from bot.storage.interactions import attempt
from bot.storage.leader import Deposed
from bot.storage.requests import Request, RequestStream

log = logging.getLogger(__name__)

# A request's work (its listener's), done with the Slack body the listener was handed.
Perform = Callable[[dict[str, Any]], Awaitable[None]]
# A crowd clicking at once waits here for its turn, not in the Redis pool for a connection.
MAX_IN_FLIGHT = 64


class Requests:
    def __init__(
        self,
        stream: RequestStream,
        works: Mapping[str, Perform],
        *,
        config: Settings,
        consumer: str,
    ) -> None:
        self._stream = stream
        self._works = works
        self._config = config
        self._stop = asyncio.Event()
        self._loop = GroupLoop(
            stream,
            self._perform_all,
            lane=lambda entry: entry.id,
            config=config,
            consumer=consumer,
            name="requests",
            max_in_flight=MAX_IN_FLIGHT,
        )

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        self._stop = stop
        await self._loop.run(stop, take_over_ms=take_over_ms)

    async def _perform_all(self, entries: list[Request]) -> None:
        for entry in entries:  # one: each request has a lane, and so a task, of its own
            await self.perform(entry)

    async def perform(self, entry: Request) -> None:
        work = self._works.get(entry.work) if entry.body is not None else None
        if work is None:
            await self._loop.bury(entry, entry.problem or f"no work is named {entry.work!r}")
            return
        attempt.set(entry.id)  # in this entry's task only
        if await self._done(entry, work):
            await self._acknowledge(entry)

    async def _done(self, entry: Request, work: Perform) -> bool:
        """Whether the work was done: retried while Redis fails, buried after `max_attempts`
        other failures (a bug costs one request, never the consumer)."""
        assert entry.body is not None
        backoff, errors = Backoff(1.0, first=0.05), 0
        while not self._stop.is_set():
            try:
                await work(entry.body)
                return True
            except Deposed:
                # This term is over: the next one carries the request on (done again now, it
                # would call a backend a second time for one click).
                return False
            except RedisError as exc:
                log.warning("requests: entry %s: Redis failed (%s); retrying", entry.id, exc)
            except Exception as exc:
                errors += 1
                log.exception("requests: entry %s (%s) failed (%d)", entry.id, entry.work, errors)
                if errors >= self._config.intake_max_attempts:
                    await self._loop.bury(entry, f"failed {errors} times: {type(exc).__name__}")
                    return False
            await sleep_or_stop(self._stop, backoff.next())
        return False

    async def _acknowledge(self, entry: Request) -> None:
        """While Redis fails it is acknowledged again, not performed again; a consumer stopping
        meanwhile leaves it to whoever takes it over."""
        backoff = Backoff(1.0, first=0.05)
        while True:
            try:
                await self._stream.ack(entry.id)
                return
            except RedisError as exc:
                if self._stop.is_set():
                    return
                log.warning("requests: entry %s done, not acknowledged (%s)", entry.id, exc)
            await sleep_or_stop(self._stop, backoff.next())
