"""The requests stream's consumer: performs what people asked of queuepilot in Slack. Each request
is a lane of its own, so a slow backend never holds up another click; an entry taken over from a
consumer that died carries on that attempt, so a click acts once."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
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


def request_loop(
    stream: RequestStream, works: Mapping[str, Perform], *, config: Settings, consumer: str
) -> GroupLoop[Request]:
    """The leader's loop over the requests stream, performing each entry's work by its name."""

    async def perform(entries: list[Request]) -> None:
        for entry in entries:  # one: each request has a lane of its own
            work = works.get(entry.work) if entry.body is not None else None
            if work is None:
                await loop.bury(entry, entry.problem or f"no work is named {entry.work!r}")
                continue
            if (waited_ms := time.time() * 1000 - entry_ms(entry.id)) > STALE_MS:
                waited = f"{waited_ms / 60_000:.0f} min"
                await loop.bury(entry, f"{entry.work} taken {waited} after it was asked")
                continue
            attempt.set(entry.id)  # in this entry's task only
            what = f"entry {entry.id} ({entry.work})"
            # Once done, it is acknowledged again while Redis fails, never performed again.
            if await loop.retried(partial(work, entry.body), what, entry):
                await loop.retried(partial(stream.ack, entry.id), f"{what} done", entry)

    loop = GroupLoop(
        stream,
        perform,
        lane=lambda entry: entry.id,
        config=config,
        consumer=consumer,
        name="requests",
        max_in_flight=MAX_IN_FLIGHT,
    )
    return loop


def entry_ms(entry_id: str) -> int:
    """When Redis appended the entry (its ID's first part: the server's clock, in ms)."""
    return int(entry_id.split("-", 1)[0])
