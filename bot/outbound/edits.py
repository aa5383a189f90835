"""Edits of what a channel already shows: root messages, a quiet status, the storm digest, the
early warnings.

Editing in place is how a thread stays current without new posts, so every edit takes one small
path (`Editor.update`): the app-wide `chat.update` slot (`bot.pacing`, at most one edit per
`SLACK_UPDATE_INTERVAL_MS`, after any `Retry-After` hold on it), the call, and one reading of a
refusal. Each channel's sender runs these loops beside its posts' (`bot.outbound.send`). A root
is edited from the incident's latest state at the moment of sending (`RootEdits`), so a burst of
changes is one edit and a Slack outage ends with the latest state, never a replay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from bot.config import Settings
from bot.domain.message import Rendered, digest_of
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.early_warning import render_warning
from bot.render.root import render_root
from bot.storage.connection import LONGEST_BLOCK_S
from bot.storage.early_warning import REFUSED, WarningStore
from bot.storage.send_queue import SendQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)


class Editor:
    """Edits one channel's messages, in the app's edit slots."""

    def __init__(
        self, channel: str, slack: SlackGateway, telemetry: Telemetry, interval_ms: int
    ) -> None:
        self.channel = channel
        self._slack = slack
        self._telemetry = telemetry
        self._interval_ms = interval_ms

    async def _slot(self, within_s: float | None) -> None:
        """Wait for, and take, the app's `chat.update` slot, after any hold on it. With
        `within_s`, give up rather than wait longer, with the error a 429 would raise: the
        posts' path must not wait out an edit's hold."""
        turn = await self._slack.pacing.wait_for_slot(
            "chat.update", self._interval_ms, within_s=within_s
        )
        if not turn.taken:
            raise SlackError(
                "chat.update", "ratelimited", retryable=True, retry_after=turn.retry_after_s
            )

    async def update(
        self, ts: str, rendered: Rendered, *, within_s: float | None = None
    ) -> SlackError | None:
        """Show `rendered` in the message at `ts`. None when it does; Slack's refusal when the
        message can never be edited so (deleted, the channel archived, a block refused). A
        failure worth retrying raises, for the caller's loop to retry; so does an edit slot not
        had within `within_s`, when given."""
        await self._slot(within_s)
        return await self._call(ts, rendered)

    async def redraw(
        self, ts: str, draw: Callable[[], Awaitable[Rendered]], *, within_s: float | None = None
    ) -> tuple[Rendered, SlackError | None]:
        """`update`, drawn only once the edit slot is taken: what the edit shows is what holds
        when it goes out, however long the app-wide slot took (the storm digest places waiting
        groups in its message as it draws, and must not hold them unseen meanwhile)."""
        await self._slot(within_s)
        rendered = await draw()
        return rendered, await self._call(ts, rendered)

    async def _call(self, ts: str, rendered: Rendered) -> SlackError | None:
        try:
            await self._slack.update(self.channel, ts, rendered.text, rendered.blocks)
        except SlackError as exc:
            if exc.retryable:
                raise
            return exc
        return None

    def lost(self, what: str, error: str) -> None:
        """A message the channel keeps current can no longer be edited: an operator's concern."""
        log.error("sender %s: cannot edit %s: %s", self.channel, what, error)
        self._telemetry.slack_undeliverable.labels(error).inc()


class RootEdits:
    """The channel's root messages, each edited when its incident changed, at most once per
    `ROOT_EDIT_INTERVAL_MS` (the first edit after the post may follow at once)."""

    def __init__(
        self,
        channel: str,
        queue: SendQueue,
        editor: Editor,
        *,
        config: Settings,
        clock: Callable[[], datetime],
    ) -> None:
        self.channel = channel
        self._queue = queue
        # Read without claims: the leader, holding the channel's lease, is their one reader.
        self._due = queue.root_edits(channel)
        self._editor = editor
        self._interval_ms = config.root_edit_interval_ms
        self._within_mins = config.drain_target_minutes  # the drain target of the root's advice
        self._clock = clock

    async def step(self) -> None:
        now_ms = int(time.time() * 1000)
        due = await self._due.pending(now_ms, limit=1)
        if not due:
            next_at = await self._due.next_due()
            wait = 1.0 if next_at is None else min(1.0, (next_at - now_ms) / 1000)
            await self._queue.wait_bell(self._queue.keys.edits_bell(self.channel), wait)
            return
        [incident_id] = due
        loaded, edit_after_ms = await self._queue.edit_candidate(self.channel, incident_id)
        if loaded.incident is None or loaded.thread is None:
            await self._due.remove(incident_id)
            return
        root = render_root(
            loaded.incident, now=self._clock(), mentions=True, within_mins=self._within_mins
        )
        digest = digest_of(root)
        edited = digest != loaded.rendered
        if edited and now_ms < edit_after_ms:
            await self._due.schedule(incident_id, edit_after_ms)
            return
        if edited:
            # A root that can never be edited is recorded as shown all the same: posting it
            # again would make a second root.
            refused = await self._editor.update(loaded.thread.ts, root)
            if refused is not None:
                self._editor.lost(f"incident {incident_id}'s root", refused.error)
        await self._queue.record_edit(
            self.channel,
            incident_id,
            version=loaded.version,
            digest=digest,
            next_at_ms=int(time.time() * 1000) + self._interval_ms,
            edited=edited,
        )


class WarningEdits:
    """The channel's early warnings, each edited to its latest version once posted (its forecast
    moved, it cleared, the alert fired, someone dismissed it): a burst of changes is one edit."""

    def __init__(self, channel: str, warnings: WarningStore, editor: Editor) -> None:
        self.channel = channel
        self._warnings = warnings
        self._editor = editor

    async def step(self) -> None:
        pending = await self._warnings.edits(self.channel)
        if not pending:
            await self._warnings.wait_for_edits(self.channel, LONGEST_BLOCK_S)
            return
        for runner_type in pending:
            state = await self._warnings.get(runner_type)
            if state is None or state.ts in ("", REFUSED) or state.channel != self.channel:
                # Gone, or not posted yet (its post's record queues the edit again if needed).
                await self._warnings.discard_edit(self.channel, runner_type)
                continue
            refused = await self._editor.update(state.ts, render_warning(state))
            if refused is not None:
                self._editor.lost(f"the early warning for {runner_type}", refused.error)
            # Shown, or never showable again: either way this version is done with.
            await self._warnings.record_edit(self.channel, state)
