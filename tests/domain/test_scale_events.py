"""A scale-up's event records what was scaled, by how much and by whom; events stored by 0.21.0
and before say it in words only, read once in `scale_of` for every reader."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.incidents import Event, Incident, ScaleDone, scale_of, with_action

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
TAKEN_ON = (
    "Took on the early warning's scale-up of linux.2xlarge by alice (minRunners 16 → 21): it "
    "goes back when the incident resolves, unless someone changes it meanwhile"
)


def test_a_scale_up_is_what_its_event_records_not_its_words() -> None:
    done = ScaleDone(runner_type="linux", added=5, by="alice", at=NOW, field="minRunners")
    # Words that would read as another scale-up: what the event records decides.
    event = Event(at=NOW, kind="scaled", text="Scaled windows by +9: x", scale=done)
    assert scale_of(event) == done


@pytest.mark.parametrize(
    ("event", "done"),
    [
        (
            Event(
                at=NOW,
                kind="scaled",
                text="Scaled linux.2xlarge by +10: minRunners 0 → 10 (max 120) (ARC)",
                actor="U0ALICE",
                actor_name="alice",
            ),
            ScaleDone(runner_type="linux.2xlarge", added=10, by="alice", at=NOW),
        ),
        # Taken on from an early warning: the words say who and how much, not when it was made.
        (
            Event(at=NOW, kind="scaled", text=TAKEN_ON),
            ScaleDone(
                runner_type="linux.2xlarge", added=5, by="alice", at=None, field="minRunners"
            ),
        ),
        (
            Event(
                at=NOW,
                kind="scaled",
                text="Took on the early warning's scale-up of linux by bob (minRunners unset → 3)",
            ),
            ScaleDone(runner_type="linux", added=3, by="bob", at=None, field="minRunners"),
        ),
    ],
)
def test_an_event_stored_before_scale_ups_were_recorded_is_read_from_its_words(
    event: Event, done: ScaleDone
) -> None:
    assert scale_of(event) == done


@pytest.mark.parametrize(
    "event",
    [
        Event(at=NOW, kind="diagnosed", text="Scaled linux by +5: not a scale-up's event"),
        Event(at=NOW, kind="scale_reverted", text="Put linux back (resolved): minRunners 5 → 0"),
        Event(at=NOW, kind="scaled", text="Scaled up somehow"),
    ],
)
def test_an_event_that_records_no_scale_up_has_none(event: Event) -> None:
    assert scale_of(event) is None


def test_a_stored_event_without_a_scale_up_loads_and_one_with_it_round_trips() -> None:
    old = '{"at":"2026-11-23T14:00:00Z","kind":"scaled","text":"Scaled linux by +5: x"}'
    assert Event.model_validate_json(old).scale is None
    done = ScaleDone(runner_type="linux", added=5, by="alice", at=NOW - timedelta(minutes=2))
    event = Event(at=NOW, kind="scaled", text="Scaled linux by +5: x", scale=done)
    assert Event.model_validate_json(event.model_dump_json()) == event
    # And as one of an incident's recent actions, stored with the incident.
    incident = Incident(
        id="1",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="Jobs queueing",
        started_at=NOW,
        opened_at=NOW,
        updated_at=NOW,
    )
    stored = with_action(incident, event).model_dump_json(exclude_none=True, exclude_defaults=True)
    assert Incident.model_validate_json(stored).recent_actions[-1].scale == done
