"""The numbers at the head of an incident's root, which `/queue`'s list of incidents and the storm
digest repeat: one computation, so no surface says the alert's "14 queued" (its rule's maximum,
often one runner type's queue) beside a root that says 30 queued across the types, live.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.fleet import FleetSnapshot, longest_wait
from bot.domain.incidents import Incident, queued_total
from bot.domain.units import wait_said


@dataclass(frozen=True)
class Headline:
    """Jobs queued across the incident's runner types and its longest wait (as measured: "over",
    a start's time), and the live reading they are from; `live` None: the alert's numbers."""

    queued: float | None
    wait_mins: float | None
    wait_over: bool | None = None
    wait_of_starts: bool | None = None
    live: FleetSnapshot | None = None
    worst: bool = False  # a resolved incident's: the worst seen (its peaks), as its summary says

    @property
    def wait(self) -> str:
        """ "longest wait 114 min", "slowest recent start 12 min", or "" when none was read."""
        return wait_said(self.wait_mins, over=self.wait_over, of_starts=self.wait_of_starts)


def shown_live(incident: Incident) -> FleetSnapshot | None:
    """The live reading the root shows: the incident's latest, while it is open (a resolved one
    shows what the alert said and its peaks)."""
    live = incident.live
    return live if live is not None and live.is_live and incident.is_open else None


def headline(incident: Incident) -> Headline:
    """From the live reading the root shows when it has numbers (a reading without any leaves
    the alert's), else the alert's: its types' queues summed when it names them
    (`queued_total`), and its longest wait. A resolved incident is a record, and one whose
    alert's numbers were cleared has none to say: their worst seen, the peaks the summary gives
    (a drained queue's alert said 36 beside a summary's peak of 28)."""
    live = shown_live(incident)
    if live is not None:
        types = live.runner_types.values()
        worst = longest_wait(types)
        queued = [m.queued for m in types if m.queued is not None]
        if worst is not None:
            total = sum(queued) if queued else None
            return Headline(
                total, worst.longest_wait_mins, worst.wait_over, worst.wait_of_starts, live
            )
        if queued:
            return Headline(sum(queued), None, live=live)
    if incident.is_open:
        said = Headline(
            queued_total(incident.numbers, incident.runner_types),
            incident.numbers.max_queue_time_mins,
        )
        if said.queued is not None or said.wait_mins is not None:
            return said
    peak = incident.peak
    return Headline(peak.max_queue_size, peak.max_queue_time_mins, worst=True)
