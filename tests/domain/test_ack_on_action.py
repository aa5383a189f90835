"""A person's first act acknowledges an incident; the pilot's, and acts on one resolved or
already someone's, do not. Rows of a table, as the lifecycle's own tests are."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.domain.incident.ack_on_action import acknowledged_by_acting
from bot.domain.incident.incidents import ACKNOWLEDGED_BY_ACTING, Event, Incident, acknowledge
from tests.support.incidents import changed
from tests.support.store import T0, incident

NOW = T0 + timedelta(minutes=3)
SILENCED = Event(at=NOW, kind="silenced", text="Silenced for 1 h", actor="U1", actor_name="alice")
PILOT = Event(at=NOW, kind="scaled", text="Scaled linux.2xlarge by +4")
SEEN = Event(at=NOW, kind="silence_seen", text="Alertmanager shows it")


def test_a_persons_first_act_is_followed_by_their_acknowledgement() -> None:
    taken, events = acknowledged_by_acting(incident("1"), (SILENCED, SEEN), now=NOW)
    assert (taken.acknowledged.by, taken.acknowledged.name) == ("U1", "alice")
    assert [(e.kind, e.text, e.actor_name) for e in events] == [
        ("silenced", "Silenced for 1 h", "alice"),
        (ACKNOWLEDGED_BY_ACTING, "Acknowledged (silenced)", "alice"),
        ("silence_seen", "Alertmanager shows it", ""),
    ]


@pytest.mark.parametrize(
    ("before", "acts"),
    [
        (incident("1"), (PILOT,)),  # the pilot is no person
        (incident("1"), (Event(at=NOW, kind="postmortem", text="Drafted", actor="U1"),)),
        (acknowledge(incident("1"), by="U2", name="bob", now=T0), (SILENCED,)),
        (
            changed(
                incident("1"),
                resolved_at=T0,
            ),
            (SILENCED,),
        ),
    ],
    ids=["pilot", "a postmortem draft", "already bob's", "resolved"],
)
def test_nothing_else_acknowledges(before: Incident, acts: tuple[Event, ...]) -> None:
    assert acknowledged_by_acting(before, acts, now=NOW) == (before, acts)
