"""The early warning's upkeep: once per fleet reading (by whoever claims it first), which runner
types' queues the forecast (`bot.domain.reading.early_warning`) sees crossing the alert's thresholds
within `EARLY_WARNING_MINUTES`. A warning is raised once the build is beyond the readings' noise,
edited as its forecast moves, cleared once it no longer crosses, folded into the incident once the
alert fires, held back while dismissed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from itertools import islice

from redis.exceptions import RedisError

from bot.config import Settings
from bot.domain.incident.incidents import Event, Incident, with_action
from bot.domain.reading.early_warning import (
    NOISE_READINGS,
    REUSE_S,
    Forecast,
    Phase,
    Point,
    WarningState,
    forecast,
    gauges_in_system,
    stated_thresholds,
    taken_on,
)
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint
from bot.domain.reading.runner_names import runner_key
from bot.domain.scale.scale_ups import ScaleUp, outcome_of
from bot.fleet.readings import FleetReadings
from bot.status.follow_ups import said_decided
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import ATTEMPTS, Commit, IncidentStore

log = logging.getLogger(__name__)

RECENT = 20  # recent incidents read for thresholds and coverage
HOLD_AFTER_S = 300  # no good reading this long: a standing warning's forecast is on hold
PAST = NOISE_READINGS - 1  # earlier readings the forecast takes (its window, its noise)


@dataclass(eq=False)
class EarlyWarnings:
    readings: FleetReadings
    store: IncidentStore
    warnings: WarningStore
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    # (channel, ts) -> a link to that message ("" or None: none to give); never raises.
    permalink: Callable[[str, str], Awaitable[str | None]] | None = None

    async def tick(self) -> None:
        try:
            await self._check()
        except RedisError as exc:
            log.warning("early warning: Redis unavailable: %s", exc)
        except Exception:  # a bug must not stop the scheduler's other jobs
            log.exception("early warning: failed; trying again at the next reading")

    async def _check(self) -> None:
        reading = await self.readings.latest()
        if reading is None or reading.fleet is None:
            return
        if not await self.warnings.claim_reading(reading.tried_at.timestamp()):
            return
        if reading.error:
            await self._hold(reading.fleet.at)
            return
        history = await self.readings.history()
        recent = await self.store.get_many(await self.store.recent_ids(RECENT))
        recent = [incident for incident in recent if not incident.is_test]
        incidents = [incident for incident in recent if incident.is_open]
        fleet = reading.fleet
        states = await self.warnings.all()
        followed = [
            name for name, state in states.items() if any(up.followed for up in state.scaled)
        ]
        for name in followed:
            await self._follow(name, fleet)
        if followed:  # what is decided below starts from what the follow-ups saved
            states = await self.warnings.all()
        for name in sorted({*fleet.runner_types, *states}):
            state, metrics = states.get(name), fleet.runner_types.get(name)
            try:
                thresholds = stated_thresholds(name, recent, self.config.thresholds)
                said = None
                if metrics is not None and thresholds.known:
                    said = forecast(
                        name,
                        metrics,
                        fleet.at,
                        _past(name, history, fleet.at),
                        thresholds,
                        boot_mins=self.config.runner_boot_minutes,
                        horizon_mins=self.config.early_warning_minutes,
                        sustained=state is not None and state.phase is Phase.ACTIVE,
                    )
                for _ in range(ATTEMPTS):  # decided again on what was saved meanwhile
                    if said is None and state is None:
                        break
                    if await self._decide(name, said, state, incidents):
                        break
                    state = await self.warnings.get(name)
            except RedisError:
                raise
            except Exception:  # one type's odd reading must not cost the others their warning
                log.exception("early warning: %s failed; the other types go on", name)

    async def _follow(self, name: str, fleet: FleetSnapshot) -> None:
        """Scale-ups from the warning followed to their runners, as an incident's are: each
        decided is said once, on the warning's message."""
        now = self.clock()

        def decided(state: WarningState | None) -> WarningState | None:
            if state is None:
                return None
            scaled = tuple(_followed(s, fleet, now) for s in state.scaled)
            return state.with_scaled(scaled) if scaled != state.scaled else None

        if await self.warnings.save_fresh(name, decided) is False:
            log.warning("early warning: %s kept changing; its scale-ups followed next time", name)

    async def _hold(self, last_read: datetime) -> None:
        """No fresh reading for `HOLD_AFTER_S`: a standing warning says its forecast is on hold
        rather than count down to a crossing nobody can see."""
        now = self.clock().timestamp()
        if now - last_read.timestamp() < HOLD_AFTER_S:
            return
        for state in (await self.warnings.all()).values():
            if state.phase is Phase.ACTIVE and not state.held_since:
                await self.warnings.save(state.changed(now, held_since=last_read.timestamp()))

    async def _decide(
        self,
        name: str,
        said: Forecast | None,
        state: WarningState | None,
        incidents: Sequence[Incident],
    ) -> bool:
        """Whether what it decided is kept: False when a newer version was saved meanwhile (a
        scale-up told, a dismissal), to decide again on it."""
        now = self.clock().timestamp()
        if state is not None and state.phase is Phase.DISMISSED and now < state.until:
            return True
        channel = state.channel if state else self.config.routing.channel_of_type(name)
        incident = _covering(name, channel, incidents)
        if state is not None and (incident is not None or said is None):
            if incident is not None and _current(state, now):
                link = await self._thread_link(incident.id)
                folded = state.changed(
                    now, phase=Phase.FOLDED, incident_id=incident.id, incident_link=link
                )
                if not await self.warnings.save(folded):
                    return False
                await self._record_taken_on(incident.id, state)
                return True
            if incident is None and state.phase is Phase.ACTIVE:
                return await self.warnings.save(state.changed(now, phase=Phase.CLEARED))
            if state.phase is not Phase.FOLDED or state.incident_link or not state.incident_id:
                return True
            # A folded warning gets its incident's link once the root is posted.
            link = await self._thread_link(state.incident_id)
            return not link or await self.warnings.save(state.changed(now, incident_link=link))
        if incident is not None or said is None:
            return True
        fields = {"text": said.text, "scalable": name in self.config.scalable}
        if state is not None and _current(state, now) and (state.phase is Phase.ACTIVE or state.ts):
            fresh = state.changed(now, phase=Phase.ACTIVE, held_since=0.0, **fields)
            return await self.warnings.save(fresh)
        log.info("early warning: %s", said.text)
        # Refused while an older warning's end is not shown yet: it waits a reading.
        await self.warnings.save(WarningState.raised(name, channel, now=now, **fields))
        return True

    async def _record_taken_on(self, incident_id: str, state: WarningState) -> None:
        """The incident's timeline keeps the warning it took on, once, after the fold was saved."""

        def line(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            *would, taken = taken_on(state, incident, now)
            for event in would:  # a dry-run pilot's acts, as its acts in the incident are kept
                incident = with_action(incident, event)
            # Its acts' moments are the warning's, before now: the incident changed now.
            incident = incident.model_copy(update={"updated_at": max(incident.updated_at, now)})
            return Commit(incident, events=(*would, taken), root=False), None

        if not (await self.store.commit_fresh(incident_id, line, clock=self.clock)).committed:
            log.warning("early warning: incident %s: its line not kept", incident_id)

    async def _thread_link(self, incident_id: str) -> str:
        """The root's permalink; "" while not posted or not known (the message reads without)."""
        if self.permalink is None:
            return ""
        thread = (await self.store.load(incident_id)).thread
        if thread is None or not thread.ts:
            return ""
        return await self.permalink(thread.channel, thread.ts) or ""


def _followed(up: ScaleUp, fleet: FleetSnapshot, now: datetime) -> ScaleUp:
    """`up` with what `fleet` decides of its runners, if it does."""
    outcome = outcome_of(up, fleet, now) if up.followed else None
    return up if outcome is None else said_decided(up, outcome, ".")


def _current(state: WarningState, now: float) -> bool:
    """Still this episode's warning (active, or cleared a moment ago): edited, not posted anew."""
    cleared_now = state.phase is Phase.CLEARED and now - state.updated_at < REUSE_S
    return state.phase is Phase.ACTIVE or cleared_now


def _covering(name: str, channel: str, incidents: Sequence[Incident]) -> Incident | None:
    """The open incident showing type `name`, or one in the channel naming none."""
    for incident in incidents:
        types = {runner_key(n) for n in incident.shown_types}
        if runner_key(name) in types or (not types and incident.channel == channel):
            return incident
    return None


def _past(name: str, history: Sequence[HistoryPoint], before: datetime) -> list[Point]:
    """The type's jobs in the system at earlier readings, oldest first."""
    earlier = islice((p for p in history if p.at < before), PAST)
    return [Point(p.at, gauges_in_system(p.gauges.get(name, {}))) for p in earlier][::-1]
