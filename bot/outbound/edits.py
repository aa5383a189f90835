"""The edit loops of a channel's sender: roots and early warnings brought to their latest state.

Each goes through `Desk.update` (the app-wide `chat.update` slot, the call, one reading of a
refusal) when its turn comes, so a burst of changes is one edit and an outage ends in the latest.
The storm digest's edits are `bot.outbound.storm`'s; a quiet status's, `bot.outbound.messages`'.
"""

from __future__ import annotations

import time

from bot.domain.message import digest_of
from bot.outbound.desk import Desk, ready
from bot.render.early_warning import render_warning
from bot.storage.connection import LONGEST_BLOCK_S
from bot.storage.due_set import DueSet
from bot.storage.early_warning import REFUSED, WarningStore


async def edit_root(desk: Desk, due: DueSet) -> None:
    """Edit the next root whose incident changed, at most once per `ROOT_EDIT_INTERVAL_MS` (the
    first edit after the post may follow at once). `due` is read without claims: the leader,
    holding the channel's lease, is its one reader."""
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
