"""Undo under the pilot's act on an early warning's message: refused once the incident took
the act on (the Undo in its thread is the one), and gone once the act was put back."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from bot.actions.flow import Actor
from bot.actions.pilot import Piloting
from bot.actions.scale import made
from bot.backends.scale import Undo
from bot.domain.incident.incidents import PILOT
from bot.domain.reading.early_warning import Phase, WarningState, scaled_from
from bot.domain.scale.scaling import ScaleTarget

T = datetime(2026, 11, 24, 9, tzinfo=UTC)


class Warnings:
    def __init__(self, state: WarningState) -> None:
        self.state = state

    async def get(self, runner_type: str) -> WarningState:
        return self.state

    async def save_fresh(self, runner_type: str, change: Any) -> bool:
        changed = change(self.state)
        self.state = changed or self.state
        return True


def piloting_on(warnings: Warnings, undone: list[Undo], detail: str, at: datetime) -> Piloting:
    """The pilot's Undo path on `warnings`, its scaler putting back (into `undone`) as `detail`
    says, at `at`."""

    async def undo_now(target: ScaleTarget, undo: Undo) -> Any:
        undone.append(undo)
        return SimpleNamespace(done=True, detail=detail, left="")

    async def name(actor: Actor) -> str:
        return actor.name

    async def pause(runner_type: str, paused: Any) -> None:
        return None

    piloting = Piloting.__new__(Piloting)
    piloting.scaling = SimpleNamespace(  # type: ignore[assignment]
        reverts=SimpleNamespace(undo_now=undo_now),
        targets={"linux": ScaleTarget("linux", "arc-runners/x", cap=20)},
        backend_name="ARC",
    )
    piloting.acting = SimpleNamespace(name=name, clock=lambda: at)  # type: ignore[assignment]
    piloting.store = SimpleNamespace(pause=pause)  # type: ignore[assignment]
    piloting.warnings = warnings  # type: ignore[assignment]
    return piloting


async def test_undo_on_a_folded_warnings_message_is_refused_for_the_incidents_thread() -> None:
    """The alert fired and incident 7 took the pilot's act on (its reply in the thread has Undo;
    its put-backs list it). A click on the warning's old Undo (a message not yet edited, a
    client not refreshed) does not put it back behind the incident's record: it says to undo it
    from the incident's thread."""
    done = made("linux", 6, PILOT, T, Undo("maxRunners", 20, 26), pilot=True)
    entry = scaled_from(
        "queuepilot (policy) scaled linux by +6.", "", "linux|maxRunners", done, None, 600
    )
    state = WarningState.raised("linux", "C1", "building", T.timestamp()).with_scaled((entry,))
    folded = state.changed(T.timestamp() + 60, phase=Phase.FOLDED, incident_id="7")
    undone: list[Undo] = []
    piloting = piloting_on(Warnings(folded), undone, "maxRunners 26 → 20", T)
    outcome = await piloting._undo_on_warning(Actor("U1", "al"), folded.uid, T.isoformat(), "linux")
    assert undone == [], outcome


def test_a_put_back_act_offers_no_undo_on_the_warnings_message() -> None:
    """The queue stopped building and the record put the act back (its fate told on the
    message): no Undo or Pause pilot stands under an act nothing can put back any more."""
    import json

    from bot.domain.reading.early_warning import fate_told
    from bot.render.early_warning import render_warning

    done = made("linux", 6, PILOT, T, Undo("maxRunners", 20, 26), pilot=True)
    entry = scaled_from(
        "queuepilot (policy) scaled linux by +6.", "", "linux|maxRunners", done, None, 600
    )
    state = WarningState.raised("linux", "C1", "building", T.timestamp()).with_scaled((entry,))
    cleared = state.changed(T.timestamp() + 60, phase=Phase.CLEARED)
    told = fate_told(cleared, "linux|maxRunners", "Put linux back: maxRunners 26 → 20.", ended=True)
    back = cleared.with_scaled(told)
    assert "pilot_undo" not in json.dumps(render_warning(back).blocks)


async def test_an_undone_act_that_continued_a_persons_scale_up_keeps_its_words_and_no_undo() -> (
    None
):
    """A person raised linux 20 → 26 from the warning, then the pilot 26 → 30. Undoing the
    pilot's act puts linux back to 26 only: the person's scale-up still goes back to 20. The
    message then offers no Undo under the undone act; when the record puts linux back, the
    person's line says so and the act's keeps what its Undo did."""
    import json

    from bot.domain.reading.early_warning import fate_told
    from bot.render.early_warning import render_warning

    rid = "linux|maxRunners"
    person = made("linux", 6, "al", T, Undo("maxRunners", 20, 26))
    person = scaled_from("al scaled linux by +6.", "", rid, person, None, 600)
    later = T.replace(minute=5)
    act = made("linux", 4, PILOT, later, Undo("maxRunners", 26, 30), pilot=True)
    act = scaled_from("queuepilot (policy) scaled linux by +4.", "", rid, act, None, 600)
    act = act.model_copy(update={"back_to": 20})  # the record's: where the person found it
    state = WarningState.raised("linux", "C1", "building", T.timestamp())
    state = state.with_scaled((person, act))
    undone: list[Undo] = []
    warnings = Warnings(state)
    piloting = piloting_on(warnings, undone, "maxRunners 30 → 26", later)
    outcome = await piloting._undo_on_warning(
        Actor("U2", "bo"), state.uid, later.isoformat(), "linux"
    )
    assert outcome.ok and undone == [Undo("maxRunners", 26, 30)], outcome
    after_undo = warnings.state
    assert "pilot_undo" not in json.dumps(render_warning(after_undo).blocks)
    again = await piloting._undo_on_warning(
        Actor("U2", "bo"), state.uid, later.isoformat(), "linux"
    )
    assert not again.ok and len(undone) == 1, again  # a second click puts nothing back

    told = fate_told(after_undo, rid, "Put linux back: maxRunners 26 → 20.", ended=True)
    said = json.dumps(render_warning(after_undo.with_scaled(told)).blocks, ensure_ascii=False)
    assert "al scaled linux by +6. Put linux back: maxRunners 26 → 20." in said, said
    assert "+4. Undone by bo at <!date^" in said and ": maxRunners 30 → 26." in said, said
