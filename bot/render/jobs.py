"""The `/queue jobs` answer: per runner type, its top workflows by trigger, the surge, the slower
jobs, and the ghosts left out."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.queue_cost.jobs import JobsView, WorkflowQueue, queued_said, surging
from bot.domain.reading.fleet import source_name
from bot.domain.units import duration, minutes
from bot.render import mrkdwn as md

TOP_WORKFLOWS = 5  # per runner type
MAX_TYPES = 5
MAX_NAME = 80
MAX_JOB = 60


def render_jobs(
    view: JobsView, runner_types: list[str], *, limit: int = 2900, others: int = 0
) -> str:
    """The head, each runner type's lines, then the footnotes; lines that do not fit are left out
    whole. `others`: the types with queued jobs left out as other channels'."""
    foot = footnotes(view)
    body = [line for name in runner_types[:MAX_TYPES] for line in workflow_lines(view, name)]
    if not body:
        body = [f"_{_none(view).capitalize()} seen for these runner types{_limit(view)}._"]
    head = headline(view)
    if others:
        head += " · the types this channel owns"
        belong = "type with queued jobs belongs" if others == 1 else "types with queued jobs belong"
        shows = md.escape("`/queue jobs <runner-type>`")
        foot.insert(0, f"_{others} other runner {belong} to other channels: {shows} shows one._")
    room = limit - len(head) - sum(len(f) + 1 for f in foot) - 60
    kept = md.fit_lines(body, max(room, 0))
    if len(kept) < len(body):
        kept.append(f"_… {len(body) - len(kept)} more lines left out_")
    return md.truncate("\n".join([head, *kept, *foot]), limit)


def source_of(source: str) -> str:
    return md.escape(source_name(source))


def headline(view: JobsView) -> str:
    return f"*Queued jobs* · from {source_of(view.source)} at {md.time_of(view.at)}"


def footnotes(view: JobsView) -> list[str]:
    notes = []
    if view.ghosts:
        notes.append(
            f"_{md.plural(view.ghosts, 'ghost job')} left out: listed as queued in a run that has "
            "completed; nobody will run them._"
        )
    if view.note:
        notes.append(f"⚠️ {md.escaped(view.note, 400)}")
    if not view.history and view.runner_types:
        notes.append("_No arrivals recorded a day before yet: what changed cannot be said._")
    return notes


def workflow_lines(view: JobsView, runner_type: str) -> list[str]:
    queue = view.runner_types.get(runner_type)
    name = md.escaped(runner_type, MAX_NAME)
    if queue is None:
        return [f"*`{name}`*: {_none(view)} seen{_limit(view)}"]
    mix = ", ".join(f"{t.value} {n}" for t, n in queue.triggers)
    count = queued_said(queue.queued, view.listed_over_mins)
    lines = [f"*`{name}`* · {count}{_limit(view)}" + (f" · {mix}" if mix else "")]
    if (surge := surging(view, runner_type)) is not None:
        # Without a day before, the surge is a share of the queue, not a change.
        label = "What changed" if view.history else "Most of the queue"
        lines.append(f"📈 *{label}:* {md.escaped(surge.text, 400)}")
    if slower := view.slower.get(runner_type, ()):
        said = "; ".join(s.text for s in slower[:3])
        lines.append(f"🐢 *Slower jobs:* {md.escaped(said, 400)}")
    groups: dict[str, list[str]] = {}  # the top workflows under their trigger, in their order
    for workflow in queue.workflows[:TOP_WORKFLOWS]:
        groups.setdefault(workflow.trigger.value, []).append(_workflow_line(workflow, view))
    lines += [line for trigger, rows in groups.items() for line in [f"  _{trigger}_", *rows]]
    if len(queue.workflows) > TOP_WORKFLOWS:
        lines.append(f"    _+{len(queue.workflows) - TOP_WORKFLOWS} more workflows_")
    return lines


def _none(view: JobsView) -> str:
    over = view.listed_over_mins
    return "no queued jobs" if over is None else f"no jobs waiting over {minutes(over)}"


def _limit(view: JobsView) -> str:
    return "" if view.listed_over_mins is None else f" ({source_of(view.source)} lists only those)"


def _workflow_line(w: WorkflowQueue, view: JobsView) -> str:
    line = f"    • `{md.escaped(w.workflow, MAX_NAME)}`"
    if w.queued:
        line += f" — {queued_said(w.queued, view.listed_over_mins)}"
    if w.longest_wait_mins is not None:
        line += f", longest wait {duration(timedelta(minutes=w.longest_wait_mins))}"
    if w.oldest_url:
        job = md.truncate(w.oldest_job or "the job", MAX_JOB)
        line += f", oldest: {md.link(w.oldest_url, job)}"
    if w.last_hour is not None or w.day_before is not None:
        line += f" · {w.last_hour or 0} arrived in the last hour"
        if view.history:
            line += f" ({w.day_before or 0} a day before)"
    return line
