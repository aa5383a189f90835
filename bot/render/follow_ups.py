"""What came of an action in words (a scale-up's outcome, a silence's read-back, a put-back's
runners), plain for the timeline or escaped for the thread; the summary's scale record."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

from bot.domain.incident.incidents import Event, Incident
from bot.domain.incident.silence_seen import Seen
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.scale.bought import ASSUMED, Bought
from bot.domain.scale.put_back_seen import Back, Landed
from bot.domain.scale.scale_record import scale_record
from bot.domain.scale.scale_ups import SCALE_OUTCOME, Outcome, ScaleUp
from bot.domain.units import minutes, number

OUTCOME_ICONS = {True: "✅", False: "⚠️", None: "❔"}
UNSEEN = "its runners were not seen registered before the incident resolved"
# Timeline events of what a backend showed after an action, said by nobody.
SILENCE_SEEN, PUT_BACK_SEEN = "silence_seen", "put_back_seen"


def outcome_said(
    done: ScaleUp,
    outcome: Outcome,
    escaped: Callable[[str], str] = str,
    at: Callable[[datetime], str] = lambda moment: f"{moment:%H:%M} UTC",
) -> str:
    """ "+7 on linux.2xlarge at 14:02: 7 registered by 14:04, all busy; the queue falls 5 …"."""
    asked, judged = done.at or outcome.read_at, outcome.judged
    on = f"+{done.added} on {escaped(done.runner_type)} at {at(asked)}"
    if outcome.came is None or judged is None or judged.registered is None:
        return f"{on}: not known: {escaped(outcome.why)}"
    came = number(max(judged.registered - outcome.baseline, 0))
    if not outcome.came:
        took = minutes((outcome.read_at - asked) / timedelta(minutes=1))
        why = f"{came} registered after {took}; {escaped(outcome.why)}"
        return f"+{done.added} asked at {at(asked)}: {why}"
    said = f"{on}: {came} registered by {at(outcome.read_at)}"
    if judged.busy is not None:
        said += (
            ", all busy" if judged.busy >= judged.registered else f", {number(judged.busy)} busy"
        )
    return said + _queue_said(judged)


def _queue_said(judged: Judgement) -> str:
    rate = abs(judged.change_per_min or 0.0)
    per_min = f" {number(rate)} jobs/min" if rate else ""
    if judged.direction is Direction.FALLING:
        return f"; the queue falls{per_min}"
    if judged.direction is Direction.RISING:
        return f"; the queue still rises{per_min}"
    return "; the queue holds" if judged.direction is Direction.HOLDING else ""


def outcome_event(done: ScaleUp, outcome: Outcome, now: datetime) -> Event:
    """Said by nobody: the reading decided it."""
    return Event(at=now, kind=SCALE_OUTCOME, text=outcome_said(done, outcome))


def seen_said(
    seen: Seen,
    escaped: Callable[[str], str] = str,
    at: Callable[[datetime], str] = lambda moment: f"{moment:%H:%M} UTC",
) -> str:
    """ "active in Alertmanager until 15:02 UTC, matching the alert", or what is wrong with it."""
    backend, state = escaped(seen.backend), seen.state
    if seen.unread:
        return f"not known: {escaped(seen.unread)}"
    if state is None:
        return f"{backend} does not know it"
    if not state.in_force:
        return f"{backend} shows it {escaped(state.state)}"
    if seen.misses:
        shown = ", ".join(f"{m.name}{m.operator}{json.dumps(m.value)}" for m in seen.misses)
        return f"its matchers do not match the alert: {escaped(shown)}"
    if state.state == "pending" and state.starts_at is not None:
        said = f"pending in {backend} until its start at {at(state.starts_at)}"
    else:
        ends = f" until {at(state.ends_at)}" if state.ends_at is not None else ""
        said = f"{escaped(state.state)} in {backend}{ends}"
    return f"{said}, matching the alert"


def back_said(
    back: Back,
    landed: Landed,
    said_at: datetime,
    spares: str = "",
    escaped: Callable[[str], str] = str,
    at: Callable[[datetime], str] = lambda moment: f"{moment:%H:%M} UTC",
) -> str:
    """ "maxRunners of linux.2xlarge back to 20 at 15:10: 20 runners by 15:14; <spares>"."""
    field = f"{escaped(back.field)} of {escaped(back.target.runner_type)}"
    to = "unset again" if back.bound is None else f"back to {back.bound}"
    head = f"{field} {to} at {at(said_at)}"
    if landed.back is None or landed.runners is None:
        return f"{head}: not known: {escaped(landed.why)}"
    if not landed.back:
        took = minutes((landed.read_at - said_at) / timedelta(minutes=1))
        return f"{head}: still {landed.runners} runners after {took}"
    return f"{head}: {landed.runners} runners by {at(landed.read_at)}" + (
        f"; {escaped(spares)}" if spares else ""
    )


MAX_ACTS = 6  # the summary's latest scale-ups; the timeline keeps them all


def record_said(
    incident: Incident, escaped: Callable[[str], str], at: Callable[[datetime], str]
) -> list[str]:
    """Each scale-up, who made it and what came of it, then each type's time to capacity."""
    made = [(e.at, e.scale) for e in incident.actions if e.scale is not None]
    more = len(made) - MAX_ACTS
    lines = [f"_{more} earlier scale-ups not shown_"] if more > 0 else []
    for event_at, done in made[-MAX_ACTS:]:
        who = "The pilot" if done.pilot else escaped(done.by or "someone")
        when = at(done.at or event_at)
        said = f"{who} added +{done.added} on {escaped(done.runner_type)} at {when}"
        seen = f" by {at(done.seen_at)}" if done.seen_at is not None else ""
        if done.came is not None:
            said += f": they came up{seen}" if done.came else f": they did not come up{seen}"
            said += f"; {bought_said(done.bought)}" if done.bought is not None else ""
        elif done.undone:
            said += ": undone"
        elif not done.followed:
            said += ": whether they came up is not known"
        else:
            said += ": still followed" if incident.is_open else f": not known: {UNSEEN}"
        lines.append(f"{OUTCOME_ICONS[done.came]} {said}")
    record = scale_record(incident)
    for scaled in (r for r in record if r.capacity_mins):
        of = f"{escaped(scaled.runner_type)}: capacity" if len(record) > 1 else "Capacity"
        lines.append(f"⏱️ {of} added {minutes(scaled.capacity_mins[0])} after the alert")
    return lines


def bought_said(bought: Bought) -> str:
    """ "it took ~6 min off the drain …", the rate after as with the arrivals before."""
    if not bought.measured:
        return f"what it bought is not measurable: {bought.why}"
    before, after = bought.fell_before or 0.0, bought.fell_after or 0.0
    rates = f"{_fell(before)} before they came, {_fell(after, again=before)} after"
    held = ASSUMED
    if bought.arrivals:
        held += f" at {bought.arrivals[0]:.1f} jobs/min ({bought.arrivals[1]:.1f} after)"
    if bought.saved_mins is None:
        return f"the queue turned: it {rates}"
    if bought.saved_mins <= 0:
        return f"the queue drained no faster: it {rates}"
    return f"it took ~{minutes(bought.saved_mins)} off the drain (the queue {rates}; {held})"


def _fell(rate: float, *, again: float | None = None) -> str:
    """ "fell 4.0 jobs/min", "rose 1.0 jobs/min"; the verb left out where it repeats."""
    verb = "fell" if rate >= 0 else "rose"
    same = again is not None and (again >= 0) == (rate >= 0)
    return f"{abs(rate):.1f}" if same else f"{verb} {abs(rate):.1f} jobs/min"
