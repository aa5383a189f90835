"""The scale record as each surface says it: the summary, the postmortem, the alert's issue and
`/queue report` tell the same scale-ups, who made them, what came of them, and the minutes from
the alert to added capacity."""

from __future__ import annotations

from bot.domain.incidents import FollowUp, Incident, Resolution, Status
from bot.render.replies import render_summary
from tests.domain.test_scale_record import BIG, GPU, PILOT, act, at, incident


def resolved(*acts: object) -> Incident:
    done = incident(*acts)  # type: ignore[arg-type]
    return done.model_copy(
        update={"status": Status.RESOLVED, "resolved_at": at(40), "resolution": Resolution.ALERT}
    )


def summary_text(done: Incident) -> str:
    return str(render_summary(done, [], now=at(41)).blocks)


def test_the_summary_says_each_act_what_came_of_it_and_when_capacity_came() -> None:
    text = summary_text(
        resolved(act(6, 7, by=PILOT, came=True, seen=8), act(9, 5, came=False, seen=19))
    )
    assert f"✅ The pilot added +7 on {BIG} at <!date^" in text
    assert "they came up by <!date^" in text
    assert f"⚠️ alice added +5 on {BIG} at <!date^" in text and "they did not come up by" in text
    assert "⏱️ Capacity added 8 min after the alert" in text


def test_with_several_types_the_minutes_name_their_type_and_unknowns_say_so() -> None:
    text = summary_text(resolved(act(3, 2, came=True, seen=5), act(4, 1, GPU, by="bob")))
    assert f"⏱️ {BIG}: capacity added 5 min after the alert" in text
    assert GPU + ": capacity" not in text, "none came: no minutes"
    assert f"❔ bob added +1 on {GPU} at <!date^" in text
    assert "whether they came up is not known" in text


def test_a_scale_up_still_followed_is_said_as_such_and_nothing_scaled_says_nothing() -> None:
    followed = act(3, 2)
    still = incident(followed).model_copy(
        update={"follow_ups": (FollowUp(at=followed.at, due=at(13)),)}
    )
    assert "still followed" in summary_text(still)
    quiet = summary_text(resolved())
    assert "added +" not in quiet and "Capacity added" not in quiet


def test_the_summary_shows_the_latest_acts_and_counts_the_rest() -> None:
    many = [act(n, 1, came=True, seen=n + 1) for n in range(9)]
    text = summary_text(resolved(*many))
    assert "_3 earlier scale-ups not shown_" in text
    assert text.count("alice added +1") == 6
