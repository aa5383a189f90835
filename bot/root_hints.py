"""A new incident's root, handed by this replica's intake to this replica's sender of its channel.

Why: a new group's root is the chain from an alert to Slack. The intake has just committed the
incident, so it holds the exact state the sender would read back; when the sender of that
channel runs in the same process, it can take the state from here and skip two round trips
(the queue's head, the incident). Redis stays the truth: the sender posts a hint only if one
script finds it is still exactly what its own reads would post next (`SendQueue.begin_root`),
and otherwise reads as usual. A hint lost (a crash, a sender elsewhere) costs nothing but
those two round trips.

The commit itself can do that script's work: told the sender's lease (`mark`), it marks the new
root in flight when it is what the sender would post next, and the sender then posts without a
round trip of its own. The lease must outlive the mark by `LEASE_MARGIN_MS`, and the sender posts
from a marked hint only within `MARK_FRESH_S` of the commit: no other replica can take the
channel over, and post the same root, meanwhile. Past that, the sender reads the queue, finds
the mark, and looks the root up in Slack before posting it, as after any interrupted attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from bot.incidents import Incident
from bot.messages import render_root
from bot.mrkdwn import Rendered
from bot.send_queue import InFlight
from bot.store import RootMark

log = logging.getLogger(__name__)

# The longest a sender waits for a commit it was told to expect: one Redis round trip, with a
# wide margin. Past it, the sender reads the queue as usual and the hint waits for its next post.
SETTLE_S = 0.05
# A commit marks a root in flight only while the sender's lease has this long left to live
# (renewed every third of its 5 s), and the sender posts from the mark only this soon after it.
LEASE_MARGIN_MS = 2000
MARK_FRESH_S = 0.5


@dataclass(frozen=True)
class RootHint:
    """An incident whose root a commit just queued, as committed, at `version`; `marked_at`
    (monotonic, taken before the commit) when the commit marked the root in flight, and the
    root as the intake rendered it while the commit was in flight."""

    incident: Incident
    version: int
    marked_at: float | None = None
    root: Rendered | None = None

    def fresh(self) -> bool:
        """Marked, and recently enough to post from the mark (see the module docstring)."""
        return self.marked_at is not None and time.monotonic() - self.marked_at < MARK_FRESH_S


@dataclass(frozen=True)
class Sending:
    """What a commit needs to mark a root in flight for this replica's sender of a channel."""

    lease_token: str
    storm_threshold: int  # 0: no storm digest


@dataclass
class _Channel:
    sending: Sending | None = None
    pending: set[asyncio.Future[RootHint | None]] = field(default_factory=set)
    latest: RootHint | None = None


def rendered_root(incident: Incident, now: datetime) -> Rendered | None:
    """The root as the sender would post it, for a hint; None if rendering fails (a bug): the
    sender then renders it itself, and the commit is never held up by it."""
    try:
        return render_root(incident, now=now, mentions=False)
    except Exception:
        log.exception("intake: rendering the root of %s failed", incident.id)
        return None


def settle(
    hint: asyncio.Future[RootHint | None],
    incident: Incident,
    version: int | None,
    *,
    marked_at: float | None = None,
    root: Rendered | None = None,
) -> None:
    """Settle an announced commit (`RootHints.expect`): the incident as committed at `version`
    (None or 0: nothing opened, and the sender reads its queue), marked in flight at
    `marked_at` with the root rendered meanwhile, or not marked."""
    if hint.done():  # its sender may have stopped meanwhile
        return
    if not version:
        hint.set_result(None)
    elif marked_at is not None:
        hint.set_result(RootHint(incident, version, marked_at, root))
    else:
        hint.set_result(RootHint(incident, version))


class RootHints:
    """The hand-over, per channel, for the channels this replica sends to.

    The intake announces a commit that may queue a root (`expect`) and settles it with the
    committed state, or None if it did not apply. The sender's ring of the channel's bell (the
    same commit) can be read before the intake reads the commit's answer: `take` waits for
    announced commits to settle, briefly, so the sender sees the hint rather than racing it.
    """

    def __init__(self) -> None:
        self._channels: dict[str, _Channel] = {}

    def attach(self, channel: str, sending: Sending | None = None) -> None:
        """This replica now sends to `channel`: hints for it are kept (and, with `sending`,
        commits may mark its new roots in flight)."""
        self._channels.setdefault(channel, _Channel(sending))

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

    def mark(self, channel: str, incident_id: str) -> RootMark | None:
        """What a commit opening `incident_id` needs to mark its root in flight, if this
        replica sends to `channel`."""
        slot = self._channels.get(channel)
        if slot is None or slot.sending is None:
            return None
        marker = InFlight(f"root:{incident_id}", "root", time.time())
        return RootMark(
            lease_token=slot.sending.lease_token,
            marker=marker.encode(),
            storm_threshold=slot.sending.storm_threshold,
            lease_margin_ms=LEASE_MARGIN_MS,
        )

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
            # A marked root heads the queue: it is the next post, whatever settles after it.
            if hint is not None and (slot.latest is None or slot.latest.marked_at is None):
                slot.latest = hint
