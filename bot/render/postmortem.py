"""An incident's postmortem: a GitHub-flavoured Markdown write-up drafted from what was recorded,
its numbers the closing summary's own. Every outside text goes through `md_escape`, so it can
neither break a table nor become a link, an image or HTML.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime

from bot.domain.incident.incidents import (
    REFUSED,
    Event,
    Incident,
    Resolution,
    actions_taken,
)
from bot.domain.queue_cost.jobs import Workflows
from bot.domain.reading.fleet import worst_first
from bot.domain.scale.scale_record import alert_fired, scale_record
from bot.domain.units import duration, minutes, number
from bot.render import replies
from bot.render.chart import incident_chart, sampled
from bot.render.cost import cost_lines
from bot.render.follow_ups import bought_said
from bot.render.mrkdwn import is_linkable, truncate
from bot.render.numbers import (
    busy_said,
    impact_figures,
    point_cell,
    queued_cell,
    wait_cell,
)

MAX_TEXT = 300  # characters of one outside text (a title, a name) in the file
MAX_TYPES = 15  # runner types in the impact table
MAX_WORKFLOWS = 15  # workflow rows in the jobs table
MAX_TIMELINE = 200  # timeline rows; the earliest are said to be left out
MAX_CHART_ROWS = 12  # rows of "Queue over time"
RENOTIFIED = frozenset({"updated", "notified"})  # repeats of the alert: one row per run
ALL_TYPES = "all runner types"
CLOCK = "%Y-%m-%d %H:%M"  # UTC, written out: a file has no reader's time zone

# A backslash before each special character, and before `://` and `www.` (GitHub would link them).
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~$@#&])")
_AUTOLINK = re.compile(r"(?i)(:(?=//)|(?<=www)\.)")
# What starts a block at the head of a line: a list, a setext underline, a numbered item.
_LEADING_MARK = re.compile(r"^[-+=]")
_LEADING_NUMBER = re.compile(r"^([0-9]+)([.)])")
# `GH-12` is an issue reference: `GH\-12` reads the same, in a form `bot.render.alert_issue` finds.
_GH_REFERENCE = re.compile(r"(?i)\b(gh)-(?=[0-9])")
# Line breaks and control characters would end a table row or a paragraph.
_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_CONCLUSION = re.compile(r"^(?P<cause>.+? \([a-z]+ confidence\))(?:: (?P<why>.*))?$", re.DOTALL)
_ENDED = replies.RESOLVED_BY | {Resolution.TEST: "(test notification)"}
QUESTIONS = """## Questions for the team

### What would have prevented it?

_To be filled in._

### What made it hard to see or to fix?

_To be filled in._

### Follow-ups

- [ ] _A follow-up, its owner, its issue_
- [ ] _…_"""


def md_escape(text: str, limit: int = MAX_TEXT) -> str:
    """`text` as literal Markdown on one line of at most `limit` characters; Unicode's format
    characters (zero-width, bidirectional controls) are dropped: a file must read as it is."""
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    flat = truncate(_BREAKS.sub(" ", visible).strip(), limit)
    escaped = _AUTOLINK.sub(r"\\\1", _SPECIAL.sub(r"\\\1", flat))
    escaped = _LEADING_MARK.sub(r"\\\g<0>", escaped)
    escaped = _LEADING_NUMBER.sub(r"\1\\\2", escaped)
    return _GH_REFERENCE.sub(r"\1\\-", escaped)


def utc(moment: datetime) -> str:
    return f"{moment:{CLOCK}} UTC"


def who(user_id: str | None, name: str = "") -> str:
    """Someone by their name, else their user ID, as plain text: a file pings nobody."""
    return md_escape(name.strip() or user_id or "someone", 80)


def safe_url(url: str) -> bool:
    url = url.strip()
    return is_linkable(url) and not re.search(r"[\s<>`\\]", url)


def render_postmortem(incident: Incident, events: Sequence[Event], *, now: datetime) -> str:
    """The write-up from the timeline (`events`, oldest first) and the incident's record."""
    title = md_escape(incident.title)
    if incident.priority:
        title = f"{md_escape(incident.priority, 20)} · {title}"
    state = "The incident is resolved."
    if incident.is_open:
        state = "**Draft: the incident is still firing**; the numbers are those seen so far."
    test = " It was Grafana's test notification." if incident.is_test else ""
    heading = (
        f"# Postmortem: incident {md_escape(incident.id, 40)} · {title}\n\n"
        f"_Drafted by queuepilot on {utc(now)} from what it recorded._ {state}{test} "
        "Edit it freely: the questions at the end are for the team."
    )
    sections = [
        heading,
        summary_section(incident, events, now),
        impact_section(incident),
        scale_ups_section(incident),
        _timeline(incident, events),
        _diagnosis(incident, events),
        _queue_over_time(incident, events),
        QUESTIONS,
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def summary_section(incident: Incident, events: Sequence[Event], now: datetime) -> str:
    ended = incident.resolved.at
    if incident.resolved.how is Resolution.MANUAL and incident.resolved.by:
        how = f"(resolved by {who(incident.resolved.by, incident.resolved.by_name)})"
    elif followed := replies.followed_how(incident):
        how = f"({followed})"
    else:
        how = _ENDED.get(incident.resolved.how, "") if incident.resolved.how else ""
    rows = [
        ("Alert", md_escape(incident.title)),
        ("Priority", md_escape(incident.priority or "", 20) or "not given"),
        ("Team", md_escape(incident.team or "", 80) or "not given"),
        ("Started", utc(incident.started_at)),
        ("Ended", f"{utc(ended)} {how}".strip() if ended else "still firing"),
        ("Duration", duration((ended or now) - incident.started_at) + ("" if ended else " so far")),
    ]
    if incident.acknowledged.by:
        rows.append(("Acknowledged by", who(incident.acknowledged.by, incident.acknowledged.name)))
    for label, done in (
        ("Actions taken", actions_taken(events)),
        ("Requests refused", [e for e in events if e.kind == REFUSED]),
    ):
        if done:
            people = list(dict.fromkeys(who(e.actor, e.actor_name) for e in done))
            rows.append((label, f"{len(done)}, by {', '.join(people)}"))
    rows.append(("Notifications", str(incident.notified.count)))
    if incident.reopened:
        rows.append(("Reopened", f"{incident.reopened}×"))
    table = _table(("Incident", md_escape(incident.id, 40)), rows)
    named = [
        ("Runbook", incident.links.runbook),
        ("Alert", incident.links.alert),
        ("Dashboard", incident.links.dashboard),
        ("Panel", incident.links.panel),
        ("GitHub issue", incident.links.issue),
    ]
    # Autolinks only for plain http(s) URLs with nothing in them that could end the link early.
    links = [f"- {label}: <{url.strip()}>" for label, url in named if safe_url(url)]
    return "## Summary\n\n" + table + ("\n\nLinks:\n\n" + "\n".join(links) if links else "")


def impact_section(incident: Incident) -> str:
    peaks, ended = impact_figures(incident, utc, "**")
    lines = [f"- {line}" for line in [*peaks, *ended, *cost_lines(incident, md_escape, utc)]]
    parts = ["## Impact", "\n".join(lines or ["- The alert gave no queue numbers."])]
    parts += [table for table in (_at_peak(incident), _at_last_reading(incident)) if table]
    return "\n\n".join(part for part in [*parts, _workflows(incident.workflows)] if part)


def scale_ups_section(incident: Incident) -> str:
    rows = []
    for scaled in scale_record(incident):
        for by, acts in (("people", scaled.people), ("the pilot", scaled.pilot)):
            if not acts.count:
                continue
            came = f"{acts.came} of {acts.count}"
            came += f", {acts.not_came} did not" if acts.not_came else ""
            came += f", {acts.not_known} not known" if acts.not_known else ""
            mins = minutes(acts.capacity_mins[0]) if acts.capacity_mins else "–"
            rows.append((_type(scaled.runner_type), by, f"+{acts.runners}", came, mins))
    if not rows:
        return ""
    header = ("Runner type", "By", "Runners asked", "Came up", "Alert to added capacity")
    table = _table(header, rows, align=("---", "---", "---:", "---", "---:"))
    section = f"## Scale-ups\n\nFrom when the alert fired, {utc(alert_fired(incident))}:\n\n{table}"
    bought = [
        f"- +{done.added} on {_type(done.runner_type)} at {utc(done.at or event.at)} by "
        f"{'the pilot' if done.pilot else md_escape(done.by or 'someone', 80)}: "
        f"{bought_said(done.bought)}"
        for event in incident.actions
        if (done := event.scale) is not None and done.bought is not None
    ]
    return "\n\n".join([section, *(["What each bought:\n" + "\n".join(bought)] if bought else [])])


def _at_peak(incident: Incident) -> str:
    types = incident.peaks.types or incident.runner_types
    ranked = [name for name, _ in worst_first(types)]
    if not ranked:
        return ""
    moment = incident.peaks.moment
    then = moment.runner_types if moment is not None else {}
    header, align = ["Runner type", "Most queued", "Worst wait"], ["---", "---:", "---"]
    if moment is None:  # before a reading named them, the alert's own numbers
        head = "Runner types, " + (
            "at their worst" if incident.peaks.types else "as the alert said"
        )
    elif then:
        head = f"The queue at its peak, {utc(moment.at)}, and each runner type at its own worst"
        header[1:1], align[1:1] = ["Queued at the peak", "Wait at the peak"], ["---:", "---"]
    else:
        said = queued_cell(moment.numbers.max_queue_size)
        head = (
            f"At its peak, {utc(moment.at)}, the alert said {said} queued, naming no runner type; "
            "each runner type at its own worst"
        )
    rows = []
    for name in ranked:
        was, worst = then.get(name), types[name]
        at_peak = [queued_cell(was.queued), wait_cell(was)] if was is not None else ["–", "–"]
        cells = [*(at_peak if then else []), queued_cell(worst.queued), wait_cell(worst)]
        rows.append((_type(name), *cells))
    return f"{head}:\n\n{_table(header, rows, align=align, most=MAX_TYPES)}"


def _at_last_reading(incident: Incident) -> str:
    live = incident.live
    if live is None or not live.is_live or not live.runner_types:
        return ""
    order = [n for n, _ in worst_first(incident.peaks.types) if n in live.runner_types]
    rows = []
    for name in order + sorted(set(live.runner_types) - set(order)):
        m = live.runner_types[name]
        runners = busy_said(m.busy, m.registered) if m.registered is not None else ""
        rows.append((_type(name), queued_cell(m.queued), wait_cell(m), runners or "not read"))
    header = ("Runner type", "Queued", "Longest wait", "Runners")
    table = _table(header, rows, align=("---", "---:", "---", "---:"), most=MAX_TYPES)
    return f"The last reading, {utc(live.at)}:\n\n{table}"


def _type(name: str) -> str:
    return md_escape(name, 80) if name else ALL_TYPES


def _workflows(seen: Workflows | None) -> str:
    if seen is None:
        return ""
    if seen.unknown:
        return f"Jobs and workflows affected: not known ({md_escape(seen.unknown)})."
    at = utc(seen.at) if seen.at is not None else "?"
    if seen.late:
        return (
            "Jobs and workflows affected: not known (the jobs source counts the last hour's "
            f"arrivals, and the incident ended more than an hour before {at})."
        )
    head = f"Jobs and workflows affected, as {md_escape(seen.source, 40)} read them on {at}"
    if not seen.rows:
        return f"{head}: no queued jobs of these runner types."
    rows = [
        (
            md_escape(row.runner_type, 80),
            md_escape(row.workflow, 120),
            str(row.queued),
            "" if row.last_hour is None else number(row.last_hour),
        )
        for row in seen.rows
    ]
    header = ("Runner type", "Workflow", "Queued", "Arrived in the last hour")
    table = _table(header, rows, align=("---", "---", "---:", "---:"), most=MAX_WORKFLOWS, of="")
    return f"{head}:\n\n{table}" + (f"\n\n_{md_escape(seen.note)}_" if seen.note else "")


def _timeline(incident: Incident, events: Sequence[Event]) -> str:
    """A run of the alert's re-notifications is one row saying how many."""
    rows: list[tuple[str, str, str]] = []
    run: list[Event] = []
    for event in [*events, None]:
        if event is not None and event.kind in RENOTIFIED and not event.actor:
            run.append(event)
            continue
        if len(run) == 1:
            rows.append((f"{run[0].at:{CLOCK}}", "The alert was re-notified", ""))
        elif run:
            when = f"{run[0].at:{CLOCK}} – {run[-1].at:{CLOCK}}"
            rows.append((when, f"The alert was re-notified {len(run)} times", ""))
        run.clear()
        if event is not None:
            by = who(event.actor, event.actor_name) if event.actor else ""
            rows.append((f"{event.at:{CLOCK}}", md_escape(event.text), by))
    parts = ["## Timeline", "_Nothing was recorded on the timeline._"]
    if rows:
        left_out = len(rows) - MAX_TIMELINE
        table = _table(("Time (UTC)", "What happened", "By"), rows[-MAX_TIMELINE:])
        parts[1] = (f"_{left_out} earlier events not shown._\n\n" if left_out > 0 else "") + table
    if incident.put_backs:
        lines = [f"- {replies.put_back_said(p, _type, utc)}" for p in incident.put_backs]
        parts.append("Still to put back:\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _diagnosis(incident: Incident, events: Sequence[Event]) -> str:
    runs = [event for event in events if event.kind == "diagnosed"]
    if not runs and not incident.cause.said:
        return "## Diagnosis\n\n_Diagnostics were not run during this incident._"
    parts = ["## Diagnosis"]
    if incident.cause.said:
        found = _CONCLUSION.match(" ".join(incident.cause.said.split()))
        if found is None:
            parts.append(f"**Likely cause:** {md_escape(incident.cause.said, 600)}")
        else:
            lines = [f"**Likely cause:** {md_escape(found['cause'])}"]
            if found["why"]:
                lines.append(f"**Evidence:** {md_escape(found['why'], 600)}")
            parts.append("  \n".join(lines))
    if runs:
        said = [
            f"- {utc(e.at)}, by {who(e.actor, e.actor_name)}: {md_escape(e.text)}" for e in runs
        ]
        parts.append(
            "Diagnostics were run (each report, with every check, is in the incident's "
            "thread):\n\n" + "\n".join(said)
        )
    return "\n\n".join(parts)


def _queue_over_time(incident: Incident, events: Sequence[Event]) -> str:
    """The series the thread's chart draws in at most MAX_CHART_ROWS rows: a reading that repeats
    the one before it is no row; the opening, the peak and the reading after each action are."""
    data = incident_chart(incident)
    series, times = data.series, data.times
    if not series:
        return (
            "## Queue over time\n\n_No readings were kept over time: the alert's numbers are "
            "all there is._"
        )
    cells = {name: {at: (q, w) for at, q, w in points} for name, points in series.items()}
    row = {at: tuple(point_cell(cells[n].get(at)) for n in series) for at in times}
    changed = [at for i, at in enumerate(times) if i == 0 or row[at] != row[times[i - 1]]]
    kept = _moments(changed, data.peak_at, [e.at for e in actions_taken(events)])
    shape = CLOCK
    if len({datetime.fromtimestamp(at, tz=UTC).strftime(shape) for at in kept}) < len(kept):
        shape += ":%S"  # two rows in one minute
    rows = [(datetime.fromtimestamp(at, tz=UTC).strftime(shape), *row[at]) for at in kept]
    header = ("Time (UTC)", *(_type(n) for n in series))
    align = ("---", *("---:" for _ in series))
    note = (
        f"Queued jobs · longest wait, per runner type, at {len(rows)} of the {len(times)} "
        "readings the chart draws:"
    )
    return f"## Queue over time\n\n{note}\n\n{_table(header, rows, align=align)}"


def _moments(times: list[float], peak: datetime | None, acted: Sequence[datetime]) -> list[float]:
    """`times` evenly sampled, with the peak's reading (the last at or before it) and the first
    reading at or after each action in place of the nearest others; the first and last kept."""
    picks = list(sampled(times, MAX_CHART_ROWS))
    musts = [max((t for t in times if t <= peak.timestamp()), default=times[0])] if peak else []
    musts += [
        next(t for t in times if t >= at.timestamp()) for at in acted if at.timestamp() <= times[-1]
    ]
    fixed = {times[0], times[-1]}
    for must in dict.fromkeys(musts):
        if must in picks:
            continue
        free = [p for p in picks if p not in fixed]
        if not free:
            break
        picks.remove(min(free, key=lambda p: (abs(p - must), p)))
        picks.append(must)
        fixed.add(must)
        picks.sort()
    return picks


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    align: Sequence[str] | None = None,
    most: int = 0,
    of: str = " runner types",
) -> str:
    """A GitHub table of cells already escaped; past `most` rows, one says how many more."""
    if most and len(rows) > most:
        rows = [*rows[:most], (f"+{len(rows) - most} more{of}", *[""] * (len(header) - 1))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align or ["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)
