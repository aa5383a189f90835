"""The answer to a Resolve while the queue is still live: what is, against the alert's
thresholds, and a way to resolve anyway (a button, and the command for those who typed one)."""

from __future__ import annotations

from bot.domain.headline import StillLive
from bot.domain.incidents import Incident
from bot.domain.message import Rendered
from bot.domain.units import minutes, number
from bot.render import mrkdwn as md
from bot.render.replies import incident_ref


def render_still_live(incident: Incident, live: StillLive) -> Rendered:
    incident_id = md.escape(incident.id)
    text = (
        f"Incident {incident_id} is still live: {still_live_said(live)} and the alert is still "
        f"firing. Resolve it anyway? The button below, or `/queue resolve {incident_id} anyway`."
    )
    resolve = md.button(
        "Resolve anyway", "incident_resolve_anyway", incident_ref(incident), "danger"
    )
    return md.rendered(text, [md.section(text), md.actions([resolve])])


def still_live_said(live: StillLive) -> str:
    """What is still over, each number with the threshold it is over."""
    each = " for a runner type" if live.per_type else ""
    parts = []
    for said, threshold, shown, of in (
        (live.jobs, live.queued_threshold, number, each),
        (live.wait, live.wait_threshold, minutes, ""),
    ):
        if not said:
            continue
        if threshold is None:  # from a rule that says only whether it was crossed
            parts.append(f"{said} (the alert last said it was over its threshold)")
        else:
            parts.append(f"{said} (the alert's threshold is {shown(threshold)}{of})")
    return ", ".join(parts)
