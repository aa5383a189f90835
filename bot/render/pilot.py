"""The pilot of each runner type, as `/queue pilot` and the App Home show it: its policy, its
state, its last act and what came of it, as stored, never recomputed here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from bot.domain.incident.incidents import Incident
from bot.domain.message import Rendered
from bot.domain.scale.pilot import PilotState
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render.queue import MAX_ANSWER

MAX_TYPE = 700  # one type's lines, so that several fit one answer
DECLARE = (
    "No runner type has a pilot. To let queuepilot scale a type up on its own, within a policy, "
    'give its SCALER_TARGETS entry one: `"pilot": {"up_to": 60, "step": 20, "hold_seconds": 180, '
    '"period_seconds": 60, "cooldown_seconds": 600}` (docs/pilot.md: start with a small step and '
    "a low up_to)."
)


def render_pilot(states: Sequence[PilotState], command: str) -> str:
    """Every piloted type within one answer (or one Home section), else how to declare one."""
    if not states:
        return DECLARE
    cmd = md.escape(command)
    head = f"*Pilot* · `{cmd} pilot off|on [runner-type]` switches it (scale permission)"
    texts = [pilot_text(state) for state in states]
    # Each type is a paragraph: one newline more than fit_lines counts.
    kept = md.fit_lines(texts, MAX_ANSWER - len(head) - len(texts) - 60)
    if left := len(texts) - len(kept):
        kept.append(f"… and {md.plural(left, 'more piloted type')}.")
    return "\n\n".join([head, *kept])


def pilot_text(state: PilotState) -> str:
    p = state.policy
    hold, period, cooldown = (
        duration(timedelta(seconds=s)) for s in (p.hold_s, p.period_s, p.cooldown_s)
    )
    policy = f"up_to {p.up_to}, step {p.step}, hold {hold}, period {period}, cooldown {cooldown}"
    lines = [f"*`{md.runner_name(state.runner_type)}`* · {policy}", _state(state)]
    if last := state.piloted.last:
        came = f": {md.escaped(state.piloted.outcome, 200)}" if state.piloted.outcome else ""
        lines.append(f"Last act: {md.escaped(last, 200)}{came}")
    text = md.truncate("\n".join(lines), MAX_TYPE)
    # Its acts and reasons are read within hours of its last look at the type.
    return md.in_zone(text, state.piloted.at) if state.piloted.at else text


def _state(state: PilotState) -> str:
    if not state.enabled:
        return "⏹️ *off*: PILOT_ENABLED=false stops every pilot"
    if (paused := state.paused) is not None:
        by, why = md.person(None, paused.by), md.in_zone(md.escaped(paused.why, 300), paused.at)
        return f"⏸️ *paused* by {by} {md.slack_date(paused.at, '{ago}')}: {why}"
    why = state.piloted.why
    on = "🧪 *dry run* (it scales nothing)" if state.policy.dry_run else "▶️ *on*"
    if not why:  # nothing said yet, or said while it was paused or off
        return f"{on}: it looks at the next reading"
    return f"{on}: {md.escaped(why, 400)}"


def pilot_lines(incident: Incident) -> list[str]:
    return [
        f"🤖 *Pilot* · `{md.runner_name(name)}`: {md.in_zone(md.escaped(line.said, 400), line.at)}"
        for name, line in sorted(incident.pilot.items())
    ]


def render_pilot_line(incident: Incident) -> Rendered:
    """The thread's one pilot reply, edited in place as its word changes."""
    lines = pilot_lines(incident)
    text = f"Incident {md.escape(incident.id)}: the pilot"
    return md.rendered(text, [md.section("\n".join(lines))]) if lines else md.rendered(text, [])
