"""A new incident's root, handed by this replica's intake to this replica's sender of its channel.

Why: a new group's root is the chain from an alert to Slack. The intake has just committed the
incident, so it holds the exact state the sender would read back; when the sender of that
channel runs in the same process, it can take the state from here and skip two round trips
(the queue's head, the incident). Redis stays the truth: the sender posts a hint only if one
script finds it is still exactly what its own reads would post next (`SendQueue.begin_root`),
and otherwise reads as usual. A hint lost (a crash, a sender elsewhere) costs nothing but
those two round trips.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bot.incidents import Incident

# The longest a sender waits for a commit it was told to expect: one Redis round trip, with a
# wide margin. Past it, the sender reads the queue as usual and the hint waits for its next post.
SETTLE_S = 0.05


@dataclass(frozen=True)
class RootHint:
    """An incident whose root a commit just queued, as committed, at `version`."""

    incident: Incident
    version: int


@dataclass
class _Channel:
    pending: set[asyncio.Future[RootHint | None]] = field(default_factory=set)
    latest: RootHint | None = None


class RootHints:
    """The hand-over, per channel, for the channels this replica sends to.

    The intake announces a commit that may queue a root (`expect`) and settles it with the
    committed state, or None if it did not apply. The sender's ring of the channel's bell (the
    same commit) can be read before the intake reads the commit's answer: `take` waits for
    announced commits to settle, briefly, so the sender sees the hint rather than racing it.
    """

    def __init__(self) -> None:
        self._channels: dict[str, _Channel] = {}

    def attach(self, channel: str) -> None:
        """This replica now sends to `channel`: hints for it are kept."""
        self._channels.setdefault(channel, _Channel())

    def detach(self, channel: str) -> None:
        slot = self._channels.pop(channel, None)
        if slot is not None:
            for pending in slot.pending:
                pending.cancel()

    def expect(self, channel: str) -> asyncio.Future[RootHint | None] | None:
        """A future for the intake to settle after its commit; None when no sender of
        `channel` runs here (its sender, elsewhere, reads the queue)."""
        slot = self._channels.get(channel)
        if slot is None:
            return None
        future: asyncio.Future[RootHint | None] = asyncio.get_running_loop().create_future()
        slot.pending.add(future)
        future.add_done_callback(lambda done: self._settled(slot, done))
        return future

    async def take(self, channel: str) -> RootHint | None:
        """The latest hint for `channel` (once), after the commits announced for it settle."""
        slot = self._channels.get(channel)
        if slot is None:
            return None
        if slot.pending:
            await asyncio.wait(set(slot.pending), timeout=SETTLE_S)
        hint, slot.latest = slot.latest, None
        return hint

    @staticmethod
    def _settled(slot: _Channel, future: asyncio.Future[RootHint | None]) -> None:
        slot.pending.discard(future)
        if not future.cancelled() and future.exception() is None:
            hint = future.result()
            if hint is not None:
                slot.latest = hint
