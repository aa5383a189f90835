"""The pilot across an early warning's fold into its incident: its act on the warning, still
followed, holds the pilot until the incident has taken the act on (where its runners then count
as capacity on their way)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.actions.pilot import _warning_ups
from bot.actions.scale import made
from bot.backends.scale import Undo
from bot.domain.incident.incidents import PILOT
from bot.domain.reading.early_warning import Phase, WarningState, scaled_from
from bot.domain.reading.judgement import Judgement
from bot.domain.scale.pilot import Hold, Verdict, verdict
from bot.domain.scale.scaling import Policy

T = datetime(2026, 11, 24, 9, tzinfo=UTC)
POLICY = Policy(up_to=60, step=20, hold_s=0, cooldown_s=600)


def test_a_folded_warnings_act_holds_the_pilot_until_the_incident_took_it_on() -> None:
    """The pilot added 6 from the warning at 09:00; the alert fired at 09:01 and the warning
    folded; the incident has not taken the act on yet (its record's next look). The incident has
    no scale-up and its reading does not count the 6: the act on the warning, still followed,
    must hold the pilot rather than let it buy the same runners again."""
    done = made("linux", 6, PILOT, T, Undo("maxRunners", 20, 26), pilot=True)
    entry = scaled_from(
        "queuepilot (policy) scaled linux by +6.", "", "linux|maxRunners", done, None, 600
    )
    state = WarningState.raised("linux", "C1", "building", T.timestamp()).with_scaled((entry,))
    folded = state.changed(T.timestamp() + 60, phase=Phase.FOLDED, incident_id="7")
    others = _warning_ups(folded, "linux")  # what `_tick` passes as every other scale-up
    now = T + timedelta(minutes=1, seconds=10)
    hold = Hold(
        since=now - timedelta(seconds=10), asks=((now - timedelta(seconds=10), 50), (now, 50))
    )
    judged = Judgement(at=now, queued=40.0, runners=10, needed=10, registered=40.0, own=10)
    decided = verdict(POLICY, hold, judged, [], now, others=others)
    assert decided == Verdict(0, "the +6 at 09:00 UTC is not verified yet"), decided
    assert verdict(POLICY, hold, judged, [], now).runners == 10, "without it, it would act"
