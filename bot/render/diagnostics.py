"""The diagnostics report as a thread reply: a pure function of the diagnosis, within Slack's
limits (runner type names and backend notes are escaped; every text is capped).

What a responder reads first comes first: the likely cause with how sure, the next step, the
queues and where they head, then the evidence, each finding once (`Diagnosis.evidence`), the
jobs behind the queue in a line, and once what a source cannot see.
"""

from __future__ import annotations

from dataclasses import replace

from bot.domain.diagnostics import Check, Diagnosis, Finding, Verdict
from bot.domain.fleet import FleetSnapshot
from bot.domain.incidents import Incident
from bot.domain.jobs import JobsView, RunnerTypeJobs
from bot.domain.message import Rendered
from bot.domain.units import minutes, number
from bot.render.jobs import SOURCES as JOB_SOURCES
from bot.render.jobs import footnotes, headline
from bot.render.mrkdwn import (
    context,
    escape,
    link,
    rendered,
    section,
    sections,
    slack_date,
    truncate,
)
from bot.render.queue import advice_parts, judged_parts, reading_parts
from bot.render.replies import runner_name

ICONS = {Verdict.OK: "✅", Verdict.WARN: "⚠️", Verdict.BAD: "❌", Verdict.UNKNOWN: "❔"}
SOURCES = {"alert": "the alert's own numbers"}
TOP_WORKFLOWS = 3  # per runner type, in the jobs line


def render_diagnostics(
    incident: Incident,
    diagnosis: Diagnosis,
    snapshot: FleetSnapshot,
    *,
    by: str,
    jobs: JobsView | None = None,
) -> Rendered:
    source = SOURCES.get(snapshot.source) or JOB_SOURCES.get(
        snapshot.source, escape(snapshot.source)
    )
    head = (
        f"*🩺 Diagnostics · incident {escape(incident.id)}* · "
        f"{slack_date(snapshot.at, '{time}')} · from {source} · asked by {by}"
    )
    blocks = [section(head)]
    if snapshot.note:
        blocks.append(context([truncate(f"⚠️ {escape(snapshot.note)}", 500)]))
    blocks.append(section(_conclusion(diagnosis)))
    lines = [_queue_line(f, snapshot) for f in diagnosis.findings]
    several = len(diagnosis.findings) > 1
    lines += [_evidence_line(names, check, several) for names, check in diagnosis.evidence]
    if jobs is not None:
        lines.append(_jobs_line(jobs, [f.runner_type for f in diagnosis.findings]))
    blocks += sections(lines)[:40]
    # Whether a day before was recorded is the surge finding's to say, where it matters.
    notes = footnotes(replace(jobs, history=True)) if jobs is not None else []
    unseen = _unseen(jobs, diagnosis, snapshot) if jobs is not None else ""
    if unseen:
        notes.append(unseen)
    if notes:
        blocks.append(context([truncate(note, 500) for note in notes]))
    cause = diagnosis.cause.value if diagnosis.cause else "not determined"
    text = f"Diagnostics for incident {escape(incident.id)}: likely cause {cause}"
    return rendered(text, blocks)


def _conclusion(diagnosis: Diagnosis) -> str:
    if diagnosis.cause is None:
        lines = [f"*Likely cause:* not determined ({truncate(escape(diagnosis.why), 600)})"]
    else:
        where = f" on {runner_name(diagnosis.lead_type)}" if diagnosis.lead_type else ""
        lines = [
            f"*Likely cause:* {diagnosis.cause.value}{where} ({diagnosis.confidence} confidence)"
        ]
    if diagnosis.recommendation:
        lines.append(f"*Next:* {truncate(escape(diagnosis.recommendation), 600)}")
    return "\n".join(lines)


def _queue_line(finding: Finding, snapshot: FleetSnapshot) -> str:
    """The type's numbers and advice as the root's line says them (the reading's judgement);
    a reading without one (stored by an older release) says its numbers alone."""
    name = runner_name(finding.runner_type) if finding.runner_type else "All runner types"
    judged = finding.judged
    if judged is not None:
        parts = [*judged_parts(judged), *advice_parts(judged)]
    else:
        metrics = snapshot.runner_types.get(finding.runner_type)
        parts = reading_parts(metrics) if metrics is not None else []
    return f"*{name}*" + (f" · {' · '.join(parts)}" if parts else "")


def _evidence_line(names: str, check: Check, several: bool) -> str:
    where = f" ({truncate(escape(names), 200)})" if several and names else ""
    return f"{ICONS[check.verdict]} *{check.name}*{where}: {truncate(escape(check.text), 600)}"


def _jobs_line(view: JobsView, runner_types: list[str]) -> str:
    """The workflows behind each diagnosed queue, most queued first, and the oldest job."""
    queues = [view.runner_types.get(view.name_of(t)) for t in runner_types]
    parts = [_type_jobs(q) for q in queues if q is not None and q.workflows]
    if not parts:
        return f"{headline(view)}: none listed for these runner types"
    return f"{headline(view)}: " + "; ".join(parts)


def _type_jobs(queue: RunnerTypeJobs) -> str:
    shown = [w for w in queue.workflows if w.queued][:TOP_WORKFLOWS]
    said = ", ".join(
        f"`{truncate(escape(w.workflow), 60)}` {w.queued} ({w.trigger.value})" for w in shown
    )
    more = len([w for w in queue.workflows if w.queued]) - len(shown)
    said += f" and {more} more" if more > 0 else ""
    oldest = max(queue.workflows, key=lambda w: w.longest_wait_mins or -1)
    if oldest.oldest_url:
        label = truncate(oldest.oldest_job or "the job", 60)
        said += f" · oldest: {link(oldest.oldest_url, label)}"
    return f"{runner_name(queue.runner_type)} {said}"


def _unseen(view: JobsView, diagnosis: Diagnosis, snapshot: FleetSnapshot) -> str:
    """Said once: jobs the metrics count that the jobs source cannot list yet, and why."""
    floor = view.listed_over_mins
    if floor is None:
        return ""
    for finding in diagnosis.findings:
        metrics = snapshot.runner_types.get(finding.runner_type)
        queue = view.runner_types.get(view.name_of(finding.runner_type))
        listed = queue.queued if queue is not None else 0
        if metrics is None or not metrics.queued or metrics.queued <= listed:
            continue
        jobs_source = JOB_SOURCES.get(view.source, escape(view.source))
        counted = JOB_SOURCES.get(snapshot.source, escape(snapshot.source))
        shown = "as none there" if not listed else f"as {listed} there"
        return (
            f"_{jobs_source[0].upper()}{jobs_source[1:]} lists only jobs waiting over "
            f"{minutes(floor)}, so {number(metrics.queued)} queued in {counted} can show {shown}._"
        )
    return ""
