"""Periodic status: every open incident gets a status each interval until its queue drains.

Due times live in a Redis sorted set, so a new leader carries on where the last one stopped. A tick
that finds incidents due takes the fleet's reading once, decides each due incident's status and
commits it, fenced by the incident's version, with the next due time. The due incidents are
claimed because a 0.25 replica ticks beside the leader during a rolling upgrade. After DRAIN_CHECKS
drained checks in a row the incident resolves itself. A status is a new reply only for a material
change (`status_kind`); else it edits the last status reply in place while nothing was posted
below it, or says nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot import logs
from bot.backends.errors import BackendError
from bot.config import Settings
from bot.domain.fleet import HistoryPoint, Reading
from bot.domain.incident_fleet import DrainRule, as_snapshot, drain_checks, incident_fleet
from bot.domain.incidents import (
    Event,
    Incident,
    Snapshot,
    chart_moved,
    is_material,
    record_status,
    resolve_drained,
    status_spaced,
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

# How long a tick holds its claims: a leader that dies meanwhile delays them by this much.
CLAIM_S = 30.0


@dataclass(eq=False)
class StatusReporter:
    store: IncidentStore
    readings: FleetReadings
    telemetry: Telemetry
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]

    async def tick(self) -> None:
        """Commit every status that is due, in three round trips (claim, read, commit); one
        whose incident moved on meanwhile is due again at once. Never raises."""
        due = self.store.status_due
        try:
            if not await due.pending(self.clock().timestamp()):
                return
            # Read once per tick, before the claims, which then need not outlast the query.
            reading, history = await self.readings.current()
            claims = await due.due(self.clock().timestamp(), CLAIM_S)
            reads = await self.store.read_due([c.member for c in claims])
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        now = self.clock()
        decided: list[tuple[Claim, Commit]] = []
        for claim, read in zip(claims, reads, strict=True):
            # A millisecond of CPU each: let webhooks and clicks in between.
            await asyncio.sleep(0)
            with logs.about(claim.member):
                commit = await self._decided(claim, read, reading, history, now)
            if commit is not None:
                decided.append((claim, commit))
        try:
            applied = await self.store.commit_many([c for _, c in decided], now=now.timestamp())
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        for (claim, commit), done in zip(decided, applied, strict=True):
            if done is not True:
                # An error, or the incident moved on since it was read: decided afresh next tick.
                channel = commit.incident.channel if commit.incident is not None else None
                with logs.about(claim.member, channel=channel or None):
                    await self._again(claim, done if isinstance(done, Exception) else None)
            elif commit.stop_status:
                self.telemetry.incidents_resolved.labels("drained").inc()
            elif any(reply.kind == STATUS for reply in commit.replies):
                self.telemetry.status_posts.inc()

    async def _decided(
        self,
        claim: Claim,
        read: DueRead,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
    ) -> Commit | None:
        """A claimed incident's status to commit; None when there is none (put off, or done)."""
        try:
            loaded = read.loaded()
            if loaded.incident is None or not loaded.incident.is_open:
                await self.store.status_due.done(claim)
            elif read.due_at == claim.token:  # else a commit set it anew since the claim
                logs.tag(channel=loaded.incident.channel)
                return await self._decide(loaded, loaded.incident, reading, history, now)
        except (BackendError, RedisError, TimeoutError) as exc:
            await self._again(claim, exc)
        except Exception:
            log.exception("status: incident %s failed; postponed", claim.member)
            await self._again(claim, None, after=self.config.status_interval_seconds)
        return None

    async def _again(self, claim: Claim, failure: Exception | None, after: float = 0.0) -> None:
        if failure is not None:
            log.warning("status: incident %s: %s; retrying next tick", claim.member, failure)
        with suppress(RedisError):
            await self.store.status_due.reschedule(claim, self.clock().timestamp() + after)

    async def _decide(
        self,
        loaded: Loaded,
        incident: Incident,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
    ) -> Commit:
        view = incident_fleet(
            incident,
            reading,
            history,
            backend=self.readings.metrics.name,
            now=now,
            interval=self.readings.interval,
            routing=self.config.routing,
            within_mins=self.config.drain_target_minutes,
        )
        current = as_snapshot(incident, view, now)
        needed = self.config.drain_checks
        checks = drain_checks(incident, view, self.config.drain_rule)
        live = view if (view.is_live or view.note) else None
        if checks >= needed:
            drained = record_status(incident, current, live=live, drain_checks=0, posted=False)
            resolved = resolve_drained(drained, now=now)
            event = Event(at=now, kind="resolved", text="The queue drained: resolved automatically")
            events = [*await self.store.events(incident.id), event]
            return Commit(
                resolved,
                events=(event,),
                replies=summary_replies(BAND_EVENT, summaries(resolved, events, now=now), resolved),
                stop_status=True,
                version=loaded.version,
                thread=loaded.thread,
            )
        kind = status_kind(incident, current, self.config.drain_rule)
        posted = kind == STATUS
        updated = record_status(incident, current, live=live, drain_checks=checks, posted=posted)
        updated, replies = status_replies(
            incident,
            updated,
            kind,
            current,
            live=live is not None,
            drain=(checks, needed) if checks else None,
            pictures=bool(self.config.status_chart_every) and view.is_live,
        )
        every_s = self.config.status_interval_seconds
        interval = self.config.drain_check_seconds if checks else every_s
        return Commit(
            updated,
            replies=replies,
            root=view.is_live or incident.live is not None,
            status_due=now.timestamp() + min(interval, every_s),
            version=loaded.version,
            thread=loaded.thread,
        )


def status_kind(incident: Incident, current: Snapshot, drain: DrainRule) -> str | None:
    """A new status reply (STATUS) for the first status and for a material change a minute after
    the last (within it, nothing yet); else an edit of the last status reply (RESTATUS) while
    nothing was posted below it, which it would show newer numbers above; else nothing (None):
    the root shows the numbers."""
    posted = incident.posted_status
    if incident.status_posts == 0:
        return STATUS
    if is_material(posted, current, drain):
        return STATUS if status_spaced(posted, current) else None  # next check's, then
    return None if incident.replied_since_status else RESTATUS


def status_replies(
    incident: Incident,
    updated: Incident,
    kind: str | None,
    current: Snapshot,
    *,
    live: bool,
    drain: tuple[int, int] | None,
    pictures: bool,
) -> tuple[Incident, tuple[Reply, ...]]:
    """The status `kind` decided, compared with the last posted status; its chart drawn when the
    trend moved since the last one drawn (an edit keeps its reply's), as a picture too where
    `pictures` (charts refused as blocks), only with a new reply."""
    posted = incident.posted_status
    if kind is None or posted is None:
        return updated, ()
    edit = kind == RESTATUS
    chart = chart_moved(updated) or (edit and drew_at(incident, posted))
    shown = StatusShown(
        current=current,
        previous=posted,
        live=live,
        drain=drain,
        since=posted.at if edit else None,
        chart=chart,
    )
    # Rendered by the sender when it posts: this text only names the reply while it waits.
    text = Rendered(STATUS_FALLBACK, [])
    replies = [Reply(kind, BAND_STATUS, text, replaces=STATUS_KINDS, extra=shown.to_extra())]
    if chart:
        # The summary leaves out the trend the statuses drew already.
        updated = updated.model_copy(update={"charted_at": trend_end(updated)})
    if chart and pictures and not edit:
        replies.append(chart_reply())
        updated = updated.model_copy(update={"pictured_at": updated.charted_at})
    return updated, tuple(replies)


def drew_at(incident: Incident, posted: Snapshot) -> bool:
    """Whether the status reply that showed `posted` drew the chart (or a later edit of it)."""
    return incident.charted_at >= int(posted.at.timestamp())
