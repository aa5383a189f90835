"""What a channel's sender works with (`Outbound`, `Post`), its one way to edit (`Desk.update`, in
the app-wide `chat.update` slot) and the loops that edit roots and early warnings to their latest
state: a burst of changes is one edit."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from bot.config import Settings
from bot.domain.incident.incidents import Incident
from bot.domain.message import Rendered, digest_of
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.early_warning import render_warning
from bot.render.root import render_root
from bot.storage.connection import LONGEST_BLOCK_S
from bot.storage.due_set import DueSet
from bot.storage.early_warning import REFUSED, WarningStore
from bot.storage.incident_store import IncidentStore
from bot.storage.send_queue import NoticeStore, SendQueue
from bot.storage.slack_cache import ChartDelivery
from bot.storage.storm_queue import StormQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Outbound:
    store: IncidentStore
    queue: SendQueue
    storms: StormQueue
    slack: SlackGateway
    telemetry: Telemetry
    charts: ChartDelivery
    notices: NoticeStore
    warnings: WarningStore | None  # None where early warnings are off
    config: Settings
    clock: Callable[[], datetime]


@dataclass(frozen=True)
class Upload:
    """A file shared into a thread (a chart's PNG, a postmortem's Markdown)."""

    data: bytes
    title: str
    alt: str = ""


@dataclass(frozen=True)
class Post:
    """One message a channel owes Slack, whatever its kind."""

    member: str  # its queue member, which its in-flight mark names: root:<id>, storm:<id>, ...
    item: str  # what it is, as its mark and its metadata name it
    incident_id: str  # "" for a channel message that is no incident's
    uid: str  # what its metadata names it by, with `item`
    thread_ts: str | None  # None for the channel itself
    # Drawn after any lookup and before the mark: what goes out is current, a failure costs none.
    draw: Callable[[], Awaitable[Rendered | Upload]]
    # In the channel at `ts`, with what was drawn; None when a lookup found an earlier attempt's.
    record: Callable[[str, Rendered | Upload | None], Awaitable[None]]
    # Refused for good (or failed three times): dropped, with a record.
    refuse: Callable[[str], Awaitable[None]]
    filename: str = ""  # a file's: files carry no metadata, a lookup finds them by name
    group: str = ""  # a root's alert group: found by it after Redis lost the state


async def _as_is(drawn: T) -> T:
    return drawn


def ready(rendered: T) -> Callable[[], Awaitable[T]]:
    """A `draw` for what is drawn already."""
    return partial(_as_is, rendered)


@dataclass(frozen=True)
class Desk:
    """One channel's sender: what its loops share, and its edits in the app's edit slot."""

    out: Outbound
    channel: str

    async def update(
        self, ts: str, draw: Callable[[], Awaitable[Rendered]], *, within_s: float | None = None
    ) -> tuple[Rendered, SlackError | None]:
        """Show at `ts` what `draw` gives once the `chat.update` slot is taken. Answers a refusal
        for good; raises one worth retrying, and past `within_s` what a 429 would."""
        slack = self.out.slack
        await slack.turn("chat.update", self.out.config.slack_update_interval_ms, within_s=within_s)
        rendered = await draw()
        try:
            await slack.call(
                "chat.update",
                channel=self.channel,
                ts=ts,
                text=rendered.text,
                blocks=rendered.blocks,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            return rendered, exc
        return rendered, None

    def root(self, incident: Incident, *, mentions: bool) -> Rendered:
        """The incident's root as it is now (the post without mentions, its edits with them)."""
        within = self.out.config.drain_target_minutes
        return render_root(incident, now=self.out.clock(), mentions=mentions, within_mins=within)

    def lost(self, what: str, error: str) -> None:
        """A message the channel keeps current can no longer be edited: an operator's concern."""
        log.error("sender %s: cannot edit %s: %s", self.channel, what, error)
        self.out.telemetry.slack_undeliverable.labels(error).inc()


async def edit_root(desk: Desk, due: DueSet) -> None:
    """Edit the next changed root, at most once per `ROOT_EDIT_INTERVAL_MS`. `due` needs no
    claims: the channel's sender is its one reader."""
    queue, channel, config = desk.out.queue, desk.channel, desk.out.config
    now_ms = int(time.time() * 1000)
    pending = await due.pending(now_ms, limit=1)
    if not pending:
        next_at = await due.next_due()
        wait = 1.0 if next_at is None else min(1.0, (next_at - now_ms) / 1000)
        await queue.wait_bell(queue.keys.edits_bell(channel), wait)
        return
    [incident_id] = pending
    loaded, edit_after_ms = await queue.edit_candidate(channel, incident_id)
    if loaded.incident is None or loaded.thread is None:
        await due.remove(incident_id)
        return
    root = desk.root(loaded.incident, mentions=True)
    digest = digest_of(root)
    edited = digest != loaded.rendered
    if edited and now_ms < edit_after_ms:
        await due.schedule(incident_id, edit_after_ms)
        return
    if edited:
        # One that can never be edited counts as shown: posting it again would make two roots.
        _, refused = await desk.update(loaded.thread.ts, ready(root))
        if refused is not None:
            desk.lost(f"incident {incident_id}'s root", refused.error)
    await queue.record_edit(
        channel,
        incident_id,
        version=loaded.version,
        digest=digest,
        next_at_ms=int(time.time() * 1000) + config.root_edit_interval_ms,
        edited=edited,
    )


async def edit_warnings(desk: Desk, warnings: WarningStore) -> None:
    """Edit the channel's posted early warnings to their latest version: a burst is one edit."""
    pending = await warnings.edits(desk.channel)
    if not pending:
        await warnings.wait_for_edits(desk.channel, LONGEST_BLOCK_S)
        return
    for runner_type in pending:
        state = await warnings.get(runner_type)
        if state is None or state.ts in ("", REFUSED) or state.channel != desk.channel:
            # Gone, or not posted yet (its post's record queues the edit again if needed).
            await warnings.discard_edit(desk.channel, runner_type)
            continue
        _, refused = await desk.update(state.ts, ready(render_warning(state)))
        if refused is not None:
            desk.lost(f"the early warning for {runner_type}", refused.error)
        # Shown, or never showable again: either way this version is done with.
        await warnings.record_edit(desk.channel, state)
