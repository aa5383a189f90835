"""The per-channel sender: the one writer of incident messages in a Slack channel.

Whoever changes an incident commits what Slack must show (`bot.storage.incident_store`) and is
done; for each channel one replica at a time, holding the channel's lease, drains its queue
(`bot.storage.send_queue`). Every post goes through the same stages, composed here in order
(`bot.outbound.stages`: pace, select, storm gate, read, look up, prepare, mark, send); what a
queue member stands for is its kind's reader's to say (`bot.outbound.kinds`).

Edits of what is already posted (root messages, a quiet status, the digest, early warnings) take
their own, smaller path (`bot.outbound.edits`), each in a loop of its own beside the posts'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot.backoff import Backoff
from bot.config import Settings
from bot.outbound.budget import Budget
from bot.outbound.edits import Editor, RootEdits, WarningEdits
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.kinds import ROOT, Notices, Reader, Replies, Roots, Strays, Warnings
from bot.outbound.outgoing import Ledger
from bot.outbound.permalinks import Permalinks
from bot.outbound.stages import (
    LookUp,
    Mark,
    Pipeline,
    Prepare,
    Read,
    Send,
    StormGate,
    Strikes,
    Struck,
)
from bot.outbound.storm import StormDigest
from bot.storage.chart_delivery import ChartDelivery
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import IncidentStore
from bot.storage.leases import Lease
from bot.storage.notices import NoticeStore
from bot.storage.send_queue import SendQueue
from bot.storage.storm_queue import StormQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# A sender's waits after failures grow to this at most.
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True, kw_only=True)
class Outbound:
    """What every channel's sender on a replica shares: built once by the composition root,
    which hands `sender` to `bot.outbound.senders.Senders`."""

    store: IncidentStore
    queue: SendQueue
    storms: StormQueue
    slack: SlackGateway
    permalinks: Permalinks
    telemetry: Telemetry
    charts: ChartDelivery
    notices: NoticeStore
    warnings: WarningStore | None  # None where early warnings are off
    config: Settings
    clock: Callable[[], datetime]

    def sender(self, channel: str, lease: Lease) -> ChannelSender:
        return ChannelSender(channel, lease, self)


class ChannelSender:
    """Drains one channel's queue while `lease` is held; see the module docstring."""

    def __init__(self, channel: str, lease: Lease, shared: Outbound) -> None:
        self.channel = channel
        config = shared.config
        self._queue = shared.queue
        self._budget = budget = Budget(
            shared.slack.pacing,
            post_interval_s=config.slack_post_interval_ms / 1000,
            post_burst=config.slack_post_burst,
            update_interval_ms=config.slack_update_interval_ms,
        )
        ledger = Ledger(channel, shared.queue, shared.storms, shared.telemetry)
        editor = Editor(channel, shared.slack, budget, shared.telemetry)
        self._root_edits = RootEdits(
            channel,
            shared.queue,
            editor,
            interval_ms=config.root_edit_interval_ms,
            within_mins=config.drain_target_minutes,
            clock=shared.clock,
        )
        # Early warnings' edits: a loop of their own, only where early warnings are on.
        self._warning_edits = (
            WarningEdits(channel, shared.warnings, editor) if shared.warnings else None
        )
        self._storm = StormDigest(
            channel,
            editor,
            storms=shared.storms,
            store=shared.store,
            permalinks=shared.permalinks,
            telemetry=shared.telemetry,
            config=config,
            clock=shared.clock,
        )
        read = Read(_readers(channel, shared, ledger, editor), Strays(channel, shared.queue))
        self._pipeline = Pipeline(
            channel,
            budget,
            shared.queue,
            stages=(
                StormGate(channel, self._storm, shared.queue),
                read,
                LookUp(channel, shared.slack, ledger, budget, shared.telemetry),
                Prepare(),
                Mark(channel, shared.queue, lease.token),
                Send(channel, shared.slack, budget, shared.queue, shared.charts, ledger),
            ),
            strikes=Strikes(channel, read, ledger),
        )

    async def run(self) -> None:
        await self._budget.take_over(await self._queue.bucket(self.channel))
        loops = [self._loop(self._post_next), self._loop(self._root_edits.step)]
        if self._warning_edits is not None:
            loops.append(self._loop(self._warning_edits.step))
        if self._storm.enabled:
            loops.append(self._loop(self._storm.step))
        await asyncio.gather(*loops)

    async def _loop(self, step: Callable[[], Awaitable[None]]) -> None:
        backoff = Backoff(BACKOFF_MAX_S)
        while True:
            # A cancel swallowed below still counts on the task: honoured here, or the sender
            # outlives its replica's shutdown (a cancel that lands in redis-py's blocking read of
            # the bell can be swallowed there, and the event loop would never close).
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError
            try:
                await step()
                backoff.reset()
            except SlackError as exc:
                self._budget.hold(exc)
                wait = exc.retry_after if exc.retry_after is not None else backoff.next()
                log.warning("sender %s: Slack %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except RedisError as exc:
                wait = backoff.next()
                log.warning("sender %s: Redis %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except Struck:
                await asyncio.sleep(backoff.next())

    async def _post_next(self) -> None:
        if not await self._pipeline.next():
            await self._queue.wait_bell(self._queue.keys.posts_bell(self.channel), 1.0)


def _readers(channel: str, shared: Outbound, ledger: Ledger, editor: Editor) -> dict[str, Reader]:
    """The reader of each kind of queue member this replica sends."""
    config = shared.config
    readers: dict[str, Reader] = {
        ROOT: Roots(
            channel, shared.store, shared.queue, ledger, shared.clock, config.drain_target_minutes
        ),
        "replies": Replies(
            channel,
            shared.store,
            shared.queue,
            ledger,
            shared.charts,
            editor,
            shared.clock,
            # An edit slot is a moment away unless Slack holds edits: a few intervals at most.
            edit_patience_s=2 * config.slack_update_interval_ms / 1000,
        ),
        "notice": Notices(channel, shared.notices, shared.charts, ledger),
    }
    if shared.warnings is not None:
        readers["warning"] = Warnings(channel, shared.warnings, ledger)
    return readers
