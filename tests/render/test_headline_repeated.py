"""The root's headline, repeated: `/queue`'s list of incidents and the storm digest say the queued
jobs and the longest wait the root says for the same incident at the same moment, whatever the
live reading holds (a wait "over" a number, a start's time, types without numbers, none at all)
and whatever the alert names. (They once said the alert's own figure, its rule's maximum and
often one type's queue, beside a root that totalled the types, live.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import Incident, Resolution, Status
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.digest import DigestEntry, render_digest
from bot.render.queue import overview_line
from bot.render.root import render_root
from tests.support.incidents import changed, make_incident
from tests.support.root_headline import root_headline

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
TYPES = ("linux.2xlarge", "linux.4xlarge", "linux.g5.4xlarge.nvidia.gpu")
SOME = st.one_of(st.none(), st.integers(0, 300).map(float))


@st.composite
def readings(draw: st.DrawFn) -> FleetSnapshot:
    names = draw(st.lists(st.sampled_from(TYPES), max_size=3, unique=True))
    types = {
        name: RunnerTypeMetrics(
            queued=draw(SOME),
            longest_wait_mins=draw(SOME),
            wait_over=draw(st.sampled_from([None, True])),
            wait_of_starts=draw(st.sampled_from([None, True])),
        )
        for name in names
    }
    source = draw(st.sampled_from(["prometheus", "hud", "alert"]))
    return FleetSnapshot(at=NOW, source=source, runner_types=types)


@st.composite
def incidents(draw: st.DrawFn) -> Incident:
    """An alert naming its types or not, its own figure anything (not their sum), maybe read
    live, open or resolved by hand (the numbers stay; the root no longer reads live)."""
    named = draw(st.lists(st.sampled_from(TYPES), max_size=3, unique=True))
    types = {name: RunnerQueue(queued=draw(SOME), longest_wait_mins=draw(SOME)) for name in named}
    numbers = QueueNumbers(draw(SOME), draw(SOME), queue_size_threshold=20)
    incident = make_incident(
        numbers=numbers, runner_types=types, live=draw(st.one_of(st.none(), readings()))
    )
    if draw(st.booleans()):
        return incident
    update = {
        "status": Status.RESOLVED,
        "resolution": Resolution.MANUAL,
        "resolved_at": NOW + timedelta(minutes=5),
    }
    return changed(incident, **update)


@settings(max_examples=200, deadline=None)
@given(incidents())
def test_the_list_and_the_digest_say_the_roots_queued_jobs_and_longest_wait(
    incident: Incident,
) -> None:
    queued, wait = root_headline(incident, NOW)
    state = "firing" if incident.is_open else "resolved"

    listed = overview_line(incident).splitlines()[0]
    digest = render_digest([DigestEntry(incident, threaded=True)], started=NOW, now=NOW, over=True)
    [line] = [ln for ln in digest.text.splitlines() if f"#{incident.id}" in ln]

    # A root that shows its peaks says so ("Worst seen"); the one-line surfaces say it too.
    worst = "worst seen: " if "*Worst seen*" in str(render_root(incident, now=NOW).blocks) else ""
    said = ", ".join(n for n in (wait, queued) if n)
    assert listed.endswith(f"— {state}" + (f", {worst}{said}" if said else "")), listed
    figures = ", ".join(n for n in (queued, wait) if n)
    if figures:
        assert f" · {worst}{figures} · " in line + " · ", (figures, line)
    else:
        assert "queued" not in line and "wait" not in line and "start" not in line, line
    # The root's notification text (what a push notification shows) says them too.
    if incident.is_open:
        fallback = render_root(incident, now=NOW).text
        assert fallback.endswith(": " + ", ".join(n for n in (wait, queued) if n)) or not (
            wait or queued
        ), (fallback, wait, queued)
