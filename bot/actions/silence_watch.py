"""Noticing a silence that ended without us: it ran out, or someone removed it in the backend."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError

from bot.backends.http import BackendError, deadline_of, within
from bot.backends.silence import Silencer
from bot.config import Settings
from bot.domain.incidents import ActiveSilence, Event, Incident, unsilenced
from bot.render.replies import render_event
from bot.storage.due_set import Claim
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply

log = logging.getLogger(__name__)

# A silence that ended within this much of its planned end ran out; earlier, it was removed.
ON_TIME = timedelta(seconds=30)


@dataclass
class SilenceWatch:
    store: IncidentStore
    silencer: Silencer
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]

    async def tick(self) -> None:
        """Check every silence that is due; never raises."""
        try:
            due = await self.store.silence_watch.pending(self.clock().timestamp())
        except RedisError as exc:
            log.warning("silence watch: Redis unavailable: %s", exc)
            return
        for incident_id in due:
            try:
                await self.check(incident_id)
            except (RedisError, BackendError) as exc:
                log.warning("silence watch: incident %s: %s; retrying", incident_id, exc)
            except Exception:
                log.exception("silence watch: incident %s failed", incident_id)

    async def check(self, incident_id: str) -> None:
        lease_s = deadline_of(self.config.backend_timeout_seconds) + 5
        watch = self.store.silence_watch
        claim = await watch.claim(incident_id, self.clock().timestamp(), lease_s)
        if claim is None:
            return  # not due any more
        try:
            await self._check(claim)
        except Exception:
            # Due again at once, as before the claim (a no-op when the check rescheduled it).
            with suppress(RedisError):
                await watch.reschedule(claim, self.clock().timestamp())
            raise

    async def _check(self, claim: Claim) -> None:
        watch, incident_id = self.store.silence_watch, claim.member
        incident = (await self.store.load(incident_id)).incident
        if incident is None or incident.silence is None:
            await watch.done(claim)
            return
        seen, now = incident.silence, self.clock()
        check_s = self.config.silence_check_seconds
        try:
            timeout_s = self.config.backend_timeout_seconds
            state = await within(
                self.silencer.state(seen.silence_id), timeout_s, self.silencer.name
            )
        except BackendError:
            await watch.reschedule(claim, now.timestamp() + check_s)
            raise
        if state is not None and state.in_force:
            ends = state.ends_at or seen.until
            if abs((ends - seen.until).total_seconds()) > 1:
                # Someone changed its end in the backend: the root shows the real end.
                moved = seen.model_copy(update={"until": ends})
                await self._record(
                    incident_id,
                    seen,
                    lambda i, at: Commit(i.model_copy(update={"silence": moved, "updated_at": at})),
                )
            due = min(now.timestamp() + check_s, ends.timestamp())
            await watch.reschedule(claim, max(due, now.timestamp() + 1))
            return
        ended_at = state.ends_at if state is not None and state.ends_at else now
        if ended_at < seen.until - ON_TIME:
            text = f"Silence removed in {seen.backend}, outside Slack"
        else:
            text = "Silence ended: the alerts notify again"

        def ended(incident: Incident, at: datetime) -> Commit:
            event = Event(at=at, kind="unsilenced", text=text)
            updated = unsilenced(incident, now=at)
            reply = Reply("event", BAND_EVENT, render_event(updated, event))
            return Commit(updated, events=(event,), replies=(reply,))

        await self._record(incident_id, seen, ended)
        await watch.done(claim)

    async def _record(
        self, incident_id: str, seen: ActiveSilence, change: Callable[[Incident, datetime], Commit]
    ) -> None:
        def recorded(
            incident: Incident, now: datetime, _: list[Event]
        ) -> tuple[Commit | None, None]:
            if incident.silence != seen:
                return None, None  # someone acted on it meanwhile: their change stands
            return change(incident, now), None

        await self.store.commit_fresh(incident_id, recorded, clock=self.clock)
