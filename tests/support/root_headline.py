"""The root's headline read back from its blocks, in the words a one-line surface (`/queue`'s list
of incidents, the storm digest) says it with: those must say what the root says."""

from __future__ import annotations

import re
from datetime import datetime

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import Incident
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.root import render_root
from tests.support.incidents import make_incident

_WAIT = re.compile(r"^(Longest wait|Slowest recent start): \*([^*]+)\*")
_QUEUED = re.compile(r"^Queued jobs: \*([^*]+)\*")
# A root labelled *Worst seen* (resolved, or the alert's numbers cleared) shows its peaks.
_PEAK_WAIT = re.compile(r"^Peak (longest wait|slowest recent start): \*([^*]+)\*")
_PEAK_QUEUED = re.compile(r"^Peak queued jobs(?: \([^)]*\))?: \*([^*]+)\*")


def root_headline(incident: Incident, now: datetime) -> tuple[str, str]:
    """("30 queued", "longest wait 40 min, slowest recent start 5 min") as the root's headline
    fields show them now; "" for a number the root does not show."""
    texts = [
        item["text"]
        for block in render_root(incident, now=now).blocks
        for item in block.get("fields") or ()
    ]
    worst = "*Worst seen*" in str(render_root(incident, now=now).blocks)
    queued_re, wait_re = (_PEAK_QUEUED, _PEAK_WAIT) if worst else (_QUEUED, _WAIT)
    queued = next((m.group(1) for t in texts if (m := queued_re.match(t))), None)
    waits = [m for t in texts if (m := wait_re.match(t))]  # each measure its own row
    return (
        f"{queued} queued" if queued is not None else "",
        ", ".join(f"{wait.group(1).lower()} {wait.group(2)}" for wait in waits),
    )


def headline_cases(at: datetime) -> dict[str, Incident]:
    """Two open incidents whose root says other numbers than the alert's own figure: one read
    live at `at` (30 queued across its types, longest wait 40 min, where the alert said 14 and
    114 min), one from the alert alone that names its types (4 + 10 queued, where its rule's
    maximum, one type's queue, says 10)."""
    live = FleetSnapshot(
        at=at,
        source="prometheus",
        runner_types={
            "linux.2xlarge": RunnerTypeMetrics(queued=12, longest_wait_mins=40),
            "linux.g5.4xlarge.nvidia.gpu": RunnerTypeMetrics(queued=18, longest_wait_mins=25),
        },
    )
    return {
        "live": make_incident(id="21", uid="u21", group_key="g21", group_hash="h21", live=live),
        "alert": make_incident(
            id="22",
            uid="u22",
            group_key="g22",
            group_hash="h22",
            numbers=QueueNumbers(114, 10, queue_time_over=True, queue_size_over=False),
            runner_types={
                "linux.2xlarge": RunnerQueue(queued=4, longest_wait_mins=20),
                "linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=10, longest_wait_mins=114),
            },
        ),
    }
