"""The streams' consumers. An accepted notification becomes an incident change and what Slack
shows: the change, its replies and the entry's acknowledgement are one commit, never waiting for
Slack; one group's entries are one lane, those that arrived together one commit. A Slack request is
a lane of its own, so a slow backend never holds up another click; an entry taken over from a
consumer that died carries on that attempt, so a click acts once."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from bot import logs
from bot.config import Settings
from bot.domain.alerting.delivery import Delivery, named
from bot.domain.alerting.routes import channel_for
from bot.domain.incident import incidents
from bot.domain.incident.incident_fleet import still_queued
from bot.domain.incident.incidents import Change, Event, Incident, is_reopenable
from bot.intake.group_loop import GroupLoop
from bot.pacing import wait_after
from bot.render.replies import following_said, render_event, summaries
from bot.storage import incident_store
from bot.storage.incident_store import BAND_EVENT, Commit, GroupLoad, Loaded, Reply
from bot.storage.leases import attempt
from bot.storage.state_marker import FoundRoot
from bot.storage.streams import NotificationStream, Request, RequestStream, StreamEntry
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

INTAKE_IN_FLIGHT = 256
# Reads of a group whose commits keep meeting a newer version before its entries are left pending,
# taken over again once idle (`intake_reclaim_idle_ms`); the first wait after a conflict.
MAX_CONFLICTS = 5
CONFLICT_S = 0.02
# A consumer under load waits this long before reading again, so more of a group's entries share
# a commit: in a flood, the commits per second set what the consumer costs.
GATHER_S = 0.02


async def _at_once(channel: str | None) -> None:
    return None


@dataclass(eq=False)
class Intake:
    stream: NotificationStream
    store: incident_store.IncidentStore
    telemetry: Telemetry
    _: KW_ONLY
    config: Settings
    consumer: str
    clock: Callable[[], datetime]
    # Waits while Slack's history is read after a possible loss of state (`StateGuard.held`): a
    # group opened before its root is found would have two threads.
    held: Callable[[str | None], Awaitable[None]] = _at_once
    # One opening at a time, or a storm of new groups would refuse each other's numbers.
    _opening: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def __post_init__(self) -> None:
        self._loop = GroupLoop(
            self.stream,
            self.handle_batch,
            lane=lambda e: e.delivery.group_hash if e.delivery else f"unreadable:{e.id}",
            config=self.config,
            consumer=self.consumer,
            name="intake",
            max_in_flight=INTAKE_IN_FLIGHT,
            gather_s=GATHER_S,
            failed=lambda kind: self.telemetry.intake_failures.labels(kind).inc(),
        )

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        await self._loop.run(stop, take_over_ms=take_over_ms)

    async def handle_batch(self, entries: list[StreamEntry]) -> None:
        """Apply one group's entries in order, together where they can be; never raises. A batch a
        retry cannot mend is applied one entry at a time, so only the one at fault dead-letters."""
        for entry in entries:
            if entry.delivery is None:
                await self.handle(entry)
        pending = [e for e in entries if e.delivery is not None]
        if len(pending) > 1 and await self._loop.retried(
            partial(self._apply_all, pending), f"a batch of {len(pending)} entries", None
        ):
            return
        for entry in pending:
            await self.handle(entry)

    async def handle(self, entry: StreamEntry) -> None:
        """Apply one entry, retrying what may pass; never raises."""
        if entry.delivery is None:
            await self._loop.bury(entry, f"unreadable: {entry.problem}")
        else:
            await self._loop.retried(partial(self._apply_all, [entry]), f"entry {entry.id}", entry)

    async def apply(self, entry_id: str, delivery: Delivery) -> Change:
        [change] = await self._apply_all([StreamEntry(entry_id, delivery)])
        return change

    async def _apply_all(self, pending: list[StreamEntry]) -> list[Change]:
        """Fold a group's entries into as few fenced commits as keep their meaning: an update folds
        into the next; a change that posts or moves the status schedule is committed alone."""
        # A delivery shared by repeats stays shared (a flood of repeats folds as one).
        unique = {id(entry.delivery): entry.delivery for entry in pending}
        names = {key: named(d, self.config.runner_names) for key, d in unique.items() if d}
        pending[:] = [replace(entry, delivery=names[id(entry.delivery)]) for entry in pending]
        changes: list[Change] = []
        conflicts = 0
        while pending:
            group_hash = pending[0].delivery.group_hash  # type: ignore[union-attr]
            read = await self.store.load_group(group_hash)
            if read[2].incident is not None and read[2].incident.is_open:
                folded = await self._fold(pending, read)
            else:
                await self._held(pending, read)
                async with self._opening:
                    folded = await self._fold(pending, await self.store.load_group(group_hash))
            if folded is not None:
                changes += folded
                continue
            # The incident changed since read (an action committed meanwhile): read it again.
            conflicts += 1
            if conflicts >= MAX_CONFLICTS:
                log.warning(
                    "intake: group %s changed under %d reads; %d entries wait for a retry",
                    group_hash,
                    conflicts,
                    len(pending),
                )
                return changes
            await asyncio.sleep(wait_after(conflicts, first=CONFLICT_S, maximum=1.0))
        return changes

    async def _held(self, pending: list[StreamEntry], read: GroupLoad) -> None:
        """Until an incident this group may open can be (`StateGuard.held`): with the group's
        channel when Redis knows nothing of it, as its root may be there."""
        deliveries = [entry.delivery for entry in pending if entry.delivery is not None]
        current, found = read[2].incident, read[4]
        if found is not None or all(d.status == "resolved" for d in deliveries):
            return
        window = timedelta(seconds=self.config.reopen_window_seconds)
        if current is not None and is_reopenable(current, self.clock(), window):
            return
        channel = self._channel(deliveries[0]) if current is None else None
        async with self._loop.parked(len(pending)):
            await self.held(channel)

    async def _fold(self, pending: list[StreamEntry], read: GroupLoad) -> list[Change] | None:
        """The changes committed, taken off `pending`; None when `read` is out of date."""
        group_hash = pending[0].delivery.group_hash  # type: ignore[union-attr]
        group, group_version, loaded, next_id, found = read
        if loaded.incident is not None:  # a lane is one group's: what it logs names its incident
            logs.tag(incident=loaded.incident.id, channel=loaded.incident.channel)
        now = self.clock()
        window = timedelta(seconds=self.config.reopen_window_seconds)
        commit: Commit | None = None
        changes: list[Change] = []
        updated_by: Delivery | None = None  # the delivery the incident was last UPDATED with
        for n, entry in enumerate(pending, 1):
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a long fold must not hold up the webhooks' answers
            delivery = entry.delivery
            assert delivery is not None
            changes.append(Change.STALE)
            if incidents.is_stale(group, delivery, entry.id):
                continue
            after = incidents.noted(group, delivery, entry.id)
            if delivery is updated_by and commit is not None and loaded.incident is not None:
                # The same body again (a flood of repeats is read as one shared delivery).
                incident = incidents.repeated(loaded.incident, now=now)
                commit = replace(commit, group=after, incident=incident)
                loaded = replace(loaded, incident=incident)
                changes[-1], group = Change.UPDATED, after
                continue
            base = Commit(group=after, group_hash=group_hash, group_version=group_version)
            current = loaded.incident
            if current is not None and (current.is_open or is_reopenable(current, now, window)):
                changes[-1], commit = await self._update(base, loaded, delivery, entry.id, now)
            elif delivery.status == "resolved":
                commit = base  # nothing open to resolve; remember the order
            else:
                changes[-1], commit = self._open(base, delivery, next_id, now, found)
                found = None  # one incident goes on in a found root
            group = after if commit.group is None else commit.group
            if commit.incident is not None:
                loaded = replace(loaded, incident=commit.incident)
            updated_by = delivery if changes[-1] is Change.UPDATED else None
            if changes[-1] not in _FOLDABLE:
                break
        acks = tuple(entry.id for entry in pending[: len(changes)])
        if commit is None:
            await self.stream.ack(*acks)
        elif not await self.store.commit(replace(commit, acks=acks), now=now.timestamp()):
            self.telemetry.intake_failures.labels("conflict").inc()
            return None
        del pending[: len(changes)]
        for change, count in Counter(changes).items():
            self.telemetry.notifications_applied.labels(change.value).inc(count)
            if change is Change.OPENED:
                self.telemetry.incidents_opened.inc(count)
            elif change is Change.RESOLVED:
                self.telemetry.incidents_resolved.labels("alert").inc(count)
        return changes

    def _open(
        self,
        base: Commit,
        delivery: Delivery,
        incident_id: str,
        now: datetime,
        found: FoundRoot | None = None,
    ) -> tuple[Change, Commit]:
        """A new incident; in the group's root found in Slack after Redis lost the state, by that
        root's number and UID (its buttons keep working), told in its thread."""
        if found is None:
            uid, channel = secrets.token_hex(6), self._channel(delivery)
        else:
            incident_id, uid, channel = found.incident_id, found.uid, found.channel
        incident = incidents.open_incident(
            delivery, incident_id=incident_id, uid=uid, channel=channel, now=now
        )
        logs.tag(incident=incident.id, channel=incident.channel)
        opened = Event(at=now, kind="opened", text=f"Alert fired: {incident.title}")
        events, replies = [opened], []
        if found is not None:
            events.append(Event(at=now, kind="state_lost", text=STATE_LOST_TEXT))
            replies.append(Reply("event", BAND_EVENT, render_event(incident, events[-1])))
        assert base.group is not None
        return Change.OPENED, replace(
            base,
            incident=incident,
            group=base.group.model_copy(update={"incident_id": incident.id}),
            events=tuple(events),
            replies=tuple(replies),
            status_due=self._next_status(now) if incident.is_open else None,
            opens=found is None,
            adopts=found is not None,
            thread=incident_store.ThreadRef(found.channel, found.ts) if found is not None else None,
        )

    async def _update(
        self, base: Commit, loaded: Loaded, delivery: Delivery, entry_id: str, now: datetime
    ) -> tuple[Change, Commit]:
        current = loaded.incident
        assert current is not None
        queued = None
        if delivery.status == "resolved" and self.config.drain_follow_max:
            queued = still_queued(current, self.config.drain_rule)
        incident, change = incidents.apply_notification(
            current, delivery, entry_id=entry_id, now=now, still_queued=queued
        )
        if change is Change.STALE:
            return change, base
        fenced = replace(base, incident=incident, version=loaded.version, thread=loaded.thread)
        if change is Change.UPDATED:
            return change, fenced
        event = _event_for(change, incident, now)
        if change is Change.RESOLVED:
            events = [*await self.store.events(incident.id), event]
            summary = summaries(incident, events, now=now)
            replies = incident_store.summary_replies(BAND_EVENT, summary, incident)
            return change, replace(fenced, events=(event,), replies=replies, stop_status=True)
        due = self._next_status(now) if change is Change.REOPENED else None
        if change is Change.FOLLOWED:  # looked at as often as a draining queue
            due = now.timestamp() + self.config.drain_check_seconds
        reply = Reply("event", BAND_EVENT, render_event(incident, event))
        return change, replace(fenced, events=(event,), replies=(reply,), status_due=due)

    def _channel(self, delivery: Delivery) -> str:
        return channel_for(self.config.slack_routes, delivery.facts, self.config.slack_channel)

    def _next_status(self, now: datetime) -> float:
        return now.timestamp() + self.config.status_interval_seconds


STATE_LOST_TEXT = (
    "queuepilot lost its memory of this incident (its Redis was emptied) and goes on with it "
    "here: who acknowledged it, its silence and its earlier timeline are not known any more."
)

# Entries folded between two looks at the event loop: about 1 ms of work in a flood.
_YIELD_EVERY = 32

# Changes that only update the incident's state: later entries of the batch fold onto them.
_FOLDABLE = frozenset({Change.STALE, Change.UPDATED})


def _event_for(change: Change, incident: Incident, now: datetime) -> Event:
    texts = {
        Change.RESOLVED: "Alert resolved",
        Change.REOPENED: "Alert fired again: incident reopened",
        Change.FOLLOWED: following_said(incident),
        Change.ALERTS_CHANGED: _alerts_line(incident),
    }
    kind = "alert_cleared" if change is Change.FOLLOWED else change.value
    return Event(at=now, kind=kind, text=texts.get(change, change.value))


def _alerts_line(incident: Incident) -> str:
    types = ", ".join(sorted(incident.runner_types)[:10])
    noun = "alert" if incident.firing_count == 1 else "alerts"
    line = f"{incident.firing_count} {noun} firing now"
    return f"{line} ({types})" if types else line


# A request's work (its listener's), done with the Slack body the listener was handed.
Perform = Callable[[dict[str, Any]], Awaitable[None]]
# A crowd clicking at once waits here for its turn, not in the Redis pool for a connection.
REQUESTS_IN_FLIGHT = 64
# Past this a click is not performed: its reply can no longer reach the person (Slack's
# response_url answers for 30 minutes), and a silence or a scale-up hours late surprises.
STALE_MS = 30 * 60 * 1000


def request_loop(
    stream: RequestStream, works: Mapping[str, Perform], *, config: Settings, consumer: str
) -> GroupLoop[Request]:
    """The leader's loop over the requests stream, performing each entry's work by its name."""

    async def perform(entries: list[Request]) -> None:
        for entry in entries:  # one: each request has a lane of its own
            work = works.get(entry.work) if entry.body is not None else None
            if work is None:
                await loop.bury(entry, entry.problem or f"no work is named {entry.work!r}")
                continue
            if (waited_ms := time.time() * 1000 - entry_ms(entry.id)) > STALE_MS:
                waited = f"{waited_ms / 60_000:.0f} min"
                await loop.bury(entry, f"{entry.work} taken {waited} after it was asked")
                continue
            attempt.set(entry.id)  # in this entry's task only
            what = f"entry {entry.id} ({entry.work})"
            # Once done, it is acknowledged again while Redis fails, never performed again.
            if await loop.retried(partial(work, entry.body), what, entry):
                await loop.retried(partial(stream.ack, entry.id), f"{what} done", entry)

    loop = GroupLoop(
        stream,
        perform,
        lane=lambda entry: entry.id,
        config=config,
        consumer=consumer,
        name="requests",
        max_in_flight=REQUESTS_IN_FLIGHT,
    )
    return loop


def entry_ms(entry_id: str) -> int:
    """When Redis appended the entry (its ID's first part: the server's clock, in ms)."""
    return int(entry_id.split("-", 1)[0])
