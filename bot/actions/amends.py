"""A resolved incident's summary and postmortem kept true after the resolve: a change edits the
summary in place, and one to a postmortem already drafted is said under it in the thread (an
`AMENDED` event). Decided inside the change's own fenced commit, so a change committed once says it
once, whichever leader commits it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from bot.domain.incident.incidents import AMENDED, POSTMORTEM, Event, Incident, drafted_from
from bot.render import mrkdwn as md
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_event, summaries
from bot.storage.incident_store import BAND_EVENT, SUMMARY_EDIT, SUMMARY_TS, Change, Commit, Reply

T = TypeVar("T")


def amending(change: Change[T]) -> Change[T]:
    """`change`, with what its commit makes the summary and postmortem say (needs the timeline)."""

    def changed(
        incident: Incident, now: datetime, timeline: list[Event]
    ) -> tuple[Commit | None, T]:
        commit, answer = change(incident, now, timeline)
        if commit is None or commit.incident is None:
            return commit, answer
        return told_again(incident, timeline, commit, now), answer

    return changed


def told_again(before: Incident, timeline: list[Event], commit: Commit, now: datetime) -> Commit:
    """`commit` with the summary's edit and postmortem note it calls for (none while open)."""
    after = commit.incident
    if after is None or before.is_open or after.is_open:
        return commit
    events, replies = commit.events, commit.replies
    written = next((e for e in reversed(timeline) if e.kind == POSTMORTEM), None)
    if written is not None:
        drafted = drafted_from(timeline, written)
        was = render_postmortem(before, drafted, now=written.at)
        if render_postmortem(after, drafted, now=written.at) != was:
            note = amended(before, after, events, now)
            command = f"`/queue postmortem {md.escape(after.id)}`"
            detail = f"_(drafted {md.time_of(written.at)}; {command} drafts it again)_"
            reply = Reply("event", BAND_EVENT, render_event(after, note, detail=detail))
            events, replies = (*events, note), (*replies, reply)
    # The summary's "What was done" leaves the notes out: they repeat what it lists.
    done = [e for e in timeline if e.kind != AMENDED]
    shown = summaries(after, [*done, *commit.events], now=now)[0]
    if shown != summaries(before, done, now=now)[0]:
        edit = Reply(SUMMARY_EDIT, BAND_EVENT, shown, replaces=(SUMMARY_EDIT,), edits=SUMMARY_TS)
        replies = (*replies, edit)
    return replace(commit, events=events, replies=replies)


def amended(before: Incident, after: Incident, changes: Sequence[Event], now: datetime) -> Event:
    """The event that says what changed since the postmortem was drafted."""
    said = [e.text.rstrip(".") for e in changes]
    kept = {up.back for up in after.put_backs}
    said += [
        f"{up.runner_type} {up.field} {up.back_from} goes back with a later incident's scale-up"
        for up in before.put_backs
        if up.back not in kept and not changes
    ]
    what = "; ".join(said) or "what the incident records changed"
    return Event(at=now, kind=AMENDED, text=f"Since the postmortem was drafted: {what}")
