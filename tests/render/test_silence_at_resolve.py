"""What the summary says of the silence made from Slack: ended with the incident, kept as its
maker chose, or still in force because ending it failed; and the root's word for a kept one."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from bot.domain.incident.incidents import ActiveSilence, Incident, Resolution, Status
from bot.render.replies import render_summary
from bot.render.root import render_root
from tests.support.incidents import T0, changed, make_incident

UNTIL = T0 + timedelta(hours=2)
DATE = f"<!date^{int(UNTIL.timestamp())}^"


def silenced(*, open_: bool = False, **changes: object) -> Incident:
    silence = ActiveSilence(
        silence_id="5f3c", backend="Alertmanager", until=UNTIL, by="U0ALICE", by_name="alice",
        at=T0, **changes,  # type: ignore[arg-type]
    )  # fmt: skip
    incident = make_incident().model_copy(update={"silence": silence})
    if open_:
        return incident
    ended = {"status": Status.RESOLVED, "resolved_at": T0 + timedelta(minutes=40)}
    return changed(incident, **{**ended, "resolution": Resolution.ALERT})


def summary_of(incident: Incident) -> str:
    return json.dumps(render_summary(incident, [], now=T0).blocks, ensure_ascii=False)


@pytest.mark.parametrize(
    ("incident", "said", "not_said"),
    [
        (
            silenced(),
            "🔕 Its silence was ended at resolve: if the alert fires again, it notifies.",
            "/queue unsilence",
        ),
        (
            silenced(kept=True),
            f"🔕 Its silence stays until {DATE}",
            "ended at resolve",
        ),
        (
            silenced(unended="Alertmanager answered 500: boom"),
            "⚠️ Its silence could not be ended at resolve (Alertmanager answered 500: boom): it "
            f"stays until {DATE}",
            "was ended",
        ),
        (
            silenced(open_=True),
            f"🔕 A silence made from Slack is still in force until {DATE}",
            "resolve",
        ),
    ],
    ids=["ended", "kept", "unended", "still firing"],
)
def test_the_summary_says_what_became_of_the_silence(
    incident: Incident, said: str, not_said: str
) -> None:
    text = summary_of(incident)
    assert said in text
    assert not_said not in text.split("🔕")[-1].split("⚠️")[-1]


def test_a_kept_silence_names_who_chose_it_and_how_to_remove_it() -> None:
    text = summary_of(silenced(kept=True))
    assert ", as *alice* chose (Alertmanager silence `5f3c`): `/queue unsilence 12`" in text


def test_the_root_says_a_silence_is_kept_after_the_resolve() -> None:
    root = json.dumps(render_root(silenced(open_=True, kept=True), now=T0).blocks)
    assert "kept after the resolve" in root
    assert "kept after" not in json.dumps(render_root(silenced(open_=True), now=T0).blocks)
