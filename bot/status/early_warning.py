"""The early warning's upkeep: once per fleet reading, which runner types get a warning.

The leader's scheduler asks at every tick; the fleet reading is refreshed once per interval
(`bot.fleet.readings`), and a new reading's warnings are decided once, by whoever claims it first
(`WarningStore.claim_reading`). For each runner type the forecast
(`bot.domain.early_warning`) says whether its queue crosses the alert's thresholds within
`EARLY_WARNING_MINUTES`; the thresholds are the latest incident's (what the alert rule said),
else the settings'. A warning is raised once the readings show a build beyond their own noise,
edited as its forecast moves (never posted again while its message stands), cleared only once
the forecast no longer crosses within the horizon (a pause just under the threshold is not
enough), folded into the incident once the alert fires (an open incident showing that type, or
one in its channel naming none; test incidents never count), which keeps it on its timeline,
linking the incident's thread once its root is posted, and held back while dismissed. The
channel's sender posts and edits it; a route on `runner_type` sends it where that type's alerts
go.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from redis.exceptions import RedisError

from bot.config import Settings
from bot.domain.early_warning import (
    NOISE_READINGS,
    REUSE_S,
    Forecast,
    Phase,
    Point,
    WarningState,
    forecast,
    gauges_in_system,
    shown_types,
    stated_thresholds,
    taken_on,
)
from bot.domain.fleet import FleetSnapshot, HistoryPoint
from bot.domain.incidents import Event, Incident
from bot.domain.routes import channel_for_type
from bot.domain.runner_names import runner_key
from bot.fleet.readings import FleetReadings
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import Commit, IncidentStore

log = logging.getLogger(__name__)

RECENT = 20  # recent incidents read for thresholds and coverage
HOLD_AFTER_S = 300  # no good reading this long: a standing warning's forecast is on hold
PAST = NOISE_READINGS - 1  # earlier readings the forecast takes (its window, its noise)


class EarlyWarnings:
    def __init__(
        self,
        readings: FleetReadings,
        store: IncidentStore,
        warnings: WarningStore,
        *,
        config: Settings,
        clock: Callable[[], datetime],
        permalink: Callable[[str, str], Awaitable[str | None]] | None = None,
    ) -> None:
        self._readings = readings
        self._store = store
        self._warnings = warnings
        self._config = config
        self._clock = clock
        # (channel, ts) -> a link to that message ("" or None: none to give); never raises.
        self._permalink = permalink

    async def tick(self) -> None:
        """Decide the warnings of a reading not decided yet; never raises."""
        try:
            await self._check()
        except RedisError as exc:
            log.warning("early warning: Redis unavailable: %s", exc)
        except Exception:  # a bug must not stop the scheduler's other jobs
            log.exception("early warning: failed; trying again at the next reading")

    async def _check(self) -> None:
        reading = await self._readings.latest()
        if reading is None or reading.fleet is None:
            return
        if not await self._warnings.claim_reading(reading.tried_at.timestamp()):
            return
        if reading.error:
            await self._hold(reading.fleet.at)
            return
        history = await self._readings.history()
        recent = await self._store.get_many(await self._store.recent_ids(RECENT))
        recent = [incident for incident in recent if not incident.is_test]
        incidents = [incident for incident in recent if incident.is_open]
        states = await self._warnings.all()
        fleet = reading.fleet
        for name in sorted({*fleet.runner_types, *states}):
            try:
                await self._one(name, fleet, history, recent, incidents, states.get(name))
            except RedisError:
                raise
            except Exception:  # one type's odd reading must not cost the others their warning
                log.exception("early warning: %s failed; the other types go on", name)

    async def _one(
        self,
        name: str,
        fleet: FleetSnapshot,
        history: Sequence[HistoryPoint],
        recent: Sequence[Incident],
        incidents: Sequence[Incident],
        state: WarningState | None,
    ) -> None:
        metrics = fleet.runner_types.get(name)
        thresholds = stated_thresholds(name, recent, self._config.thresholds)
        said = None
        if metrics is not None and thresholds.known:
            said = forecast(
                name,
                metrics,
                fleet.at,
                _past(name, history, fleet.at),
                thresholds,
                boot_mins=self._config.runner_boot_minutes,
                horizon_mins=self._config.early_warning_minutes,
                sustained=state is not None and state.phase is Phase.ACTIVE,
            )
        if said is None and state is None:
            return
        await self._decide(name, said, state, incidents)

    async def _hold(self, last_read: datetime) -> None:
        """The fleet cannot be read: a standing warning that has had no fresh reading for
        `HOLD_AFTER_S` says its forecast is on hold, rather than count down to a crossing
        nobody can see any more."""
        now = self._clock().timestamp()
        if now - last_read.timestamp() < HOLD_AFTER_S:
            return
        for state in (await self._warnings.all()).values():
            if state.phase is Phase.ACTIVE and not state.held_since:
                await self._warnings.save(state.changed(now, held_since=last_read.timestamp()))

    async def _decide(
        self,
        name: str,
        said: Forecast | None,
        state: WarningState | None,
        incidents: Sequence[Incident],
    ) -> None:
        now = self._clock().timestamp()
        if state is not None and state.phase is Phase.DISMISSED and now < state.until:
            return
        channel = state.channel if state else self._channel(name)
        incident = _covering(name, channel, incidents)
        if incident is not None:
            if state is not None and _current(state, now):
                link = await self._thread_link(incident.id)
                folded = state.changed(
                    now, phase=Phase.FOLDED, incident_id=incident.id, incident_link=link
                )
                if await self._warnings.save(folded):
                    await self._record_taken_on(incident.id, state)
            elif state is not None:
                await self._link_folded(state, now)
            return
        active = state is not None and state.phase is Phase.ACTIVE
        if said is None:
            if active and state is not None:
                await self._warnings.save(state.changed(now, phase=Phase.CLEARED))
            elif state is not None:
                await self._link_folded(state, now)
            return
        fields = {
            "text": said.text,
            "hold_runners": said.hold_runners or 0,
            "scalable": name in self._config.scalable,
        }
        if state is not None and _current(state, now) and (active or state.ts):
            fresh = state.changed(now, phase=Phase.ACTIVE, held_since=0.0, **fields)
            await self._warnings.save(fresh)
        else:
            log.info("early warning: %s", said.text)
            await self._warnings.save(WarningState.raised(name, channel, now=now, **fields))

    async def _record_taken_on(self, incident_id: str, state: WarningState) -> None:
        """The incident's timeline keeps the warning it took on (the summary and the postmortem
        tell it): once, after the fold was saved, which one decision of one reading makes."""

        def line(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            return Commit(incident, events=(taken_on(state, incident, now),), root=False), None

        if not (await self._store.commit_fresh(incident_id, line, clock=self._clock)).committed:
            log.warning("early warning: incident %s: its line not kept", incident_id)

    async def _link_folded(self, state: WarningState, now: float) -> None:
        """A folded warning without its incident's link gets it once the incident's root is
        posted: at the fold, the root may still be waiting for its turn in the channel."""
        if state.phase is not Phase.FOLDED or state.incident_link or not state.incident_id:
            return
        link = await self._thread_link(state.incident_id)
        if link:
            await self._warnings.save(state.changed(now, incident_link=link))

    async def _thread_link(self, incident_id: str) -> str:
        """The permalink of the incident's root ("" while it is not posted, or Slack does not
        say: the message reads without the link)."""
        if self._permalink is None:
            return ""
        thread = (await self._store.load(incident_id)).thread
        if thread is None or not thread.ts:
            return ""
        return await self._permalink(thread.channel, thread.ts) or ""

    def _channel(self, name: str) -> str:
        return channel_for_type(self._config.slack_routes, name, self._config.slack_channel)


def _current(state: WarningState, now: float) -> bool:
    """Still this episode's warning: active, or cleared a short while ago (a queue that paused
    before the alert fired): its message is edited rather than a new one posted."""
    if state.phase is Phase.ACTIVE:
        return True
    return state.phase is Phase.CLEARED and now - state.updated_at < REUSE_S


def _covering(name: str, channel: str, incidents: Sequence[Incident]) -> Incident | None:
    """The open incident that speaks for `name` now: one showing that type, or one in the
    warning's channel naming none."""
    for incident in incidents:
        types = shown_types(incident)
        if runner_key(name) in types or (not types and incident.channel == channel):
            return incident
    return None


def _past(name: str, history: Sequence[HistoryPoint], before: datetime) -> list[Point]:
    """The type's jobs in the system at the earlier readings, oldest first (history is newest
    first); a reading that did not keep the type (nothing queued or assigned) counts as none."""
    points = []
    for point in history:
        if point.at >= before:
            continue
        points.append(Point(point.at, gauges_in_system(point.gauges.get(name, {}))))
        if len(points) == PAST:
            break
    return points[::-1]
