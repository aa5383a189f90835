"""The postmortem rendered from a seeded incident: each section as a table of cases, the whole
document against a golden file, and hostile outside text that can never break its tables or
become a link, an @mention or a heading.

The golden file is `tests/render/golden/postmortem.md`; after a deliberate change of the
write-up, `UPDATE_GOLDEN=1 .venv/bin/pytest -n 0 tests/render/test_postmortem.py` rewrites it
(and the diff is then read like any other change)."""

from __future__ import annotations

import os
import re
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import (
    EARLY_WARNING,
    REFUSED,
    Event,
    Incident,
    Links,
    Snapshot,
    Status,
    record_status,
    resolve_drained,
    resolve_manually,
)
from bot.domain.incident.trend import Trend
from bot.domain.queue_cost.jobs import (
    JobsView,
    RunnerTypeJobs,
    Trigger,
    WorkflowQueue,
    workflows_seen,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.units import minutes, number
from bot.render.numbers import wait_of
from bot.render.postmortem import MAX_CHART_ROWS, md_escape, render_postmortem
from bot.render.replies import render_summary
from tests.support.incidents import T0, changed, make_incident, with_scaled

GOLDEN = Path(__file__).parent / "golden" / "postmortem.md"
CPU, GPU = "linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu"
RESOLVED_AT = T0 + timedelta(minutes=95)
NOW = T0 + timedelta(hours=2)
SECTIONS = [
    "## Summary",
    "## Impact",
    "## Scale-ups",
    "## Timeline",
    "## Diagnosis",
    "## Queue over time",
    "## Questions for the team",
]


def queue_at(minute: int) -> dict[str, RunnerQueue]:
    """The seeded queues: CPU builds to 30 at minute 40 and drains; the GPU stays at 10."""
    cpu = max(30 - abs(minute - 40) * 0.5, 0)
    return {
        CPU: RunnerQueue(queued=cpu, longest_wait_mins=cpu * 2),
        GPU: RunnerQueue(queued=10, longest_wait_mins=20 + minute / 5),
    }


def seeded(*, statuses: int = 18, **changes: Any) -> Incident:
    """The reference alert, read live every 5 minutes, then resolved when its queue drained."""
    incident = make_incident(peak=QueueNumbers(), **changes)
    for n in range(statuses):
        at = T0 + timedelta(minutes=5 * n)
        types = queue_at(5 * n)
        total = sum(q.queued or 0 for q in types.values())
        waits = max(q.longest_wait_mins or 0 for q in types.values())
        snapshot = Snapshot(at=at, numbers=QueueNumbers(waits, total), runner_types=types)
        incident = record_status(incident, snapshot)
    live = FleetSnapshot(
        at=T0 + timedelta(minutes=85),
        source="prometheus",
        runner_types={
            CPU: RunnerTypeMetrics(queued=0, busy=28, registered=30, maximum=30),
            GPU: RunnerTypeMetrics(queued=10, busy=10, registered=10, maximum=10),
        },
    )
    incident = changed(
        incident,
        live=live,
        acknowledged_by="U0ALICE",
        acknowledged_name="alice",
        likely_cause=(
            "Resource constraints (high confidence): linux.2xlarge: at its maximum 30 of 30"
        ),
        notifications=6,
    )
    going_back = ScaleUp(
        runner_type=CPU,
        added=10,
        by="alice",
        at=T0 + timedelta(minutes=14),
        field="maxRunners",
        before=20,
        after=30,
        back="r1",
        back_to=20,
        back_when="once its queue has stayed drained 30 min",
        back_by=T0 + timedelta(hours=4),
    )
    return resolve_drained(with_scaled(incident, going_back), now=RESOLVED_AT)


WARNED = (
    "Took on the early warning raised 6 min before the alert fired, which said: linux.2xlarge: "
    "queue building, 8 jobs queued and +2.0 jobs/min at its maximum of 20 runners; at this rate "
    "the alert fires in ~3 min"
)
REFUSAL = (
    "Scale-up of linux.2xlarge by +40 refused: At most +20 runners per request for "
    "`linux.2xlarge` (its cap). Ask again after this one if more are needed."
)


def timeline() -> list[Event]:
    def at(mins: int) -> datetime:
        return T0 + timedelta(minutes=mins)

    alice = {"actor": "U0ALICE", "actor_name": "alice"}
    return [
        Event(at=at(0), kind="opened", text="Alert fired: Jobs queueing in autoscaled machines"),
        Event(at=at(1), kind=EARLY_WARNING, text=WARNED),
        Event(at=at(5), kind="updated", text="updated"),
        Event(at=at(6), kind="acknowledged", text="Acknowledged", **alice),
        Event(at=at(8), kind="silenced", text="Silenced for 1 h", **alice),
        *(Event(at=at(m), kind="updated", text="updated") for m in (9, 10)),
        Event(
            at=at(12), kind="diagnosed", text="Diagnostics: likely cause Resource constraints"
        ).model_copy(update=alice),
        Event(at=at(13), kind=REFUSED, text=REFUSAL, actor="U0BOB", actor_name="bob"),
        Event(
            at=at(14),
            kind="scaled",
            text="Scaled linux.2xlarge by +10 (maxRunners 20 → 30)",
            scale=ScaleUp(runner_type=CPU, added=10, by="alice", at=at(14)),
            **alice,
        ),
        Event(at=at(95), kind="resolved", text="The queue drained: resolved automatically"),
    ]


def jobs_view(at: datetime = NOW) -> JobsView:
    workflows = (
        WorkflowQueue(
            "periodic",
            22,
            58.0,
            "https://github.com/o/r/actions/runs/1",
            "test (1)",
            ((Trigger.SCHEDULE, 22),),
            last_hour=40,
            day_before=4,
        ),
        WorkflowQueue(
            "pull",
            3,
            12.0,
            "https://github.com/o/r/actions/runs/2",
            "build",
            ((Trigger.PULL_REQUEST, 3),),
            last_hour=9,
        ),
    )
    return JobsView(
        source="GitHub",
        at=at,
        runner_types={CPU: RunnerTypeJobs(CPU, 25, workflows)},
    )


def document(
    incident: Incident | None = None,
    events: list[Event] | None = None,
    jobs: JobsView | None = None,
    jobs_note: str = "",
) -> str:
    """The write-up of `incident`, its workflows' record what the postmortem read (`jobs`, or
    why none: `jobs_note`; neither: no postmortem read any)."""
    incident = incident if incident is not None else seeded()
    if jobs is not None or jobs_note:
        types = sorted(incident.shown_types or incident.runner_types)
        seen = workflows_seen(jobs, jobs_note, types=types, ended=incident.resolved.at)
        incident = incident.model_copy(update={"workflows": seen})
    return render_postmortem(incident, timeline() if events is None else events, now=NOW)


def section(doc: str, heading: str) -> str:
    """One section of the document, from its heading to the next one."""
    start = doc.index(heading + "\n")
    end = doc.find("\n## ", start + len(heading))
    return doc[start : end if end != -1 else len(doc)]


# --- the whole document --------------------------------------------------------------------------


def test_the_whole_document_matches_the_golden_file() -> None:
    doc = document(jobs=jobs_view())
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(doc, encoding="utf-8")
    assert doc == GOLDEN.read_text(encoding="utf-8")
    assert document(jobs=jobs_view()) == doc, "the same input, the same text"
    assert [line for line in doc.splitlines() if line.startswith("## ")] == SECTIONS


def test_the_postmortem_says_the_summarys_numbers() -> None:
    """One set of numbers: the peak wait, the peak queue (with its label) and the per-type peaks
    the summary shows are the ones the postmortem shows."""
    incident = seeded()
    summary = str(render_summary(incident, timeline(), now=NOW).blocks)
    impact = section(document(incident), "## Impact")
    peak = incident.peaks.numbers
    assert peak.max_queue_time_mins is not None and peak.max_queue_size is not None
    assert f"Peak longest wait: *{minutes(peak.max_queue_time_mins)}*" in summary
    assert f"Peak longest wait: **{minutes(peak.max_queue_time_mins)}**" in impact
    assert f"Peak queued jobs (all runner types): *{number(peak.max_queue_size)}*" in summary
    assert f"Peak queued jobs (all runner types): **{number(peak.max_queue_size)}**" in impact
    for name, queue in incident.peaks.types.items():
        assert queue.queued is not None
        worst = f"{number(queue.queued)} | {wait_of(queue)} |"
        assert f"| {name} | " in impact and worst in impact
    # A refused request is on the timeline of both, and an action taken in neither.
    assert "Actions taken: *4*, by *alice*" in summary
    assert "| Actions taken | 4, by alice |" in document(incident)
    assert "Scale-up of linux.2xlarge by +40 refused" in summary


# --- each section, as a table --------------------------------------------------------------------

SUMMARY_CASES = [
    (
        "resolved by the drain",
        {},
        [
            "| Incident | 12 |",
            "| Ended | 2025-09-16 18:35 UTC (queue drained) |",
            "| Duration | 1 h 35 min |",
            "| Priority | P2 |",
            "| Team | pytorch-dev-infra |",
            "| Acknowledged by | alice |",
            # A refused request is something asked, not done: counted apart.
            "| Actions taken | 4, by alice |",
            "| Requests refused | 1, by bob |",
            "| Notifications | 6 |",
        ],
    ),
    ("still firing", {"open": True}, ["| Ended | still firing |", "| Duration | 2 h so far |"]),
    (
        "resolved by hand",
        {"manual": True},
        ["| Ended | 2025-09-16 18:35 UTC (resolved by ursula) |"],
    ),
    (
        "no priority nor team",
        {"priority": None, "team": None},
        ["| Priority | not given |", "| Team | not given |"],
    ),
    ("reopened", {"reopened": 2}, ["| Reopened | 2× |"]),
]


@pytest.mark.parametrize(
    ("case", "change", "expected"), SUMMARY_CASES, ids=[c[0] for c in SUMMARY_CASES]
)
def test_summary(case: str, change: dict[str, Any], expected: list[str]) -> None:
    doc = document(variant(change))
    shown = section(doc, "## Summary")
    for line in expected:
        assert line in shown, (case, line, shown)
    if change.get("open"):
        assert "**Draft: the incident is still firing**" in doc
    else:
        assert "The incident is resolved." in doc


def variant(change: dict[str, Any]) -> Incident:
    """The seeded incident with one thing different (still open, resolved by hand, a field)."""
    change = dict(change)
    incident = seeded()
    if change.pop("open", False):
        incident = changed(
            seeded(),
            status=Status.FIRING,
            resolved_at=None,
            resolution=None,
        )
    if change.pop("manual", False):
        open_one = changed(
            incident,
            status=Status.FIRING,
            resolved_at=None,
        )
        incident = resolve_manually(open_one, by="U0URSULA", name="ursula", now=RESOLVED_AT)
    return changed(incident, **change)


# The alert said 50 at minute 10, naming no runner type: more than any reading summed.
ALERT_PEAK = Snapshot(at=T0 + timedelta(minutes=10), numbers=QueueNumbers(60, 50))
IMPACT_CASES = [
    (
        "peaks and types",
        {},
        None,
        "",
        [
            # Each peak at its own moment.
            "- Peak longest wait: **60 min** at 2025-09-16 17:40 UTC",
            "- Peak queued jobs (all runner types): **40** at 2025-09-16 17:40 UTC",
            "- Drained in: **55 min** from the peak",
            # The queue at its height (not as the drain left it), beside each type's worst.
            "The queue at its peak, 2025-09-16 17:40 UTC, and each runner type at its own worst:",
            "| Runner type | Queued at the peak | Wait at the peak | Most queued | Worst wait |",
            "| linux.2xlarge | 30 | longest wait 60 min | 30 | longest wait 60 min |",
            "| linux.g5.4xlarge.nvidia.gpu | 10 | longest wait 28 min | 10 | longest wait 37 min |",
            # Where the incident left the queue and the runners, said as such.
            "The last reading, 2025-09-16 18:25 UTC:",
            "| linux.2xlarge | 0 | – | busy 28/30 |",
            "| linux.g5.4xlarge.nvidia.gpu | 10 | ? | busy 10/10 |",
        ],
    ),
    (
        "the alert's own figure above every reading",
        {"peak": QueueNumbers(60, 50), "peak_snapshot": ALERT_PEAK},
        None,
        "",
        [
            "- Peak queued jobs (as the alert said): **50**",
            "- Drained in: **1 h 25 min** from the peak",
            "At its peak, 2025-09-16 17:10 UTC, the alert said 50 queued, naming no runner type; "
            "each runner type at its own worst:",
            "| linux.2xlarge | 30 | longest wait 60 min |",
        ],
    ),
    (
        "no jobs source",
        {},
        None,
        "no jobs source is configured",
        ["Jobs and workflows affected: not known (no jobs source is configured)."],
    ),
    (
        "jobs read after the incident",
        {},
        jobs_view(),
        "",
        [
            "Jobs and workflows affected, as GitHub read them on 2025-09-16 19:00 UTC:",
            "| linux.2xlarge | periodic | 22 | 40 |",
            "| linux.2xlarge | pull | 3 | 9 |",
        ],
    ),
    (
        "jobs read long after",
        {},
        jobs_view(RESOLVED_AT + timedelta(hours=3)),
        "",
        ["not known (the jobs source counts the last hour's arrivals"],
    ),
    (
        "the alert's numbers only",
        {"peak_types": {}, "live": None, "peak_snapshot": None, "trend": Trend()},
        None,
        "",
        [
            "Runner types, as the alert said:",
            "| linux.2xlarge | 4 | longest wait 20 min |",
        ],
    ),
]


@pytest.mark.parametrize(
    ("case", "change", "jobs", "note", "expected"), IMPACT_CASES, ids=[c[0] for c in IMPACT_CASES]
)
def test_impact(
    case: str, change: dict[str, Any], jobs: JobsView | None, note: str, expected: list[str]
) -> None:
    shown = section(document(variant(change), jobs=jobs, jobs_note=note), "## Impact")
    for line in expected:
        assert line in shown, (case, line, shown)


TIMELINE_CASES = [
    (
        "the alert",
        timeline(),
        ["| 2025-09-16 17:00 | Alert fired: Jobs queueing in autoscaled machines |   |"],
    ),
    (
        "who acted",
        timeline(),
        [
            "| 2025-09-16 17:14 | Scaled linux.2xlarge by +10 (maxRunners 20 → 30) | alice |",
            "| 2025-09-16 17:08 | Silenced for 1 h | alice |",
        ],
    ),
    (
        "the early warning taken on, and a refused request",
        timeline(),
        [
            "| 2025-09-16 17:01 | Took on the early warning raised 6 min before the alert fired, "
            "which said: linux.2xlarge: queue building",
            "| 2025-09-16 17:13 | Scale-up of linux.2xlarge by +40 refused: At most +20 runners "
            "per request for \\`linux.2xlarge\\` (its cap). Ask again after this one if more are "
            "needed. | bob |",
        ],
    ),
    (
        "re-notifications, one row per run",
        timeline(),
        [
            "| 2025-09-16 17:09 – 2025-09-16 17:10 | The alert was re-notified 2 times |   |",
            "| 2025-09-16 17:05 | The alert was re-notified |   |",
        ],
    ),
    (
        "put-backs still to come",
        timeline(),
        [
            "Still to put back:",
            "- linux.2xlarge maxRunners 30 goes back to 20 once its queue has "
            "stayed drained 30 min (at the latest 2025-09-16 21:00 UTC)",
        ],
    ),
    ("nothing recorded", [], ["_Nothing was recorded on the timeline._"]),
    (
        "a long one",
        [
            Event(at=T0 + timedelta(seconds=s), kind="acknowledged", text=f"Ack {s}", actor="U1")
            for s in range(205)
        ],
        ["_5 earlier events not shown._", "| Ack 204 | U1 |"],
    ),
]


@pytest.mark.parametrize(
    ("case", "events", "expected"), TIMELINE_CASES, ids=[c[0] for c in TIMELINE_CASES]
)
def test_timeline(case: str, events: list[Event], expected: list[str]) -> None:
    shown = section(document(events=events), "## Timeline")
    for line in expected:
        assert line in shown, (case, line, shown)


DIAGNOSIS_CASES = [
    (
        "cause and evidence",
        "Resource constraints (high confidence): linux.2xlarge: at its maximum 30 of 30",
        timeline(),
        [
            "**Likely cause:** Resource constraints (high confidence)",
            "**Evidence:** linux.2xlarge: at its maximum 30 of 30",
            "- 2025-09-16 17:12 UTC, by alice: Diagnostics: likely cause Resource constraints",
        ],
    ),
    (
        "not determined",
        "not determined (no runner type is queueing in the numbers at hand)",
        [],
        ["**Likely cause:** not determined (no runner type is queueing in the numbers at hand)"],
    ),
    ("never run", "", [], ["_Diagnostics were not run during this incident._"]),
]


@pytest.mark.parametrize(
    ("case", "cause", "events", "expected"), DIAGNOSIS_CASES, ids=[c[0] for c in DIAGNOSIS_CASES]
)
def test_diagnosis(case: str, cause: str, events: list[Event], expected: list[str]) -> None:
    shown = section(document(variant({"likely_cause": cause}), events), "## Diagnosis")
    for line in expected:
        assert line in shown, (case, line, shown)


def test_queue_over_time_samples_the_charts_readings_keeping_the_first_last_and_peak() -> None:
    shown = section(document(), "## Queue over time")
    rows = [line for line in shown.splitlines() if line.startswith("| 2025")]
    assert len(rows) == MAX_CHART_ROWS
    assert "at 12 of the 18 readings the chart draws" in shown
    assert "| Time (UTC) | linux.g5.4xlarge.nvidia.gpu | linux.2xlarge |" in shown
    assert rows[0] == "| 2025-09-16 17:00 | 10 · 20 min | 10 · 20 min |"
    assert "| 2025-09-16 17:40 | 10 · 28 min | 30 · 60 min |" in rows, "the peak's reading"
    assert rows[-1].startswith("| 2025-09-16 18:25 |")


@pytest.mark.parametrize(
    ("statuses", "rows", "said"),
    [
        (0, 0, "_No readings were kept over time"),
        (1, 0, "_No readings were kept over time"),
        (5, 5, "at 5 of the 5 readings"),
    ],
)
def test_queue_over_time_of_few_readings(statuses: int, rows: int, said: str) -> None:
    shown = section(document(seeded(statuses=statuses)), "## Queue over time")
    assert said in shown
    assert len([line for line in shown.splitlines() if line.startswith("| 2025")]) == rows


def test_the_questions_are_left_for_the_team() -> None:
    shown = section(document(), "## Questions for the team")
    assert "### What would have prevented it?\n\n_To be filled in._" in shown
    assert "### Follow-ups\n\n- [ ] " in shown


# --- escaping ------------------------------------------------------------------------------------

ESCAPES = [
    ("linux.2xlarge", "linux.2xlarge"),
    ("a|b", "a\\|b"),
    ("[click](https://evil.example)", "\\[click\\](https\\://evil.example)"),
    ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)\\>"),
    ("@channel and @here", "\\@channel and \\@here"),
    ("see www.evil.example", "see www\\.evil.example"),
    ("mail ops@evil.example", "mail ops\\@evil.example"),
    # Issue references GitHub would link: escaped, its hyphen too (for `unlinked`, GitHub's).
    ("see #12, GH-3 and pytorch/pytorch#4", "see \\#12, GH\\-3 and pytorch/pytorch\\#4"),
    # Invisible characters are left out: zero-width space and joiner, a bidi override, a BOM.
    ("a\u200bb\u200dc\u202ed\ufeffe\u2060f", "abcdef"),
    (
        "**bold** _it_ ~~no~~ `code` $x$",
        "\\*\\*bold\\*\\* \\_it\\_ \\~\\~no\\~\\~ \\`code\\` \\$x\\$",
    ),
    ("# heading", "\\# heading"),
    ("- item", "\\- item"),
    ("1. item", "1\\. item"),
    ("1) item", "1\\) item"),
    ("line\nbreak\r\n\u2028end", "line break end"),
    ("back\\slash", "back\\\\slash"),
    ("P&L &amp;", "P\\&L \\&amp;"),
]


@pytest.mark.parametrize(("text", "escaped"), ESCAPES)
def test_md_escape(text: str, escaped: str) -> None:
    assert md_escape(text) == escaped


def test_md_escape_cuts_long_text() -> None:
    assert md_escape("x" * 500, 10) == "x" * 9 + "…"


def unescaped(text: str) -> str:
    """`text` with every backslash-escaped character (and the backslash) made a NUL: what is left
    is what Markdown reads as markup, and the text either side of an escape never joins up
    (`www\\..` has no `www.` for GitHub)."""
    return re.sub(r"\\.", "\0", text)


def cells(line: str) -> int:
    """How many cells a table row has for a GitHub table: its unescaped pipes, less one."""
    return unescaped(line).count("|") - 1


# Pieces of Markdown and of links, in any order: a few characters each, so a short example
# combines several (a `[` here, a `](` there, a `://` after them).
PIECES = [
    *"ab1.:/|[]()<>@#!*_`~$&\\-+=\n\r\t ",
    "www.",
    "https://",
    "](",
    "\u2028",
    *"\u200b\u200d\u202e\u2060\ufeff\u00ad",  # invisible: zero-width, bidi, joiners, soft hyphen
]
HOSTILE = st.lists(st.sampled_from(PIECES), max_size=20).map("".join) | st.sampled_from(
    [
        "[x](https://evil.example)",
        "<script>alert(1)</script>",
        "a|b|c",
        "\\|",
        "![i](http://e/i.png)",
        "@channel",
        "<!here>",
        "www.evil.example",
        "x@evil.example",
        "\n## Injected",
        "| --- |",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    title=HOSTILE, name=HOSTILE, runner_type=HOSTILE, workflow=HOSTILE, text=HOSTILE, cause=HOSTILE
)
def test_hostile_text_never_breaks_a_table_nor_makes_a_link(
    title: str, name: str, runner_type: str, workflow: str, text: str, cause: str
) -> None:
    runner_type = runner_type or "x"
    incident = changed(
        seeded(),
        title=title,
        priority=name,
        team=workflow,
        links=Links(),
        acknowledged_name=name,
        likely_cause=cause,
        peak_types={runner_type: RunnerQueue(queued=3, longest_wait_mins=4)},
    )
    events = [
        Event(at=T0, kind="opened", text=text),
        Event(at=T0, kind="scaled", text=text, actor="U1", actor_name=name),
        Event(at=T0, kind="diagnosed", text=cause, actor="U1", actor_name=name),
    ]
    view = JobsView(
        source=name,
        at=RESOLVED_AT,
        runner_types={
            runner_type: RunnerTypeJobs(
                runner_type, 1, (WorkflowQueue(workflow, 1, 2.0, "", "", (), last_hour=1),)
            )
        },
        note=text,
    )
    doc = document(incident, events, jobs=view)
    lines = doc.splitlines()
    assert [line for line in lines if line.startswith("## ")] == SECTIONS
    width = 0
    for line in lines:
        if not line.startswith("|"):
            width = 0
            continue
        if width == 0:
            width = cells(line)
        assert cells(line) == width, line
        assert unescaped(line).endswith("|"), line  # the last pipe is not escaped away
    bare = unescaped(doc).replace("- [ ] ", "")  # the follow-ups' checkboxes are the file's own
    for link in ("[", "<", "@", "://", "www."):
        assert link not in bare, (link, doc)
    assert not [c for c in doc if unicodedata.category(c) == "Cf"], "nothing invisible"


def test_the_summary_offers_the_postmortem_as_a_button_carrying_the_incidents_reference() -> None:
    for incident in (seeded(), variant({"open": True})):
        blocks = render_summary(incident, timeline(), now=NOW).blocks
        [actions] = [block for block in blocks if block["type"] == "actions"]
        [button] = actions["elements"]
        assert (button["action_id"], button["value"], button["text"]["text"]) == (
            "incident_postmortem",
            "12:u12",
            "Postmortem",
        )
        assert blocks[-1] is actions, "under the summary, as the root's buttons are"
