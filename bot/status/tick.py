"""Periodic status: every open incident gets a status each interval until its queue drains.

After DRAIN_CHECKS drained checks in a row the incident resolves itself, as one whose alert cleared
while jobs still queued does once they are under its thresholds or DRAIN_FOLLOW_MAX has passed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError

from bot import logs
from bot.backends.http import BackendError
from bot.config import Settings
from bot.domain.incident.incident_fleet import as_snapshot, drain_checks, follow_ended
from bot.domain.incident.incidents import (
    STATUS_SPACING,
    DrainRule,
    Event,
    Incident,
    QueueCost,
    Snapshot,
    chart_moved,
    is_material,
    record_status,
    resolve_drained,
    shown_now,
    status_spaced,
    trend_end,
    with_bought,
    with_live,
)
from bot.domain.message import Rendered
from bot.domain.queue_cost.cost import counted_cost
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, Reading
from bot.fleet.cost import Costed, CostReader
from bot.fleet.readings import FleetReadings
from bot.render.numbers import source_note, type_lines
from bot.render.replies import STATUS_FALLBACK, StatusShown, drained_said, summaries
from bot.status.follow_ups import not_come, settled
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

NEVER = datetime.min.replace(tzinfo=UTC)
ROOTS_PER_TICK = 100  # views brought to a new reading per tick, as the due set hands out statuses
# Up to this many open incidents each root is edited to every reading; beyond, only for news.
ROOTS_FOLLOWING_EVERY_READING = 20
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
    # What the scaler shows of scale-ups that did not come, by runner type (`Scaling.since`).
    scaler_says: Callable[[Mapping[str, datetime]], Awaitable[Mapping[str, str]]] | None = None
    cost: CostReader | None = None  # what the queue cost, read at each status and the resolve
    _shown_at: datetime = NEVER  # the reading the roots are brought to
    _to_show: list[str] = field(default_factory=list)  # the open incidents not brought to it yet
    _open: int = 0  # how many incidents were open at that reading
    # What each incident's cost adds to the counters this tick: counted once its commit lands.
    _costs: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)

    @property
    def _credit_window(self) -> timedelta:
        """A scale-up's drain is read over the longer advice window (`ADVICE_WINDOW`)."""
        return timedelta(seconds=self.config.advice_window)

    async def tick(self) -> None:
        """Commit every status due, in three round trips (claim, read, commit), then bring the
        open incidents' roots to a new reading. Never raises."""
        for step in (self._statuses, self._roots_to_reading):
            try:
                await step()
            except RedisError as exc:
                log.warning("status: Redis unavailable: %s", exc)

    async def _statuses(self) -> None:
        self._costs = {}  # a tick whose commit failed counts nothing of it
        due = self.store.status_due
        if not await due.pending(self.clock().timestamp()):
            return
        # Read once per tick, before the claims, which then need not outlast the query.
        reading, history = await self.readings.current()
        claims = await due.due(self.clock().timestamp(), CLAIM_S)
        reads = await self.store.read_due([c.member for c in claims])
        now = self.clock()
        loads = [_loaded(read) for read in reads]
        open_ = [i for x in loads if isinstance(x, Loaded) and (i := x.incident) and i.is_open]
        costs = await self.cost.costs(open_, now) if self.cost is not None else {}
        decided: list[tuple[Claim, Commit]] = []
        for claim, read, load in zip(claims, reads, loads, strict=True):
            # A millisecond of CPU each: let webhooks and clicks in between.
            await asyncio.sleep(0)
            with logs.about(claim.member):
                commit = await self._decided(claim, read, load, reading, history, now, costs)
            if commit is not None:
                decided.append((claim, commit))
        applied = await self.store.commit_many([c for _, c in decided], now=now.timestamp())
        costs, self._costs = self._costs, {}
        for (claim, commit), done in zip(decided, applied, strict=True):
            # What the queue cost since the incident's last count, for dashboards.
            counted = costs.get(claim.member, {}) if done is True else {}
            for runner_type, (seconds, delayed) in counted.items():
                if seconds > 0:
                    self.telemetry.queue_wait_job_seconds.labels(runner_type).inc(seconds)
                if delayed > 0:
                    self.telemetry.incident_jobs_delayed.labels(runner_type).inc(delayed)
            if done is not True:
                # An error, or the incident moved on since it was read: decided afresh next tick.
                channel = commit.incident.channel if commit.incident is not None else None
                with logs.about(claim.member, channel=channel or None):
                    await self._again(claim, done if isinstance(done, Exception) else None)
            elif commit.stop_status:
                self.telemetry.incidents_resolved.labels("drained").inc()
            elif any(reply.kind == STATUS for reply in commit.replies):
                self.telemetry.status_posts.inc()

    async def _roots_to_reading(self) -> None:
        """Each open incident's view (what the root, diagnostics and the forms answer from) is
        brought to the newest reading between statuses, `ROOTS_PER_TICK` a tick. Beyond
        `ROOTS_FOLLOWING_EVERY_READING` open incidents the root is edited only for news: Slack
        allows an app about 50 `chat.update` a minute."""
        if not self.readings.metrics.live:
            return
        reading = await self.readings.latest()
        if reading is None or reading.fleet is None:
            return
        if reading.fleet.at > self._shown_at:
            self._shown_at, self._to_show = reading.fleet.at, await self.store.open_ids()
            self._open = len(self._to_show)
        if not self._to_show:
            return
        batch = self._to_show[:ROOTS_PER_TICK]
        history = await self.readings.history()
        reads = await self.store.read_due(batch)
        del self._to_show[: len(batch)]
        now, commits = self.clock(), []
        for read in reads:
            await asyncio.sleep(0)
            with suppress(ValueError, RedisError):
                loaded = read.loaded()
                incident = loaded.incident
                if incident is None or not incident.is_open:
                    continue
                view = self.readings.incident_view(incident, reading, history, now)
                if not view.is_live:
                    continue
                # The scaler is read only for the scale-ups that did not come.
                asked = not_come(incident, view, now) if self.scaler_says else {}
                said = await self.scaler_says(asked) if asked and self.scaler_says else {}
                followed, events, replies = settled(incident, view, now, said)
                # What a scale-up bought, once the readings after its runners came are in.
                followed = with_bought(followed, history, now, self._credit_window)
                shown, bought = incident.live, followed.actions != incident.actions
                quiet = not (events or bought) and shown is not None
                if quiet and reads_alike(incident, shown, view):
                    continue
                current = as_snapshot(incident, view, view.at)
                before = as_snapshot(incident, shown, shown.at) if shown is not None else None
                news = is_material(before, current, self.config.drain_rule)
                seen = with_live(followed, view, current)
                root = news or self._open <= ROOTS_FOLLOWING_EVERY_READING
                commit = Commit(seen, events=events, replies=replies, root=root)
                commits.append(replace(commit, version=loaded.version, thread=loaded.thread))
        await self.store.commit_many(commits, now=now.timestamp())

    async def _decided(
        self,
        claim: Claim,
        read: DueRead,
        loaded: Loaded | Exception,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
        costs: Mapping[str, Costed],
    ) -> Commit | None:
        """A claimed incident's status to commit; None when there is none (put off, or done)."""
        try:
            if isinstance(loaded, Exception):
                raise loaded
            incident = loaded.incident
            if incident is None or not incident.is_open:
                await self.store.status_due.done(claim)
            elif read.due_at == claim.token:  # else a commit set it anew since the claim
                logs.tag(channel=incident.channel)
                commit = await self._decide(incident, reading, history, now, costs.get(incident.id))
                return replace(commit, version=loaded.version, thread=loaded.thread)
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
        incident: Incident,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
        cost: Costed | None,
    ) -> Commit:
        costed = incident.queue_cost
        if self.cost is not None:
            costed = costed.model_copy(update={"unknown": self.cost.unknown})
        if cost is not None:
            counted, self._costs[incident.id] = counted_cost(costed.counted, cost)
            costed = QueueCost(by_type=cost, at=now, unknown=costed.unknown, counted=counted)
        if costed != incident.queue_cost:
            incident = incident.model_copy(update={"queue_cost": costed})
        view = self.readings.incident_view(incident, reading, history, now)
        current = as_snapshot(incident, view, now)
        rule, needed = self.config.drain_rule, self.config.drain_checks
        checks = drain_checks(incident, view, rule)
        live = view if (view.is_live or view.note) else None
        drained = record_status(incident, current, live=live, drain_checks=0, posted=False)
        cap = timedelta(seconds=self.config.drain_follow_max)
        ended = follow_ended(drained, checks, needed=needed, rule=rule, cap=cap, now=now)
        if checks >= needed or ended:
            resolved = resolve_drained(drained, now=now, ended=ended)
            resolved = with_bought(resolved, history, now, self._credit_window, final=True)
            event = Event(at=now, kind="resolved", text=drained_said(resolved))
            events = [*await self.store.events(incident.id), event]
            replies = summary_replies(BAND_EVENT, summaries(resolved, events, now=now), resolved)
            return Commit(resolved, events=(event,), replies=replies, stop_status=True)
        kind = status_kind(incident, current, rule)
        posted = kind == STATUS
        updated = record_status(incident, current, live=live, drain_checks=checks, posted=posted)
        drain = (checks, needed) if checks else None
        pictures = bool(self.config.status_chart_every) and view.is_live
        updated, replies = status_replies(
            incident, updated, kind, current, live=live is not None, drain=drain, pictures=pictures
        )
        every_s = self.config.status_interval_seconds
        # A queue followed after its alert cleared is looked at as often as a draining one.
        interval = self.config.drain_check_seconds if checks or incident.drain.follow else every_s
        due = now.timestamp() + min(interval, every_s)
        last = incident.shown.status
        if kind is None and last is not None and is_material(last, current, rule):
            due = min(due, (last.at + STATUS_SPACING).timestamp())  # news, once it may be said
        root = view.is_live or incident.live is not None
        return Commit(updated, replies=replies, root=root, status_due=due)


def reads_alike(incident: Incident, before: FleetSnapshot, after: FleetSnapshot) -> bool:
    """Whether the root would read the same from `after` as from `before`: its runner types'
    lines and where they come from, as rendered (one definition of what it shows)."""
    same_source = source_note(before) == source_note(after)
    return same_source and type_lines(before, incident.trend) == type_lines(after, incident.trend)


def status_kind(incident: Incident, current: Snapshot, drain: DrainRule) -> str | None:
    """A new reply (STATUS) for the first status and for a material change a minute after the
    last; else an edit of the last status reply (RESTATUS) while nothing was posted below it;
    else nothing (None): the root shows the numbers."""
    posted = incident.shown.status
    if incident.shown.statuses == 0:
        return STATUS
    if is_material(posted, current, drain):
        return STATUS if status_spaced(posted, current) else None  # next check's, then
    return None if incident.shown.replied_since else RESTATUS


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
    """The status `kind` decided, compared with the last posted one; its chart drawn when the
    trend moved since the last drawn (an edit keeps its reply's), and with a new reply as a
    picture too where `pictures` (charts refused as blocks)."""
    posted = incident.shown.status
    if kind is None or posted is None:
        return updated, ()
    edit = kind == RESTATUS
    # An edit keeps the chart when the reply it edits (or a later edit of it) drew one.
    drawn = incident.shown.charted_at >= int(posted.at.timestamp())
    chart = chart_moved(updated) or (edit and drawn)
    since = posted.at if edit else None
    shown = StatusShown(
        current=current, previous=posted, live=live, drain=drain, since=since, chart=chart
    )
    # Rendered by the sender when it posts: this text only names the reply while it waits.
    text = Rendered(STATUS_FALLBACK, [])
    replies = [Reply(kind, BAND_STATUS, text, replaces=STATUS_KINDS, extra=shown.to_extra())]
    if chart:
        # The summary leaves out the trend the statuses drew already.
        updated = shown_now(updated, charted_at=trend_end(updated))
    if chart and pictures and not edit:
        replies.append(chart_reply())
        updated = shown_now(updated, pictured_at=updated.shown.charted_at)
    return updated, tuple(replies)


def _loaded(read: DueRead) -> Loaded | Exception:
    """An incident read for its status, parsed once; one unreadable fails alone."""
    try:
        return read.loaded()
    except Exception as exc:
        return exc
