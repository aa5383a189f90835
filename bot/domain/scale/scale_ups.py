"""A scale-up's whole life in one record: asked → made (its field, before → after) → followed
(until its runners register or `due` passes) → bought → put back, or undone. It is kept on the
incident's "scaled" event, or on its early warning until the incident takes it on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, of_type, source_name
from bot.domain.reading.judgement import Judgement
from bot.domain.reading.runner_names import same_type
from bot.domain.scale.bought import Bought, Reading, bought

RAISED_MAXIMUM = "maxRunners"  # the field a scale-up raising ARC's maximum names
SCALE_OUTCOME = "scale_outcome"  # the timeline's event of what came of one


class DryRun(BaseModel):
    """What a dry-run pilot would have added to a runner type, kept on its "pilot_dry_run"
    event: nothing was scaled."""

    model_config = ConfigDict(frozen=True)

    runner_type: str
    runners: int


class ScaleUp(BaseModel):
    """One scale-up. While `due` is set its runners are followed from `baseline` (its type's
    registered runners before it; None: not read), and its reply (`reply`, `detail`) says what
    came of them: `came`, as read at `seen_at`. `back` names the record that puts it back ("":
    none), to `back_to` (None: unset), `back_when` and at the latest `back_by`. An early warning's
    message says `said`, then what came of it (`came_said`) and when it goes back (`fate`)."""

    model_config = ConfigDict(frozen=True)

    runner_type: str
    added: int
    by: str
    pilot: bool = False  # the pilot's act, not a person's
    at: datetime | None = None  # when made: an early warning's precedes its incident's event
    field: str = ""
    before: int | None = None  # None: the field was unset
    after: int | None = None
    due: datetime | None = None
    baseline: float | None = None
    reply: int = 0
    detail: str = ""
    came: bool | None = None
    seen_at: datetime | None = None
    bought: Bought | None = None  # once read, where its runners came
    undone: bool = False  # put back at once by its Undo: nothing more to follow or judge
    back: str = ""
    back_to: int | None = None
    back_when: str = ""  # what it waits for after the resolve ("once its queue has stayed …")
    back_by: datetime | None = None  # `SCALE_REVERT_AFTER` after the scale-up, whatever happens
    said: str = ""
    came_said: str = ""
    fate: str = ""

    @property
    def followed(self) -> bool:
        return self.due is not None

    @property
    def back_from(self) -> int | None:
        """What its put-back starts from: an undone act's own value before it (an earlier
        scale-up it continued still goes back, from there)."""
        return self.before if self.undone else self.after

    @property
    def words(self) -> str:
        """As an early warning's message says it."""
        return " ".join(w for w in (self.said, self.came_said, self.fate) if w)


def follow(
    up: ScaleUp,
    judged: Judgement | None,
    *,
    verify_s: float,
    reply: int = 0,
    detail: str = "",
    earlier: Sequence[ScaleUp] = (),
) -> ScaleUp:
    """`up` followed until `verify_s` after it from its type's registered runners as `judged`
    before it, and no fewer than an `earlier` scale-up still followed brings."""
    assert up.at is not None, "made at a moment"
    baseline = judged.registered if judged is not None else None
    coming = [
        e.baseline + e.added
        for e in earlier
        if e.followed and e.baseline is not None and same_type(e.runner_type, up.runner_type)
    ]
    if baseline is not None and coming:
        baseline = max(baseline, *coming)
    due = up.at + timedelta(seconds=verify_s)
    update = {"due": due, "baseline": baseline, "reply": reply, "detail": detail}
    return up.model_copy(update=update)


@dataclass(frozen=True)
class Outcome:
    """What came of a scale-up as the reading at `read_at` judged it: `came` (None: not known),
    and `why` not, or what the reading knows of the cause."""

    came: bool | None
    read_at: datetime
    judged: Judgement | None = None
    baseline: float = 0.0
    why: str = ""


def outcome_of(
    up: ScaleUp, view: FleetSnapshot | None, now: datetime, said: str = ""
) -> Outcome | None:
    """Came: a reading after it shows the type's registered runners at the baseline plus those
    added (or the maximum); not by `due`: did not come, why as the pods or the scaler `said` it;
    a reading that counts no registered runners (`view` None: none will) knows neither."""
    assert up.at is not None and up.due is not None, "a followed scale-up"
    metrics = of_type(view.runner_types, up.runner_type) if view is not None else None
    judged = metrics.judged if metrics is not None else None
    registered = judged.registered if judged is not None else None
    read_at = view.at if view is not None else now
    wanted = None if up.baseline is None else up.baseline + up.added
    # No more can come than the maximum lets in: the one the act set where it raised it (ARC's
    # listener reports it late), else the reading's.
    bound = up.after if up.field == RAISED_MAXIMUM else judged.maximum if judged else None
    if wanted is not None and bound is not None:
        wanted = min(wanted, bound)
    came = registered is not None and wanted is not None and registered >= wanted
    if judged is not None and came and read_at > up.at:
        return Outcome(True, read_at, judged, up.baseline or 0.0)
    if view is not None and now < up.due:
        return None
    if judged is None or registered is None:
        source = source_name(view.source) if view is not None else source_name("alert")
        return Outcome(None, read_at, why=f"{source} does not count registered runners")
    if up.baseline is None:
        why = f"no reading before it counted the registered {up.runner_type} runners"
        return Outcome(None, read_at, why=why)
    if judged.queued == 0 and not (said or judged.causes or judged.cannot_start):
        # No job was left for them: not needed, which is no failure to pause on.
        why = "the queue drained before they registered, so no job was left for them"
        return Outcome(None, read_at, judged, up.baseline, why=why)
    return Outcome(False, read_at, judged, up.baseline, why=cause_of(judged, said))


def decided(up: ScaleUp, outcome: Outcome) -> ScaleUp:
    """No longer followed: what came of it kept, so the pilot declines after one that did not."""
    return up.model_copy(update={"due": None, "came": outcome.came, "seen_at": outcome.read_at})


def undone(up: ScaleUp) -> ScaleUp:
    """Put back at once by its Undo: its follow-up ends with it. One that began its record takes
    the put-back with it; one that continued an earlier scale-up keeps the marks, as that one
    still goes back, from where this one began (`back_from`)."""
    continued = up.back and up.back_to != up.before
    return up.model_copy(update={"due": None, "undone": True, "back": up.back if continued else ""})


def cause_of(judged: Judgement, said: str = "") -> str:
    """Why runners did not come, as the judgement's pod causes say it; else as the scaler
    `said` (an ASG's failed activity, the SQS Lambda's instances); else what it knows."""
    if judged.causes:
        return judged.causes[0].evidence
    if judged.cannot_start:
        return f"{judged.cannot_start} new runner pods cannot start"
    if said:
        return said
    if booting := judged.booting - judged.added_since:
        return f"{booting} still booting; no cause known"
    return "no cause known (no runner pods read as Pending or failing)"


def credited(
    made: Sequence[ScaleUp],
    history: Sequence[HistoryPoint],
    now: datetime,
    window: timedelta,
    *,
    final: bool = False,
) -> list[ScaleUp]:
    """`made` (in order), each whose runners came with what it bought, read once a `window` of
    readings followed them, or at once where its incident ends (`final`)."""
    credit = []
    for up in made:
        ready = up.seen_at is not None and (final or now >= up.seen_at + window)
        if not (up.came and up.bought is None and up.at and ready):
            credit.append(up)
            continue
        same = [d for d in made if d.runner_type == up.runner_type and d.at and d is not up]
        earlier = [d.seen_at for d in same if d.seen_at and d.came and d.at and d.at < up.at]
        later = [d.at for d in same if d.at and d.at > up.at]
        readings = [
            Reading(point.at, queued, of_type(point.arrival_per_min, up.runner_type))
            for point in history
            if (queued := point.gauges_of(up.runner_type).get("queued")) is not None
        ]
        after, until = max(earlier, default=None), min([*later, now])
        measured = bought(up.seen_at, readings, after=after, until=until, window=window)
        credit.append(up.model_copy(update={"bought": measured}))
    return credit
