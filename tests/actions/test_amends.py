"""What a resolved incident's summary and postmortem said, kept true after the resolve: the
put-back the summary promised edits it in place, a postmortem drafted before it is told what
changed under it in the thread and on the alert's GitHub issue, once per change whoever commits
it; the served bot edits the summary it posted."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bot.actions.amends import told_again
from bot.actions.scale import made
from bot.backends.kube import kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.alerting.alert_issue import Moment, moment_key, tells_issue
from bot.domain.incident.incidents import (
    AMENDED,
    Event,
    Incident,
    Status,
    without_put_backs,
)
from bot.domain.scale.scale_ups import ScaleUp
from bot.render.alert_issue import comment
from bot.render.replies import summaries
from bot.storage.incident_store import SUMMARY_EDIT, SUMMARY_TS, Commit, IncidentStore
from tests.actions import test_scale_reverts as reverts
from tests.actions.test_scale_reverts import TARGET, Clock, arc_settings, min_runners, sweep
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.incidents import changed, with_scaled
from tests.support.running import eventually, run_bot
from tests.support.scale import RUNNER, open_incident
from tests.support.slack import Slack, post_event, slash, thread_texts
from tests.support.store import KEYS, PREFIX, T0, incident, opened

kube, arc, clock = reverts.kube, reverts.arc, reverts.clock  # its fixtures: 40 runners, a clock
PUT_BACK = ScaleUp(
    runner_type="linux",
    added=5,
    by="alice",
    at=T0,
    field="maxRunners",
    before=20,
    after=25,
    back="linux|maxRunners",
    back_to=20,
    back_when="once its queue has stayed drained 2 min",
)
RESOLVED_AT = T0 + timedelta(minutes=10)
BACK_AT = RESOLVED_AT + timedelta(minutes=3)
PUT = (
    "Put linux back (the incident resolved and its queue stayed drained 2 min): maxRunners 25 → 20"
)
RESOLVE = Event(at=RESOLVED_AT, kind="resolved", text="Resolved by alice")
POSTMORTEM = Event(at=RESOLVED_AT + timedelta(minutes=1), kind="postmortem", text="Postmortem")


def resolved(incident: Incident) -> Incident:
    update = {"status": Status.RESOLVED, "resolved_at": RESOLVED_AT, "updated_at": RESOLVED_AT}
    return changed(with_scaled(incident, PUT_BACK), **update)


def put_back(before: Incident) -> Commit:
    event = Event(at=BACK_AT, kind="scale_reverted", text=f"{PUT} (ARC)")
    return Commit(without_put_backs(before, {PUT_BACK.back}), events=(event,), root=False)


def text_of(blocks: list[dict[str, Any]]) -> str:
    return repr(blocks)


def test_a_put_back_after_the_resolve_edits_the_summary_in_place() -> None:
    before = resolved(incident("1"))
    posted = summaries(before, [RESOLVE], now=RESOLVED_AT)[0]
    assert "maxRunners 25 goes back to 20" in text_of(posted.blocks)
    commit = told_again(before, [RESOLVE], put_back(before), BACK_AT)
    edits = [r for r in commit.replies if r.kind == SUMMARY_EDIT]
    assert [r.edits for r in edits] == [SUMMARY_TS]
    shown = text_of(edits[0].rendered.blocks)
    assert "goes back to" not in shown
    assert f"{PUT} (ARC)" in shown and "Incident 1 resolved" in shown
    assert not any(e.kind == AMENDED for e in commit.events), "no postmortem: no note"


def test_a_postmortem_drafted_before_the_put_back_is_told_what_changed() -> None:
    before = resolved(incident("1"))
    commit = told_again(before, [RESOLVE, POSTMORTEM], put_back(before), BACK_AT)
    notes = [e for e in commit.events if e.kind == AMENDED]
    assert [e.text for e in notes] == [f"Since the postmortem was drafted: {PUT} (ARC)"]
    said = [text_of(r.rendered.blocks) for r in commit.replies if r.kind == "event"]
    assert len(said) == 1 and f"📝 Since the postmortem was drafted: {PUT} (ARC)" in said[0]
    assert "`/queue postmortem 1` drafts it again" in said[0]
    # The summary's edit lists the put-back once, not the note that repeats it.
    edit = next(r for r in commit.replies if r.kind == SUMMARY_EDIT)
    assert text_of(edit.rendered.blocks).count(PUT) == 1
    # The alert's GitHub issue, which carries the postmortem, hears it as a comment.
    assert tells_issue(notes)
    issue = comment(commit.incident, Moment(moment_key(notes[0]), notes[0]), now=BACK_AT)
    assert issue.startswith(
        f"**Postmortem out of date** at 2025-12-01 02:43 UTC: Since the postmortem was drafted: "
        f"{PUT} (ARC)"
    )


def test_nothing_is_said_while_open_reopened_or_unchanged() -> None:
    open_one = with_scaled(incident("1"), PUT_BACK)
    assert told_again(open_one, [], put_back(open_one), BACK_AT).replies == ()
    before = resolved(incident("1"))
    reopened = put_back(before)
    reopened = Commit(changed(reopened.incident, resolved_at=None))  # type: ignore[union-attr]
    assert told_again(before, [RESOLVE], reopened, BACK_AT).replies == ()
    same = Commit(before.model_copy(update={"updated_at": BACK_AT}), root=False)
    assert told_again(before, [RESOLVE, POSTMORTEM], same, BACK_AT).replies == ()


async def test_two_replicas_putting_back_at_once_edit_the_summary_once(
    redis: Redis, redis_url: str, kube: FakeKubeApi, arc: ArcScaler, clock: Clock, tmp_path: Path
) -> None:
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    first = sweep(redis, arc, clock)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "alice"))
    assert result.undo is not None
    record = await first.remember("1", TARGET, result.undo, by="alice")
    loaded = await store.load("1")
    assert loaded.incident is not None
    at = clock()
    done = changed(
        with_scaled(
            loaded.incident, first.going_back(made("linux", 5, "alice", at, result.undo), record)
        ),
        updated_at=at,
        resolved_at=at,
    )
    events = [
        Event(at=at, kind="resolved", text="Resolved"),
        POSTMORTEM.model_copy(update={"at": at}),
    ]
    assert await store.commit(Commit(done, events=tuple(events), version=loaded.version))
    clock.pass_(seconds=16)
    other = Redis.from_url(redis_url, decode_responses=True)
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    second = sweep(other, ArcScaler(Settings(), kube_access(str(path), {})), clock)
    try:
        await asyncio.gather(first.tick(), second.tick(), first.tick(), second.tick())
    finally:
        await other.aclose()
    assert min_runners(kube) == 0
    items = await redis.lrange(KEYS.outbox("1"), 0, -1)  # type: ignore[misc]
    assert [i.split(":")[0] for i in items] == ["event", "event", SUMMARY_EDIT]
    kinds = [e.kind for e in await store.events("1")]
    assert kinds.count("scale_reverted") == 1 and kinds.count(AMENDED) == 1


async def test_the_served_bot_edits_its_summary_after_the_put_back(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    settings = arc_settings(settings_for, kube, tmp_path, scale_revert_settle="2s")
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +5"))
        await eventually(lambda: min_runners(kube) == 5, what="scaled")
        await post_event(running.http, slash("resolve 1"))

        def summary() -> str:
            found = [t for t in thread_texts(slack, root.ts) if "Incident 1 resolved" in t]
            return found[-1] if found else ""

        await eventually(lambda: min_runners(kube) == 0, what="put back")
        back = "minRunners 5 → 0"
        await eventually(lambda: back in summary(), what="the summary edited in place")
        assert "goes back to 0" not in summary()
        summaries_posted = [t for t in thread_texts(slack, root.ts) if "Incident 1 resolved" in t]
        assert len(summaries_posted) == 1, "edited, not posted again"

        # What it said before, read off what Slack was sent: a 2 s settle can pass before a
        # poll of the thread sees the promise, on a loaded machine.
        def said(call: Any) -> str:
            return json.dumps(call.params, ensure_ascii=False)

        posted = [
            c
            for c in slack.emulator.calls("chat.postMessage")
            if c.ok and "Incident 1 resolved" in said(c)
        ]
        assert len(posted) == 1 and "goes back to 0" in said(posted[0])
        edits = [c for c in slack.emulator.calls("chat.update") if back in said(c)]
        assert edits and all("goes back to 0" not in said(c) for c in edits)
