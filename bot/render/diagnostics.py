"""The diagnostics report as a thread reply, what a responder needs first first: the likely cause
and how sure, the next step, the queues, then the evidence and the jobs behind the queue."""

from __future__ import annotations

from dataclasses import replace

from bot.domain.incident.incidents import Incident
from bot.domain.message import Rendered
from bot.domain.queue_cost.jobs import JobsView
from bot.domain.reading.diagnostics import Diagnosis, Verdict
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.units import minutes, number
from bot.render import mrkdwn as md
from bot.render.jobs import footnotes, headline, source_of
from bot.render.numbers import type_parts

ICONS = {Verdict.OK: "✅", Verdict.WARN: "⚠️", Verdict.BAD: "❌", Verdict.UNKNOWN: "❔"}
TOP_WORKFLOWS = 3  # per runner type, in the jobs line


def render_diagnostics(
    incident: Incident,
    diagnosis: Diagnosis,
    snapshot: FleetSnapshot,
    *,
    by: str,
    jobs: JobsView | None = None,
) -> Rendered:
    source = "the alert's own numbers" if snapshot.source == "alert" else source_of(snapshot.source)
    head = (
        f"*🩺 Diagnostics · incident {md.escape(incident.id)}* · {md.time_of(snapshot.at)} · "
        f"from {source} · asked by {by}"
    )
    blocks = [md.section(head)]
    if snapshot.note:
        note = md.in_zone(md.escape(snapshot.note), snapshot.at)
        blocks.append(md.context([md.truncate(f"⚠️ {note}", 500)]))
    if diagnosis.cause is None:
        cause = f"not determined ({md.in_zone(md.escaped(diagnosis.why, 600), snapshot.at)})"
    else:
        where = f" on {md.runner_name(diagnosis.lead_type)}" if diagnosis.lead_type else ""
        cause = f"{diagnosis.cause.value}{where} ({diagnosis.confidence} confidence)"
    lines = [f"*Likely cause:* {cause}"]
    if diagnosis.recommendation:
        lines.append(f"*Next:* {md.escaped(diagnosis.recommendation, 600)}")
    blocks.append(md.section("\n".join(lines)))
    lines = []
    for finding in diagnosis.findings:  # as the root's line says them
        name = md.runner_name(finding.runner_type) if finding.runner_type else "All runner types"
        parts, advice = type_parts(snapshot.runner_types.get(finding.runner_type))
        lines.append(f"*{name}*" + "".join(f" · {part}" for part in parts + advice))
    for names, check in diagnosis.evidence:
        where = f" ({md.escaped(names, 200)})" if len(diagnosis.findings) > 1 and names else ""
        text = md.in_zone(md.escaped(check.text, 600), snapshot.at)
        lines.append(f"{ICONS[check.verdict]} *{check.name}*{where}: {text}")
    notes = []
    if jobs is not None:
        lines.append(_jobs_line(jobs, [f.runner_type for f in diagnosis.findings]))
        # Whether a day before was recorded is the surge finding's to say, where it matters.
        notes = footnotes(replace(jobs, history=True))
        if unseen := _unseen(jobs, diagnosis, snapshot):
            notes.append(unseen)
    blocks += md.sections(lines)[:40]
    if notes:
        blocks.append(md.context([md.truncate(note, 500) for note in notes]))
    cause = diagnosis.cause.value if diagnosis.cause else "not determined"
    return md.rendered(
        f"Diagnostics for incident {md.escape(incident.id)}: likely cause {cause}", blocks
    )


def _jobs_line(view: JobsView, runner_types: list[str]) -> str:
    """The workflows behind each diagnosed queue, most queued first, and the oldest job."""
    parts = []
    for queue in (view.runner_types.get(view.name_of(t)) for t in runner_types):
        if queue is None or not queue.workflows:
            continue
        queued = [w for w in queue.workflows if w.queued]
        said = ", ".join(
            f"`{md.escaped(w.workflow, 60)}` {w.queued} ({w.trigger.value})"
            for w in queued[:TOP_WORKFLOWS]
        )
        if (more := len(queued) - TOP_WORKFLOWS) > 0:
            said += f" and {more} more"
        oldest = max(queue.workflows, key=lambda w: w.longest_wait_mins or -1)
        if oldest.oldest_url:
            job = md.truncate(oldest.oldest_job or "the job", 60)
            said += f" · oldest: {md.link(oldest.oldest_url, job)}"
        parts.append(f"{md.runner_name(queue.runner_type)} {said}")
    return f"{headline(view)}: " + ("; ".join(parts) or "none listed for these runner types")


def _unseen(view: JobsView, diagnosis: Diagnosis, snapshot: FleetSnapshot) -> str:
    """Said once: jobs the metrics count that the jobs source cannot list yet, and why."""
    if (floor := view.listed_over_mins) is None:
        return ""
    for finding in diagnosis.findings:
        metrics = snapshot.runner_types.get(finding.runner_type)
        queue = view.runner_types.get(view.name_of(finding.runner_type))
        listed = queue.queued if queue is not None else 0
        if metrics is None or not metrics.queued or metrics.queued <= listed:
            continue
        jobs_source, counted = source_of(view.source), source_of(snapshot.source)
        shown = "as none there" if not listed else f"as {listed} there"
        return (
            f"_{jobs_source[0].upper()}{jobs_source[1:]} lists only jobs waiting over "
            f"{minutes(floor)}, so {number(metrics.queued)} queued in {counted} can show {shown}._"
        )
    return ""
