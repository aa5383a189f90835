"""The diagnostics report as a thread reply: a pure function of the diagnosis, within Slack's
limits (runner type names and backend notes are escaped; every text is capped)."""

from __future__ import annotations

from bot.domain.diagnostics import Diagnosis, Verdict
from bot.domain.fleet import FleetSnapshot
from bot.domain.incidents import Incident
from bot.domain.jobs import JobsView
from bot.domain.message import Rendered
from bot.domain.units import number, wait_said
from bot.render.jobs import jobs_blocks
from bot.render.mrkdwn import context, escape, rendered, section, sections, slack_date, truncate
from bot.render.replies import runner_name

ICONS = {Verdict.OK: "✅", Verdict.WARN: "⚠️", Verdict.BAD: "❌", Verdict.UNKNOWN: "❔"}
SOURCES = {"alert": "the alert's own numbers"}


def render_diagnostics(
    incident: Incident,
    diagnosis: Diagnosis,
    snapshot: FleetSnapshot,
    *,
    by: str,
    jobs: JobsView | None = None,
) -> Rendered:
    source = SOURCES.get(snapshot.source, escape(snapshot.source))
    head = (
        f"*🩺 Diagnostics · incident {escape(incident.id)}* · "
        f"{slack_date(snapshot.at, '{time}')} · from {source} · asked by {by}"
    )
    blocks = [section(head)]
    if snapshot.note:
        blocks.append(context([truncate(f"⚠️ {escape(snapshot.note)}", 500)]))
    for finding in diagnosis.findings:
        name = runner_name(finding.runner_type) if finding.runner_type else "All runner types"
        metrics = snapshot.runner_types.get(finding.runner_type)
        queue = []
        if metrics is not None and metrics.queued is not None:
            queue.append(f"{number(metrics.queued)} queued")
        wait = wait_said(
            metrics.longest_wait_mins if metrics else None,
            over=metrics.wait_over if metrics else None,
            of_starts=metrics.wait_of_starts if metrics else None,
        )
        if wait:
            queue.append(wait)
        lines = [f"*{name}*" + (f" · {', '.join(queue)}" if queue else "")]
        lines += [
            f"{ICONS[check.verdict]} *{check.name}*: {truncate(escape(check.text), 300)}"
            for check in finding.checks
        ]
        blocks += sections(lines)
    if jobs is not None:
        # The jobs behind the diagnosed runner types: which workflows, from where, what changed.
        named = [f.runner_type for f in diagnosis.findings if f.runner_type]
        busiest = sorted(jobs.runner_types.values(), key=lambda q: (-q.queued, q.runner_type))
        blocks += jobs_blocks(jobs, named or [q.runner_type for q in busiest])
    # The conclusion is what the report is for: it stays whatever is cut before it.
    blocks = [*blocks[:44], section(_conclusion(diagnosis))]
    cause = diagnosis.cause.value if diagnosis.cause else "not determined"
    text = f"Diagnostics for incident {escape(incident.id)}: likely cause {cause}"
    return rendered(text, blocks)


def _conclusion(diagnosis: Diagnosis) -> str:
    if diagnosis.cause is None:
        lines = [f"*Likely cause:* not determined ({escape(diagnosis.why)})"]
    else:
        lines = [
            f"*Likely cause:* {diagnosis.cause.value} ({diagnosis.confidence} confidence)",
            f"_Why:_ {truncate(escape(diagnosis.why), 1200)}",
        ]
    if diagnosis.recommendation:
        lines.append(f"*Next:* {truncate(escape(diagnosis.recommendation), 600)}")
    return "\n".join(lines)
