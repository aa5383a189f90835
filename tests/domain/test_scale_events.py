"""A scale-up's event records what was scaled, by how much and by whom, through Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.incident.incidents import Event, Incident, with_action
from bot.domain.scale.scale_ups import ScaleUp

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)


def test_a_stored_event_without_a_scale_up_loads_and_one_with_it_round_trips() -> None:
    old = '{"at":"2026-11-23T14:00:00Z","kind":"scaled","text":"Scaled linux by +5: x"}'
    assert Event.model_validate_json(old).scale is None
    done = ScaleUp(runner_type="linux", added=5, by="alice", at=NOW - timedelta(minutes=2))
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
