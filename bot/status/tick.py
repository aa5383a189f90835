"""Periodic status: every open incident gets a status each interval until its queue drains.

The leader's in-memory scheduler ticks often (`bot.periodic`, beside the silence watch); the due
times live in a Redis sorted set, so a new leader carries on where the last one stopped. A tick
that finds incidents due first takes the fleet's reading (`bot.fleet.readings`: one backend query
round per interval for every incident, never inside an incident's commit), then computes each due
incident's status and commits it fenced by the incident's version with the next due time. The
due incidents are claimed (`bot.storage.due_set`): the leader needs no claim against itself, but
a replica of 0.25 ticks beside it during a rolling upgrade, and the claim keeps the two from
giving one incident two statuses.

Each status also checks for a drained queue (`bot.domain.incident_fleet`): after
DRAIN_CHECKS drained checks in a row the incident resolves itself with its summary. A status
with nothing meaningful to say (`bot.domain.incidents.is_meaningful`) edits the previous status
reply instead of posting a new one.
Posting is the channel sender's job; a status still waiting for its slot when the next one is
due is replaced by it, never piled up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime

from redis.exceptions import RedisError

from bot.backends.errors import BackendError
from bot.config import Settings
from bot.domain.fleet import FleetSnapshot, HistoryPoint, Reading
from bot.domain.incident_fleet import (
    as_snapshot,
    drain_checks,
    incident_fleet,
)
from bot.domain.incidents import (
    Event,
    Incident,
    Snapshot,
    is_meaningful,
    record_status,
    resolve_drained,
    trend_end,
)
from bot.domain.message import Rendered
from bot.fleet.readings import FleetReadings
from bot.render.replies import STATUS_FALLBACK, StatusShown, summaries
from bot.storage.due_set import Claim
from bot.storage.incident_store import (
    BAND_EVENT,
    BAND_STATUS,
    RESTATUS,
    STATUS,
    STATUS_KINDS,
    Commit,
    DueRead,
    IncidentStore,
    Loaded,
    Reply,
    chart_reply,
    summary_replies,
)
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# How long a tick holds the statuses it claimed: they are computed and committed in a moment; a
# leader that dies meanwhile delays them by this much.
CLAIM_S = 30.0


class StatusReporter:
    def __init__(
        self,
        store: IncidentStore,
        readings: FleetReadings,
        telemetry: Telemetry,
        *,
        config: Settings,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._readings = readings
        self._telemetry = telemetry
        self._config = config
        self._routing = config.routing
        self._clock = clock

    async def tick(self) -> None:
        """Commit every status that is due; never raises.

        The due incidents are claimed in one round trip, read in another, and their commits go
        in a third, each still fenced by its own version: one whose incident moved on meanwhile
        is due again at once, decided afresh at the next tick.
        """
        due = self._store.status_due
        try:
            if not await due.pending(self._clock().timestamp()):
                return
            # Read once per tick, not per incident: the reading and the baselines' history; then
            # claimed, so the claims' leases need not outlast the backend's query.
            reading, history = await self._readings.current()
            claims = await due.due(self._clock().timestamp(), CLAIM_S)
            reads = await self._store.read_due([c.member for c in claims])
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        now = self._clock()
        decided: list[tuple[Claim, Commit]] = []
        for claim, read in zip(claims, reads, strict=True):
            # Each status is a millisecond of CPU: let webhooks and button clicks in between,
            # so a tick of many statuses never holds them up for the whole batch.
            await asyncio.sleep(0)
            async with self._guard(claim):
                commit = await self._status_of(claim, read, reading, history, now)
                if commit is not None:
                    decided.append((claim, commit))
        try:
            applied = await self._store.commit_many([c for _, c in decided], now=now.timestamp())
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        for (claim, commit), done in zip(decided, applied, strict=True):
            if done is True:
                self._count(commit)
                continue
            async with self._guard(claim):
                if isinstance(done, Exception):
                    raise done
                # The incident moved on since it was read (a notification, a click): due again
                # at once, and decided on what it became at the next tick.
                await self._store.status_due.reschedule(claim, self._clock().timestamp())

    @asynccontextmanager
    async def _guard(self, claim: Claim) -> AsyncIterator[None]:
        """One incident's failure is logged and retried later; it never stops the others."""
        try:
            yield
        except (BackendError, RedisError, TimeoutError) as exc:
            log.warning("status: incident %s: %s; retrying next tick", claim.member, exc)
            with suppress(RedisError):
                await self._store.status_due.reschedule(claim, self._clock().timestamp())
        except Exception:
            # One unreadable incident must not stop every other status post: push it back.
            log.exception("status: incident %s failed; postponed", claim.member)
            with suppress(RedisError):
                later = self._clock().timestamp() + self._config.status_interval_seconds
                await self._store.status_due.reschedule(claim, later)

    async def _status_of(
        self,
        claim: Claim,
        read: DueRead,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
    ) -> Commit | None:
        """The status commit of an incident as read, or None when none is due any more."""
        loaded = read.loaded()
        incident = loaded.incident
        if incident is None or not incident.is_open:
            await self._store.status_due.done(claim)
            return None
        if read.due_at != claim.token:
            return None  # due at another time since it was claimed: a commit set it anew
        view = incident_fleet(
            incident,
            reading,
            history,
            backend=self._readings.metrics.name,
            now=now,
            interval=self._readings.interval,
            routing=self._routing,
            within_mins=self._config.drain_target_minutes,
        )
        return await self._decide(loaded, incident, view, now)

    def _count(self, commit: Commit) -> None:
        if commit.stop_status:
            self._telemetry.incidents_resolved.labels("drained").inc()
        else:
            self._telemetry.status_posts.inc()

    async def _decide(
        self, loaded: Loaded, incident: Incident, view: FleetSnapshot, now: datetime
    ) -> Commit:
        current = as_snapshot(incident, view, now)
        needed = self._config.drain_checks
        checks = drain_checks(incident, view, self._config.drain_rule)
        # What the root and the status show of the backend: a live view, or why there is none.
        live = view if (view.is_live or view.note) else None
        if checks >= needed:
            return await self._drained(loaded, incident, current, live, now)
        posted = incident.posted_status
        quiet = not is_meaningful(posted, current) and incident.status_posts > 0
        updated = record_status(incident, current, live=live, drain_checks=checks, posted=not quiet)
        shown = StatusShown(
            current=current,
            previous=incident.last_status,
            live=live is not None,
            drain=(checks, needed) if checks else None,
            since=posted.at if quiet and posted else None,
        )
        # Rendered by the sender when it posts (`bot.render.replies.render_shown`): the text here
        # only names the reply while it waits, and is never posted.
        text = Rendered(STATUS_FALLBACK, [])
        kind = RESTATUS if quiet else STATUS
        replies = [Reply(kind, BAND_STATUS, text, replaces=STATUS_KINDS, extra=shown.to_extra())]
        # The status draws the trend in its blocks (and every Nth as a picture): the summary
        # leaves out what it would draw again.
        drawn = {"charted_at": trend_end(updated)}
        every = self._config.status_chart_every
        if every and view.is_live and updated.status_checks % every == 0:
            replies.append(chart_reply())
            drawn["pictured_at"] = drawn["charted_at"]
        updated = updated.model_copy(update=drawn)
        every_s = self._config.status_interval_seconds
        interval = self._config.drain_check_seconds if checks else every_s
        return Commit(
            updated,
            replies=tuple(replies),
            root=view.is_live or incident.live is not None,
            status_due=now.timestamp() + min(interval, every_s),
            version=loaded.version,
            thread=loaded.thread,
        )

    async def _drained(
        self,
        loaded: Loaded,
        incident: Incident,
        current: Snapshot,
        live: FleetSnapshot | None,
        now: datetime,
    ) -> Commit:
        recorded = record_status(incident, current, live=live, drain_checks=0, posted=False)
        resolved = resolve_drained(recorded, now=now)
        event = Event(at=now, kind="resolved", text="The queue drained: resolved automatically")
        events = [*await self._store.events(incident.id), event]
        return Commit(
            resolved,
            events=(event,),
            replies=summary_replies(BAND_EVENT, summaries(resolved, events, now=now), resolved),
            stop_status=True,
            version=loaded.version,
            thread=loaded.thread,
        )
