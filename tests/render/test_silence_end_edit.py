"""The summary told anew once the silence watch ended the bot's silence at the resolve keeps
saying the silence was ended."""

from __future__ import annotations

from datetime import timedelta

from bot.actions.amends import told_again
from bot.domain.incident.incidents import ActiveSilence, Event, Status, unsilenced
from bot.render.replies import summaries
from bot.storage.incident_store import SUMMARY_EDIT, Commit
from tests.support.incidents import changed
from tests.support.store import T0, incident

RESOLVED_AT = T0 + timedelta(minutes=10)
RESOLVE = Event(at=RESOLVED_AT, kind="resolved", text="Resolved by alice")


def test_ending_the_silence_at_resolve_keeps_the_summary_saying_so() -> None:
    silence = ActiveSilence(
        silence_id="5f3c", backend="Alertmanager", until=T0 + timedelta(hours=2),
        by="U0ALICE", by_name="alice", at=T0,
    )  # fmt: skip
    update = {"status": Status.RESOLVED, "resolved_at": RESOLVED_AT, "silence": silence}
    before = changed(incident("1"), **update)
    posted = repr(summaries(before, [RESOLVE], now=RESOLVED_AT)[0].blocks)
    assert "Its silence was ended at resolve" in posted
    # SilenceWatch._end_at_resolve's `ended` commit, run through amended.
    at = RESOLVED_AT + timedelta(seconds=5)
    event = Event(at=at, kind="unsilenced", text="Silence ended in Alertmanager at resolve")
    commit = told_again(before, [RESOLVE], Commit(unsilenced(before, now=at), events=(event,)), at)
    edits = [r for r in commit.replies if r.kind == SUMMARY_EDIT]
    # Either nothing to edit (the summary already said it), or an edit that still says it.
    for edit in edits:
        assert "silence was ended at resolve" in repr(edit.rendered.blocks), repr(
            edit.rendered.blocks
        )[:3000]
