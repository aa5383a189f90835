"""What `/queue pilot` and the App Home say of each piloted runner type: its policy, on (and
what it is doing), paused (by whom, why, when) or off, its last act and what came of it; within
one answer and one Home section however many types, and inert whatever a runner type is named."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bot.domain.scale.pilot import Paused, Piloted, PilotState
from bot.domain.scale.scaling import Policy
from bot.render.home import HomeState, digests, render_home
from bot.render.mrkdwn import MAX_SECTION
from bot.render.pilot import DECLARE, render_pilot
from bot.render.queue import MAX_ANSWER
from sandbox.transcript import mrkdwn_to_text
from tests.render.test_home import NOW, assert_valid_view, view_text
from tests.render.test_messages import EVIL

POLICY = Policy(up_to=60, step=20, hold_s=180, cooldown_s=600)
WAITING = (
    "its readings have wanted more runners since 14:00 UTC: it acts from 14:03 UTC if they still do"
)


def state(
    runner_type: str = "linux.2xlarge",
    *,
    why: str = WAITING,
    paused: Paused | None = None,
    enabled: bool = True,
    last: str = "",
    outcome: str = "",
) -> PilotState:
    piloted = Piloted(why=why, at=NOW, last=last, outcome=outcome)
    return PilotState(runner_type, POLICY, piloted, paused, enabled)


def said(*states: PilotState) -> str:
    return mrkdwn_to_text(render_pilot(states, "/queue"))


def test_an_active_pilot_says_its_policy_and_what_it_is_doing() -> None:
    text = said(state(last="+7 at 14:02 UTC in incident 12", outcome="its runners came"))
    assert "`linux.2xlarge` · up_to 60, step 20, hold 3 min, period 1 min, cooldown 10 min" in text
    assert f"on: {WAITING}" in text
    assert "Last act: +7 at 14:02 UTC in incident 12: its runners came" in text
    assert "/queue pilot off|on [runner-type]" in text


def test_a_dry_run_says_so_and_what_it_would_have_done() -> None:
    dry = replace(POLICY, dry_run=True)
    why = "dry run: would have scaled linux.2xlarge by +12 at 14:02 UTC: +12 wanted for 3 min"
    piloted = Piloted(why=why, at=NOW)
    text = said(PilotState("linux.2xlarge", dry, piloted, None, True))
    assert f"dry run (it scales nothing): {why}" in text, text


def test_a_paused_pilot_says_by_whom_why_and_when_and_off_says_the_setting() -> None:
    paused = Paused(by="alice", why="paused from Slack", at=NOW - timedelta(minutes=5))
    text = render_pilot([state(paused=paused), state("linux.4xlarge", enabled=False)], "/queue")
    assert f"paused* by *alice* <!date^{int(paused.at.timestamp())}^{{ago}}|" in text
    assert "paused from Slack" in text
    assert "off*: PILOT_ENABLED=false stops every pilot" in text
    assert WAITING not in text, "what a paused or stopped pilot would do is not said"


def test_resumed_before_the_leader_s_next_look_it_says_it_looks_at_the_next_reading() -> None:
    # While paused or off the leader keeps no reason of its own: the pause is the reason.
    text = said(state(why=""))
    assert "on: it looks at the next reading" in text


def test_no_pilot_declared_says_how_to_declare_one() -> None:
    assert render_pilot([], "/queue") == DECLARE
    assert "SCALER_TARGETS" in DECLARE and "docs/pilot.md" in DECLARE
    assert '"pilot": {"up_to": 60, "step": 20, "hold_seconds": 180' in DECLARE


def test_a_hostile_runner_type_and_texts_are_inert() -> None:
    paused = Paused(by=EVIL, why=EVIL, at=NOW)
    text = render_pilot([state(EVIL, why=EVIL, last=EVIL, outcome=EVIL, paused=paused)], "/q<!x>")
    assert "<!channel>" not in text and "<@U0EVIL>" not in text and "<https://" not in text
    assert "&lt;!channel&gt;" in text
    home = render_home(HomeState(pilots=(state(EVIL, why=EVIL, last=EVIL, outcome=EVIL),)), NOW)
    assert_valid_view(home)


def test_many_types_fit_one_answer_and_one_home_section_saying_how_many_more() -> None:
    long = "x" * 600
    states = [state(f"type-{n}." + "y" * 90, why=long, last=long, outcome=long) for n in range(40)]
    text = render_pilot(states, "/queue")
    assert len(text) <= MAX_ANSWER <= MAX_SECTION
    assert text.endswith("more piloted types.")
    assert "type-0." in text
    assert_valid_view(render_home(HomeState(pilots=tuple(states)), NOW))


def test_the_home_shows_the_pilot_only_where_a_type_has_one() -> None:
    assert "Pilot" not in view_text(render_home(HomeState(), NOW))
    view = render_home(HomeState(pilots=(state(),)), NOW)
    assert_valid_view(view)
    shown = view_text(view)
    # Its clock times shown in the reader's zone, as Slack renders `<!date>`.
    assert "*Pilot*" in shown and "its readings have wanted more runners since <!date^" in shown
    assert render_pilot([state()], "/queue") in shown, "what /queue pilot says"


def test_a_pause_is_a_change_of_state_and_what_it_is_doing_a_change_of_numbers() -> None:
    home = HomeState(pilots=(state(),))
    paused = HomeState(pilots=(state(paused=Paused(by="alice", why="paused from Slack", at=NOW)),))
    moved = HomeState(pilots=(state(why="waiting: the advice asks for no runners"),))
    assert digests(paused).state != digests(home).state
    assert digests(moved).state == digests(home).state
    assert digests(moved).numbers != digests(home).numbers
