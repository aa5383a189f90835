"""Make Slack show an incident: its thread opened once, its root kept current, its replies posted.

The incident in Redis is the truth and Slack converges to it. Callers change state, queue replies
in the incident's outbox, then call `sync`; if a Slack call fails half-way, the next sync (the next
notification, status tick or action, on any replica) finishes the job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from datetime import datetime

from bot.incidents import Incident
from bot.messages import Rendered, render_root
from bot.slack import SlackError, SlackGateway
from bot.store import IncidentStore, ThreadRef

log = logging.getLogger(__name__)

# How long a claim to post the root message stands without the posted message's location. Live
# posters also hold the group's lease, so this only matters when a replica died mid-post: then
# we cannot know whether Slack got the message, and after this long we post (a rare duplicate
# root beats an incident without a thread).
THREAD_CLAIM_TTL_MS = 10_000


class Threads:
    def __init__(
        self,
        store: IncidentStore,
        slack: SlackGateway,
        *,
        channel: str,
        clock: Callable[[], datetime],
        edit_interval_ms: int = 2000,
    ) -> None:
        self._store = store
        self._slack = slack
        self._channel = channel
        self._clock = clock
        self._edit_interval_ms = edit_interval_ms

    async def sync(self, incident: Incident) -> ThreadRef | None:
        """Bring the thread up to date; returns where it is, or None if it is not posted yet.

        When Slack fails on the way, the incident is marked unsynced, so that the status tick
        finishes the job even if nothing else happens to the incident (a resolved one, say).
        """
        try:
            ref = await self._sync(incident)
        except SlackError as exc:
            if exc.retryable:
                await self._store.mark_unsynced(incident.id)
            else:
                # Permanent (the bot is not in the channel, say): the tick must not retry it
                # every few seconds; the incident's next change tries again.
                await self._store.mark_synced(incident.id)
            raise
        if ref is None:
            await self._store.mark_unsynced(incident.id)
        else:
            await self._store.mark_synced(incident.id)
        return ref

    async def _sync(self, incident: Incident) -> ThreadRef | None:
        """The thread's location once everything is posted; None while something waits."""
        ref = await self._store.thread(incident.id)
        root = render_root(incident, now=self._clock())
        if ref is None:
            ref = await self._open(incident, root)
            current = ref is not None
        else:
            current = await self._refresh_root(incident, ref, root)
        if ref is not None:
            await self._drain_outbox(incident, ref)
        return ref if current else None

    async def _open(self, incident: Incident, root: Rendered) -> ThreadRef | None:
        token = secrets.token_hex(8)
        if not await self._store.claim_thread(incident.id, token, ttl_ms=THREAD_CLAIM_TTL_MS):
            log.info("incident %s: its thread is claimed by another poster; retrying", incident.id)
            return None
        try:
            ts = await self._slack.post(self._channel, root.text, root.blocks)
        except SlackError as exc:
            if not exc.uncertain:
                await self._store.release_thread_claim(incident.id, token)
            raise
        ref = ThreadRef(channel=self._channel, ts=ts)
        await self._store.set_thread(incident.id, ref)
        await self._store.set_rendered_digest(incident.id, _digest(root))
        log.info("incident %s: opened thread %s in %s", incident.id, ts, self._channel)
        return ref

    async def _refresh_root(self, incident: Incident, ref: ThreadRef, root: Rendered) -> bool:
        """Edit the root if its rendering changed; False when the edit had to wait its turn.

        Edits of one root are at least `edit_interval_ms` apart: a burst of re-notifications
        (an HA Grafana pair, a flapping alert) becomes one edit showing the latest state, made by
        the status tick, instead of a queue of stale edits that delays every other incident.
        """
        digest = _digest(root)
        if digest == await self._store.rendered_digest(incident.id):
            return True
        if not await self._store.take_edit_slot(incident.id, self._edit_interval_ms):
            return False
        try:
            await self._slack.update(ref.channel, ref.ts, root.text, root.blocks)
        except SlackError as exc:
            if exc.retryable:
                raise
            # The root was deleted or the channel archived: editing will never work again, and
            # re-posting would be a second root. Record the render so we don't try each tick.
            log.error("incident %s: cannot edit root message: %s", incident.id, exc.error)
        await self._store.set_rendered_digest(incident.id, digest)
        return True

    async def _drain_outbox(self, incident: Incident, ref: ThreadRef) -> None:
        while (item := await self._store.next_reply(incident.id)) is not None:
            try:
                await self._slack.post(ref.channel, item.text, item.blocks, thread_ts=ref.ts)
            except SlackError as exc:
                if exc.retryable:
                    raise
                log.error("incident %s: dropped a thread reply: %s", incident.id, exc.error)
            await self._store.pop_reply(incident.id, item)


def _digest(rendered: Rendered) -> str:
    payload = json.dumps({"text": rendered.text, "blocks": rendered.blocks}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()
