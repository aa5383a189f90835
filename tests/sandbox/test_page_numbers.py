"""The browser walk's reading of the page (`tests.support.page_numbers`), on texts as chromium
gives them for the local Slack page (`innerText` of the root and two replies)."""

from __future__ import annotations

from tests.support.page_numbers import (
    Missed,
    Moment,
    TypeLine,
    after_diagnostics,
    at_next_status,
    diagnostics_said,
    root_said,
    status_said,
)

TYPE = "linux.2xlarge"
ADVICE = "▲ rising +2.0 jobs/min · +18 runners would drain it in 30 min"


def root(bars: str = "▄▆█", *, diagnosed: bool = True, live: bool = True) -> str:
    latest = "• 17:12 UTC Diagnostics: likely cause One workflow's surge by alice"
    said = "Now · live from Prometheus at 17:12 UTC" if live else "As the alert says · Grafana"
    return f"""queuepilot
APP
05:12:31 PM
🔴 P2 · Jobs queueing in autoscaled machines
🔴 Firing · not acknowledged · ID 12
{said}
Longest wait: 8.4 min
Queued jobs: 30
Runner types (worst first)
• {TYPE}: 30 queued · longest wait 8.4 min · busy 30/30 · {bars} · {ADVICE}
🩺 Likely cause: One workflow's surge
Incident 12
Latest
{latest if diagnosed else "• 17:11 UTC Silenced for 4 h in Alertmanager by alice"}
Scale up…"""


def status(bars: str = "▄▆█", queued: str = "28") -> str:
    return f"""queuepilot
APP
05:12:31 PM
📊 Status update · 17:12 UTC
Firing for 2 min · not acknowledged
Longest wait: 8.4 min (no change)
Queued jobs: {queued} (+8)
By runner type
• {TYPE}: {queued} queued · longest wait 8.4 min · busy 20/20, 10 booting · {bars} · \
▲ rising +2.0 jobs/min · +8 runners would drain it in 30 min
Queue trend · incident 12
17:11:46
linux.2xlarge
Live from Prometheus"""


DIAGNOSTICS = f"""queuepilot
APP
05:12:31 PM
🩺 Diagnostics · incident 12 · 17:12 UTC · from Prometheus · asked by alice
Likely cause: One workflow's surge on {TYPE} (high confidence)
{TYPE} · 30 queued · longest wait 8.4 min · {ADVICE}
❌ Runner utilization: 30/30 busy (100%): no spare runner to take the queue
HUD's queued jobs: {TYPE} `periodic` 30 (schedule)"""


def test_each_message_is_read_for_its_reading_headline_and_type_line() -> None:
    shown = root_said(root(), TYPE)
    assert (shown.at, shown.total, shown.listed) == ("17:12 UTC", "30", 30.0)
    assert shown.line == TypeLine("30", "longest wait 8.4 min", ADVICE, "▄▆█")
    said = status_said(status(), TYPE)
    assert (said.at, said.total, said.listed) == ("17:12 UTC", "28", 28.0)
    assert said.line is not None
    assert said.line.outlook.endswith("+8 runners would drain it in 30 min")
    report = diagnostics_said(DIAGNOSTICS, TYPE)
    assert report.at == "17:12 UTC" and report.total is None
    assert report.line == TypeLine("30", "longest wait 8.4 min", ADVICE, "")


def test_a_listing_that_leaves_types_out_has_no_sum() -> None:
    shown = status_said(status().replace("Queue trend", "+2 more runner types\nQueue trend"), TYPE)
    assert shown.listed is None
    assert root_said(root(), "linux.4xlarge").line is None


def test_the_root_shows_the_diagnostics_reading_once_edited_with_the_earlier_status_bars() -> None:
    before = status()
    moment = after_diagnostics(root(), DIAGNOSTICS, before, status_before=before, runner_type=TYPE)
    assert moment is not None and moment.other.line is not None
    assert moment.root.line is not None and moment.root.line.queued == moment.other.line.queued
    # Not edited yet; or edited from a newer status's commit, whose reply is still to come.
    for text in (root(diagnosed=False), root("▃▄▆█")):
        assert (
            after_diagnostics(text, DIAGNOSTICS, before, status_before=before, runner_type=TYPE)
            is None
        )
    # A root left on the earlier status's numbers is read at that moment all the same, so the
    # walk's comparison catches it (the demo once showed "busy 20/20" there beside 30/30).
    stale = root().replace("30 queued · longest wait 8.4 min · busy 30/30", "28 queued")
    moment = after_diagnostics(stale, DIAGNOSTICS, before, status_before=before, runner_type=TYPE)
    assert moment is not None and moment.root.line is not None
    assert moment.root.line.queued == "28"
    # The report before the root's edit is still a moment to come.
    assert after_diagnostics(root(), None, before, status_before=before, runner_type=TYPE) is None


def test_a_newer_status_before_the_root_showed_the_diagnostics_ends_the_wait() -> None:
    newer = status("▃▄▆█", "30")
    missed = after_diagnostics(
        root("▃▄▆█"), DIAGNOSTICS, newer, status_before=status(), runner_type=TYPE
    )
    assert isinstance(missed, Missed)
    # The root already showed them: the newer status's reply does not undo that.
    assert (
        after_diagnostics(root(), DIAGNOSTICS, newer, status_before=status(), runner_type=TYPE)
        is not None
    )


def test_the_next_status_and_the_root_meet_on_its_commit() -> None:
    before, newer = status(), status("▃▄▆█", "30")
    assert at_next_status(root("▃▄▆█"), before, status_before=before, runner_type=TYPE) is None
    assert at_next_status(root(), newer, status_before=before, runner_type=TYPE) is None
    moment = at_next_status(root("▃▄▆█"), newer, status_before=before, runner_type=TYPE)
    assert moment is not None and moment.other.total == "30"


def test_the_first_status_meets_the_root_once_the_root_is_live() -> None:
    first = status("")
    assert at_next_status(root("", live=False), first, status_before=None, runner_type=TYPE) is None
    assert at_next_status(root(""), None, status_before=None, runner_type=TYPE) is None
    assert at_next_status(root(""), first, status_before=None, runner_type=TYPE) is not None


def test_the_readings_moments_tell_apart_what_the_minute_cannot() -> None:
    """The root follows each reading between statuses: within one minute it may show a reading
    before or after the status's. To the second, only the other message's own reading is its
    moment, and a root already past it has missed it."""
    first, before = status(""), status()
    for moments, expected in (
        ((60.0, 60.0), Moment),
        ((59.0, 60.0), type(None)),
        ((61.0, 60.0), Missed),
    ):
        found = at_next_status(
            root(""), first, status_before=None, runner_type=TYPE, moments=moments
        )
        assert isinstance(found, expected), (moments, found)
        found = after_diagnostics(
            root(), DIAGNOSTICS, before, status_before=before, runner_type=TYPE, moments=moments
        )
        assert isinstance(found, expected), (moments, found)
