"""Who is working an incident and what was done, as its root shows it: the responders, the
latest actions and the likely cause from diagnostics.

People are named with `person`, never mentioned: these lines change on routine edits, which must
ping nobody (the owner's mention is the status line's). Lines a person reads whole are shortened
between words, so none ends mid-word, and each stays far within Block Kit's text limits.
"""

from __future__ import annotations

from bot.domain.incidents import RECENT_ACTIONS, Event, Incident
from bot.render.mrkdwn import escape, person, shorten, slack_date

MAX_RESPONDERS = 5
ACTION_CHARS = 120  # an action's text, before its time and who did it
CAUSE_CHARS = 300


def responders_line(incident: Incident) -> str:
    """Who acted, in order of first action ("Responders: *alice*, *bob*"), the owner left out
    (the status line names them); past five, how many more. Empty when nobody else acted."""
    others = [r for r in incident.responders if r.user_id != incident.acknowledged_by]
    if not others:
        return ""
    names = ", ".join(_named(r.user_id, r.name) for r in others[:MAX_RESPONDERS])
    more = len(others) - MAX_RESPONDERS
    return f"Responders: {names}" + (f" +{more}" if more > 0 else "")


def latest_actions(incident: Incident) -> str:
    """The latest actions, newest first, one short line each; empty when there are none."""
    recent = incident.recent_actions[-RECENT_ACTIONS:]
    if not recent:
        return ""
    return "*Latest*\n" + "\n".join(f"• {_action_line(event)}" for event in reversed(recent))


def likely_cause_line(incident: Incident) -> str:
    """The latest diagnostics' conclusion; empty before diagnostics ran."""
    if not incident.likely_cause.strip():
        return ""
    return f"🩺 *Likely cause:* {escape(shorten(incident.likely_cause, CAUSE_CHARS))}"


def _action_line(event: Event) -> str:
    by = f" by {_named(event.actor, event.actor_name)}" if event.actor else ""
    return f"{slack_date(event.at, '{time}')} {escape(shorten(event.text, ACTION_CHARS))}{by}"


def _named(user_id: str, name: str) -> str:
    """A display name on one line: a newline in it would break the list."""
    return person(user_id, " ".join(name.split()))
