"""What the alert's GitHub issue says: its body, and one comment per moment of the incident, as
GitHub-flavoured Markdown escaped as the postmortem escapes it. Each comment ends with its hidden
mark (`comment_mark`), how a comment whose answer was lost is found again.
"""

from __future__ import annotations

import re
from datetime import datetime

from bot.domain.alerting.alert_issue import THREAD_MOMENT, Moment, comment_mark, group_mark
from bot.domain.incident.incidents import (
    ACKNOWLEDGED_BY_ACTING,
    AMENDED,
    POSTMORTEM,
    Event,
    Incident,
    drafted_from,
)
from bot.domain.scale.scale_ups import SCALE_OUTCOME
from bot.domain.shortened import shortened
from bot.render.postmortem import (
    impact_section,
    md_escape,
    render_postmortem,
    safe_url,
    scale_ups_section,
    summary_section,
    utc,
    who,
)

MAX_BODY = 65_536  # GitHub refuses a longer body or comment
MAX_EVENT_TEXT = 500
# GitHub links @mentions and `#12`, `GH-12` after Markdown is read, when `md_escape`'s backslashes
# are gone: an invisible word joiner after `\@`, `\#` and inside `GH\-` links nothing.
WORD_JOINER = "\u2060"
_REFERENCE = re.compile(r"(?i)(\\@(?=\w)|\\#(?=[0-9])|\bgh(?=\\-[0-9]))")

TITLES = {
    "acknowledged": "Acknowledged",
    ACKNOWLEDGED_BY_ACTING: "Acknowledged",  # by a first act, which its text names
    "handed_over": "Taken over",
    "silenced": "Silenced",
    "unsilenced": "Silence ended",
    "scaled": "Scaled up",
    "scale_reverted": "Scale-up put back",
    SCALE_OUTCOME: "Scale-up followed",
    "pilot_undone": "The pilot's act undone",
    "pilot_dry_run": "The pilot's dry run",
    "pilot_paused": "The pilot paused",
    "pilot_resumed": "The pilot on again",
    "pilot_declined": "The pilot stands aside",
    "diagnosed": "Likely cause",
    "alert_cleared": "Alert cleared",
    "reopened": "Fired again",
    AMENDED: "Postmortem out of date",
    "resolved": "Resolved",
}


def issue_body(incident: Incident) -> str:
    """The body of the issue queuepilot opens for the alert, in alerting-infra's manner."""
    details = [
        ("Opened at", utc(incident.opened_at)),
        ("Team", md_escape(incident.team or "", 80) or "not given"),
        ("Priority", md_escape(incident.priority or "", 20) or "not given"),
        ("Source", incident.source),
        ("queuepilot incident", md_escape(incident.id, 40)),
    ]
    if incident.description:
        details.append(("Description", md_escape(incident.description, 1500)))
    links = incident.links
    named = {"Runbook": links.runbook, "Dashboard": links.dashboard, "View alert": links.alert}
    details += [(label, f"<{url.strip()}>") for label, url in named.items() if safe_url(url)]
    lines = [f"**{md_escape(incident.summary or incident.title, 1000)}**", "", "**Alert details**"]
    lines += [f"- **{label}**: {value}" for label, value in details]
    lines += [
        "",
        "The Slack thread, each step taken there and the summary follow as comments. "
        "queuepilot closes this issue when the incident resolves and reopens it if the alert "
        "fires again soon after (queuepilot's reopen window).",
        "",
        group_mark(incident),
    ]
    return unlinked("\n".join(lines)) + "\n"


def comment(
    incident: Incident,
    moment: Moment,
    *,
    thread_url: str = "",
    timeline: list[Event] | None = None,
    now: datetime,
) -> str:
    """The comment telling `moment`, its mark last; a postmortem's, the thread's write-up."""
    event = moment.event
    # Written on the issue itself: its own link there would only lead back to the page it is on.
    unlinked_issue = incident.links.model_copy(update={"issue": ""})
    incident = incident.model_copy(update={"links": unlinked_issue})
    if moment.key == THREAD_MOMENT or event is None:
        where = f"[its Slack thread]({thread_url.strip()})" if safe_url(thread_url) else "Slack"
        text = (
            f"queuepilot follows this alert as incident {md_escape(incident.id, 40)} in {where}: "
            "the steps responders take there are commented here; the periodic status stays in "
            "Slack."
        )
    elif event.kind == POSTMORTEM:
        text = render_postmortem(incident, drafted_from(timeline or [], event), now=event.at)
    else:
        title = TITLES.get(event.kind) or md_escape(event.kind.replace("_", " ").capitalize(), 60)
        said = event.text
        if event.kind == "diagnosed" and incident.cause.said:
            said = incident.cause.said
        by = f" by {who(event.actor, event.actor_name)}" if event.actor else ""
        text = f"**{title}**{by} at {utc(event.at)}: {md_escape(said, MAX_EVENT_TEXT)}"
        if event.kind == "resolved":
            upto = [e for e in timeline or [] if e.at <= event.at]
            parts = [summary_section(incident, upto, now), impact_section(incident)]
            parts.append(scale_ups_section(incident))
            text = "\n\n".join([text, *(part.replace("## ", "### ", 1) for part in parts if part)])
    mark = comment_mark(incident, moment.key)
    text = unlinked(text)
    room = MAX_BODY - len(mark) - 40
    if len(text) > room:
        text = shortened(text, room) + "\n\n_(cut to GitHub's limit)_"
    return f"{text}\n\n{mark}\n"


def unlinked(markdown: str) -> str:
    """`md_escape`'s Markdown, its @mentions and issue references linking nothing on GitHub."""
    return _REFERENCE.sub(lambda found: found[0] + WORD_JOINER, markdown)
