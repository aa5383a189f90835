"""The Scale up… form's default: the judgement's advice, as much of it as one request may add
and the target accepts, in the shape the target accepts (the maximum raised where the floor
would be refused); nothing pre-filled when nothing is advised. Read from the rendered form, as
a responder who takes the default would submit it, and checked with the scaler's own check."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lightkube import KubeConfig

from bot.backends.kube import KubeAccess
from bot.backends.scale.arc import ArcScaler
from bot.backends.scale.aws import AsgScaler
from bot.config import Settings
from bot.domain.reading.early_warning import Phase, WarningState
from bot.domain.reading.judgement import Judgement, added
from bot.domain.scale.scaling import Capacity, ScaleOwner, ScalePreview, ScaleTarget, scale_default
from bot.render.scale_modal import (
    RAISE_MAX,
    ScaleForm,
    render_scale_confirm,
    render_scale_form,
)

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"
FORM = ScaleForm(ref="12:u12", channel="C1", runner_type=TYPE)
OWNER = ScaleOwner((TYPE,))
ARC = ArcScaler(Settings(), KubeAccess(KubeConfig.from_server("http://127.0.0.1:9").get()))
ASG = AsgScaler(Settings(), autoscaling=object())


def arc_capacity(current: int, minimum: int, maximum: int | None) -> Capacity:
    """As ARC's scaler reads a set: at its maximum once it runs that many."""
    at_maximum = maximum is not None and current >= maximum
    return Capacity(current, minimum, maximum, at_maximum=at_maximum)


def advised(
    runners: int, raise_by: int = 0, maximum: float | None = None, **fields: Any
) -> Judgement:
    return Judgement(
        at=NOW,
        queued=fields.pop("queued", 30.0),
        runners=runners,
        raise_maximum_by=raise_by,
        maximum=maximum,
        why=fields.pop("why", "drains 30 queued jobs of ~6 min in 30 min"),
        **fields,
    )


def preview_of(
    advice: Judgement | None,
    target: ScaleTarget,
    capacity: Capacity | None,
    scaler: Any = ARC,
) -> ScalePreview:
    """What `Scaling.preview` shows: the default checked with the scaler's own refusal."""

    def refusal(delta: int, raise_maximum: bool) -> str:
        return scaler.refusal(target, capacity, delta, raise_maximum=raise_maximum)

    raises = scaler.can_raise_maximum
    default = scale_default(advice, target, capacity, can_raise_maximum=raises, refusal=refusal)
    return ScalePreview(target, capacity, "", advice, raises, revert_after_s=3600, default=default)


def block(view: dict[str, Any], block_id: str) -> dict[str, Any] | None:
    return next((b for b in view["blocks"] if b.get("block_id") == block_id), None)


def submitted(view: dict[str, Any]) -> tuple[str | None, bool]:
    """What Review submits when nobody changes anything: the amount shown, the choice shown."""
    amount = block(view, "amount")
    assert amount is not None
    mode = block(view, "mode")
    raised = mode is not None and mode["element"]["initial_option"]["value"] == RAISE_MAX
    return amount["element"].get("initial_value"), raised


def contexts(view: dict[str, Any]) -> str:
    return " ".join(
        e["text"] for b in view["blocks"] if b["type"] == "context" for e in b["elements"]
    )


@settings(max_examples=400, deadline=None)
@given(
    maximum=st.integers(1, 200) | st.none(),
    minimum=st.integers(0, 200),
    current=st.integers(0, 220),
    runners=st.integers(0, 120),
    raise_by=st.integers(0, 120),
    judged_max=st.integers(1, 200) | st.none(),
    cap=st.integers(1, 50),
    ceiling=st.integers(1, 300) | st.none(),
)
# The report's warning: 16 runners of a maximum of 20, +28 advised.
@example(20, 16, 16, 28, 24, 20, 20, 150)
# The report's incident: a floor one below its maximum, the advice fitting by the reading.
@example(20, 19, 19, 23, 0, 40, 20, None)
def test_the_default_as_rendered_is_what_arc_accepts(
    maximum: int | None,
    minimum: int,
    current: int,
    runners: int,
    raise_by: int,
    judged_max: int | None,
    cap: int,
    ceiling: int | None,
) -> None:
    minimum = min(minimum, maximum) if maximum is not None else minimum  # ARC runs no other
    raise_by = min(raise_by, runners) if judged_max is not None else 0
    capacity = arc_capacity(current, minimum, maximum)
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=cap, ceiling=ceiling)
    advice = advised(runners, raise_by, judged_max)
    preview = preview_of(advice, target, capacity)
    view = render_scale_form(FORM, OWNER, preview)
    shown, raised = submitted(view)
    said = contexts(view)
    if shown is None:
        assert "Nothing is filled in" in said
        # Nothing advised, or no amount at all the target accepts as either shape.
        assert runners == 0 or all(
            ARC.refusal(target, capacity, 1, raise_maximum=shape) for shape in (False, True)
        )
        return
    delta = int(shown)
    assert ARC.refusal(target, capacity, delta, raise_maximum=raised) == "", (delta, raised)
    assert 1 <= delta <= cap, "within the target's cap"
    assert runners > 0, "never a number nobody advised"
    if not raised:
        assert delta <= runners, "never more than advised"
    # The review names the value that changes as the thread will.
    confirm = render_scale_confirm(
        ScaleForm(FORM.ref, "C1", TYPE, delta, raised), preview, "ARC", about="."
    )
    field = "maxRunners" if raised else "minRunners"
    start = (maximum if raised else minimum) or 0
    assert f"{field} {start} → {start + delta}" in confirm["blocks"][0]["text"]["text"]


@settings(max_examples=200, deadline=None)
@given(
    maximum=st.integers(1, 200),
    minimum=st.integers(0, 200),
    desired=st.integers(0, 200),
    runners=st.integers(0, 120),
    cap=st.integers(1, 50),
    ceiling=st.integers(1, 300) | st.none(),
)
def test_the_default_as_rendered_is_what_an_auto_scaling_group_accepts(
    maximum: int, minimum: int, desired: int, runners: int, cap: int, ceiling: int | None
) -> None:
    minimum = min(minimum, maximum)
    desired = min(max(desired, minimum), maximum)  # AWS keeps it between them
    capacity = Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)
    target = ScaleTarget(TYPE, "ci-linux-2xlarge", cap=cap, ceiling=ceiling)
    view = render_scale_form(FORM, OWNER, preview_of(advised(runners), target, capacity, ASG))
    shown, raised = submitted(view)
    assert block(view, "mode") is None and not raised, "an ASG's maximum is not ours to raise"
    if shown is None:
        assert runners == 0 or ASG.refusal(target, capacity, 1, raise_maximum=False)
        return
    assert ASG.refusal(target, capacity, int(shown), raise_maximum=False) == ""
    assert 1 <= int(shown) <= min(cap, runners)


def test_the_reported_warning_raises_the_maximum_toward_the_advices() -> None:
    """16 runners of a maximum of 20, +28 advised (the maximum to 44): raising minRunners by
    20 was refused on Confirm. The form now offers maxRunners 20 → 40, and says +4 more."""
    capacity = arc_capacity(16, 16, 20)
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20, ceiling=150)
    advice = advised(28, 24, 20, why="drains 28 queued jobs; only 4 fit under the maximum of 20")
    preview = preview_of(advice, target, capacity)
    view = render_scale_form(FORM, OWNER, preview)
    assert submitted(view) == ("20", True)
    said = contexts(view)
    assert (
        "Recommended: *+28 runners would drain it in 30 min; raise the maximum by 24 (20 → 44)*"
        in said
    )
    assert "One request adds at most +20: *+4 more after this one*." in said
    mode = block(view, "mode")
    assert mode is not None
    assert mode["hint"]["text"] == (
        "maxRunners is chosen (20 → 40): the advice raises the maximum to 44."
    )
    confirm = render_scale_confirm(
        ScaleForm(FORM.ref, "C1", TYPE, 20, True), preview, "ARC", about="."
    )
    assert "After the scale-up: maxRunners 20 → 40." in confirm["blocks"][0]["text"]["text"]


def test_a_floor_the_target_refuses_becomes_a_raised_maximum_saying_why() -> None:
    """The reading left room for +7; the set's floor is 16 of a maximum of 20 now, so a
    floor raised by 7 would be refused: the maximum rises by 7 instead."""
    capacity = arc_capacity(18, 16, 20)
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    view = render_scale_form(FORM, OWNER, preview_of(advised(7, 0, 40), target, capacity))
    assert submitted(view) == ("7", True)
    mode = block(view, "mode")
    assert mode is not None and mode["hint"]["text"] == (
        "maxRunners is chosen (20 → 27): minRunners would become 23, above maxRunners (20): "
        "ask for at most +4, or raise maxRunners."
    )


def test_a_floor_that_fits_is_raised_and_the_choice_stays_offered() -> None:
    capacity = arc_capacity(40, 0, 120)
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    view = render_scale_form(FORM, OWNER, preview_of(advised(6, 0, 120), target, capacity))
    assert submitted(view) == ("6", False)
    assert "at its maximum" not in str(view["blocks"])
    assert "more after this one" not in contexts(view)


@pytest.mark.parametrize(
    ("advice", "said"),
    [
        (
            advised(
                0, clears_in_mins=3.2, why="the queue fell 4.0 jobs/min over the last readings"
            ),
            "Recommended: *none: it clears in ~4 min* (the queue fell 4.0 jobs/min over the last "
            "readings).",
        ),
        (
            advised(0, booting=10, why="the 10 booting cover the ~8 needed"),
            "Recommended: *+10 runners on their way should drain it in 30 min* (the 10 "
            "booting cover the ~8 needed).",
        ),
        (
            advised(0, queued=0.0, why=""),
            "Recommended: *none*: no job waits for a runner in this reading.",
        ),
        (None, "No reading of this runner type to advise from: type how many runners to add."),
    ],
    ids=["clears", "booting", "nothing-waits", "no-reading"],
)
def test_no_advice_fills_in_nothing_and_says_the_advice(
    advice: Judgement | None, said: str
) -> None:
    """Nothing pre-filled (Slack then asks for a value before Review): a responder who takes the
    default cannot add runners nobody advised."""
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    view = render_scale_form(FORM, OWNER, preview_of(advice, target, arc_capacity(20, 20, 40)))
    amount = block(view, "amount")
    assert amount is not None and not amount.get("optional")
    assert "initial_value" not in amount["element"]
    assert amount["element"]["placeholder"]["text"].startswith("None advised")
    assert said in contexts(view)


@pytest.mark.parametrize(
    ("capacity", "raised"),
    [
        (arc_capacity(20, 20, 20), True),  # a floor at the maximum: ARC refuses it higher
        (arc_capacity(20, 5, 20), True),  # running its maximum: a higher floor changes nothing
        (arc_capacity(8, 5, 20), False),  # room under the maximum: the floor is the lever
    ],
    ids=["floor-at-maximum", "running-its-maximum", "room-below"],
)
def test_with_nothing_advised_the_choice_is_a_shape_a_first_runner_fits(
    capacity: Capacity, raised: bool
) -> None:
    """Three runners booting, say: nothing advised, nothing filled in; a responder who types 1
    under the choice made for them is not refused for a floor raised above the maximum."""
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    view = render_scale_form(FORM, OWNER, preview_of(advised(0, why=""), target, capacity))
    assert submitted(view) == (None, raised)
    assert ARC.refusal(target, capacity, 1, raise_maximum=raised) == ""


def test_an_auto_scaling_group_at_its_max_size_is_offered_nothing_saying_why() -> None:
    capacity = Capacity(40, 0, 40, at_maximum=True)
    target = ScaleTarget(TYPE, "ci-linux-2xlarge", cap=20)
    view = render_scale_form(FORM, OWNER, preview_of(advised(5), target, capacity, ASG))
    assert submitted(view) == (None, False)
    assert (
        "Nothing is filled in: desired capacity would become 45, above the group's MaxSize (40)"
        in contexts(view)
    )
    room = Capacity(36, 0, 40)
    view = render_scale_form(FORM, OWNER, preview_of(advised(7), target, room, ASG))
    assert submitted(view) == ("4", False)
    assert (
        "Filled in: +4, the most the target takes now: desired capacity would become 43, above "
        "the group's MaxSize (40): ask for at most +4." in contexts(view)
    )


def test_while_the_capacity_is_read_the_form_has_no_input_to_keep() -> None:
    """Slack keeps an input's value across views.update when its IDs stay: an amount shown
    before the advice is known would stay in its place."""
    view = render_scale_form(FORM, OWNER, None)
    assert not [b for b in view["blocks"] if b["type"] == "input"]
    assert "submit" not in view
    assert "Reading the current capacity" in str(view["blocks"])


def warning(text: str, updated: datetime) -> WarningState:
    return WarningState(
        TYPE, "C1", "abc123", Phase.ACTIVE, text, NOW.timestamp(), updated.timestamp()
    )


def test_a_warnings_form_shows_one_reading_not_the_warnings_older_words() -> None:
    """The warning's words are the reading that raised it; the form's numbers and advice are the
    reading now: the header names the warning, the numbers are said once, of one reading."""
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    advice = advised(6, 0, 120, busy=20.0, registered=20.0)
    older = f"{TYPE}: queue building, 9 jobs queued and +30.2 jobs/min on 16 runners; +1 runner"
    owner = ScaleOwner((TYPE,), warning=warning(older, NOW - timedelta(minutes=2)))
    view = render_scale_form(FORM, owner, preview_of(advice, target, arc_capacity(40, 0, 120)))
    header = view["blocks"][0]["text"]["text"]
    assert header.startswith(f"*Early warning* · {TYPE}, raised <!date^")
    assert "30.2" not in str(view["blocks"]) and "16 runners" not in str(view["blocks"])
    assert "|09:00 UTC>: *30* queued" in contexts(view) and "busy 20/20" in contexts(view)
    assert f"Recommended: *{advice.advice}*" in contexts(view)


def review_of(form: ScaleForm, advice: Judgement, capacity: Capacity) -> dict[str, Any]:
    target = ScaleTarget(TYPE, "arc-runners/linux-2xlarge", cap=20)
    shown = preview_of(advice, target, capacity)
    return render_scale_confirm(form, shown, "ARC", about="Recorded in the thread.")


def sections(view: dict[str, Any]) -> str:
    return " ".join(b["text"]["text"] for b in view["blocks"] if b["type"] == "section")


def offered(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["action_id"], e["value"])
        for b in view["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    ]


def test_the_review_says_the_advice_moved_since_the_form_opened_and_offers_it() -> None:
    """Opened at +5, the advice is +7 by the review: said, and +7 offered in one click."""
    opened = replace(FORM, delta=5, advised=5)
    view = review_of(opened, advised(7), arc_capacity(10, 0, 120))
    assert "The advice moved since the form opened: +5 then, *+7* now" in sections(view)
    assert offered(view) == [("scale_take_advice", "7")]
    # Unmoved and taken as advised: nothing to say.
    taken = review_of(replace(FORM, delta=7, advised=7), advised(7), arc_capacity(10, 0, 120))
    assert "advice" not in sections(taken) and offered(taken) == []
    # A typed amount beside an unmoved advice: said, and the advice offered.
    typed = review_of(replace(FORM, delta=2, advised=7), advised(7), arc_capacity(10, 0, 120))
    assert "You chose +2; the advice is *+7*" in sections(typed)


def test_where_pods_cannot_start_nothing_raises_a_bound_and_a_typed_amount_is_warned() -> None:
    stuck = advised(0, queued=6.0, cannot_start=4, needed=6, held=4)
    assert stuck.advice.startswith("none until pods start")
    target = ScaleTarget(TYPE, "arc-runners/linux-g5", cap=20)
    at_max = arc_capacity(14, 0, 14)
    form = render_scale_form(FORM, OWNER, preview_of(stuck, target, at_max))
    amount, raised = submitted(form)
    assert amount is None and not raised, "neither a number nor a higher maximum preselected"
    review = review_of(replace(FORM, delta=2), stuck, at_max)
    assert f"⚠️ Runner pods of this type cannot all start: *{stuck.advice}*" in sections(review)
    assert offered(review) == []


def test_runners_added_while_pods_cannot_start_are_never_booting() -> None:
    stuck = advised(0, queued=6.0, cannot_start=4, needed=6, held=4)
    after = added(stuck, 2)
    assert (after.booting, after.held) == (0, 6)
    assert "booting" not in after.advice
