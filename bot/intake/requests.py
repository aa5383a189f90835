"""The requests stream's consumer: performs what people asked of queuepilot in Slack. Each request
is a lane of its own, so a slow backend never holds up another click; an entry taken over from a
consumer that died carries on that attempt, so a click acts once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from functools import partial
from typing import Any

from bot.config import Settings
from bot.intake.group_loop import GroupLoop
from bot.storage.interactions import attempt
from bot.storage.requests import Request, RequestStream

# A request's work (its listener's), done with the Slack body the listener was handed.
Perform = Callable[[dict[str, Any]], Awaitable[None]]
# A crowd clicking at once waits here for its turn, not in the Redis pool for a connection.
MAX_IN_FLIGHT = 64
# Past this a click is not performed: its reply can no longer reach the person (Slack's
# response_url answers for 30 minutes), and a silence or a scale-up hours late surprises.
STALE_MS = 30 * 60 * 1000


@dataclass(eq=False)
class Requests:
    stream: RequestStream
    works: Mapping[str, Perform]
    _: KW_ONLY
    config: Settings
    consumer: str

    def __post_init__(self) -> None:
        self._loop = GroupLoop(
            self.stream,
            self._perform_all,
            lane=lambda entry: entry.id,
            config=self.config,
            consumer=self.consumer,
            name="requests",
            max_in_flight=MAX_IN_FLIGHT,
        )

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        await self._loop.run(stop, take_over_ms=take_over_ms)

    async def _perform_all(self, entries: list[Request]) -> None:
        for entry in entries:  # one: each request has a lane of its own
            work = self.works.get(entry.work) if entry.body is not None else None
            if work is None:
                await self._loop.bury(entry, entry.problem or f"no work is named {entry.work!r}")
                continue
            if (waited_ms := time.time() * 1000 - entry_ms(entry.id)) > STALE_MS:
                waited = f"{waited_ms / 60_000:.0f} min"
                await self._loop.bury(entry, f"{entry.work} taken {waited} after it was asked")
                continue
            attempt.set(entry.id)  # in this entry's task only
            what = f"entry {entry.id} ({entry.work})"
            # Once done, it is acknowledged again while Redis fails, never performed again.
            if await self._loop.retried(partial(work, entry.body), what, entry):
                await self._loop.retried(partial(self.stream.ack, entry.id), f"{what} done", entry)


def entry_ms(entry_id: str) -> int:
    """When Redis appended the entry (its ID's first part: the server's clock, in ms)."""
    return int(entry_id.split("-", 1)[0])
