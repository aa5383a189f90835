"""A responder's first act on an incident acknowledges it (`ACK_ON_ACTION`): whoever silenced,
scaled or ran diagnostics is on it, and the Home and the root should say so rather than "nobody
has acknowledged it". Looking at it (`/queue`, the jobs, a postmortem draft) takes nothing on;
the pilot's acts name no person, so they never do."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.domain.incident.incidents import ACKNOWLEDGED_BY_ACTING, Event, Incident, acknowledge

# The acts that take an incident on, and how its acknowledgement names each.
TAKES_ON = {
    "silenced": "silenced",
    "unsilenced": "removed its silence",
    "scaled": "scaled up",
    "diagnosed": "ran diagnostics",
    "pilot_undone": "undid the pilot's step",
}


def acknowledged_by_acting(
    incident: Incident, events: Sequence[Event], *, now: datetime
) -> tuple[Incident, tuple[Event, ...]]:
    """The incident and `events` with the acknowledgement the first person's act among them
    makes, just after that act; unchanged when it is resolved or someone has it already."""
    if incident.acknowledged.by or not incident.is_open:
        return incident, tuple(events)
    for i, act in enumerate(events):
        if act.actor and act.kind in TAKES_ON:
            ack = Event(
                at=act.at,
                kind=ACKNOWLEDGED_BY_ACTING,
                text=f"Acknowledged ({TAKES_ON[act.kind]})",
                actor=act.actor,
                actor_name=act.actor_name,
            )
            taken = acknowledge(incident, by=act.actor, name=act.actor_name, now=now)
            return taken, (*events[: i + 1], ack, *events[i + 1 :])
    return incident, tuple(events)
