"""The alert issue's keeper, branch by branch, on a real Redis with GitHub as an in-memory fake
and a clock the test moves: when it looks again for a pipeline's issue and when it stops, a
comment GitHub will never take, the thread not posted yet, failures backed off and reset.
(`tests/system/test_alert_issue.py` runs the whole of it against GitHub's strict stand-in.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from bot.backends.http import BackendError
from bot.backends.issues import Issue
from bot.domain.alerting.alert_issue import THREAD_MOMENT, group_mark, issue_title
from bot.domain.incident.incidents import (
    Event,
    acknowledge,
    resolve_manually,
    with_action,
)
from bot.storage.incident_store import Commit, IssueLinks
from tests.support.alert_issue import (
    THREAD_URL,
    Clock,
    FakeIssues,
    due_at,
    keeper,
    opened_due,
    pipelines,
    with_thread,
)
from tests.support.store import KEYS, T0


async def test_no_issue_yet_is_looked_for_again_while_open_and_no_more_once_resolved(
    redis: Redis,
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock)
    incident = await opened_due(store)
    await keep.tick()
    assert issues.listed == 1
    assert await due_at(store, incident.id) == (T0 + timedelta(seconds=30)).timestamp()
    clock.now += timedelta(seconds=30)
    await keep.tick()
    assert await due_at(store, incident.id) == (clock.now + timedelta(seconds=120)).timestamp()

    # The pipeline opens its issue meanwhile: the next look links it.
    found = Issue(7, "https://gh/7", issue_title(incident), "", ("area:alerting",), "open")
    issues.issues.append(found)
    clock.now += timedelta(seconds=120)
    await keep.tick()
    linked = await store.get(incident.id)
    assert linked is not None and linked.links.issue == "https://gh/7"


async def test_a_resolved_incident_with_no_issue_stops_looking(redis: Redis) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock)
    incident = await opened_due(store)
    loaded = await store.load(incident.id)
    resolved = resolve_manually(incident, by="U1", name="alice", now=T0)
    event = Event(at=T0, kind="resolved", text="Resolved manually", actor="U1")
    assert await store.commit(
        Commit(resolved, version=loaded.version, events=(event,)), now=T0.timestamp()
    )
    await keep.tick()
    assert issues.listed == 1
    assert await due_at(store, incident.id) is None


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (422, "GitHub answered 422: Body is too long (maximum is 65536 characters)"),
        (403, "GitHub answered 403: Unable to create comment because issue is locked."),
    ],
)
async def test_a_comment_github_will_never_take_is_said_once_and_the_rest_go_on(
    redis: Redis, status: int, said: str
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    issues.refuse["comment"] = BackendError(said, retryable=False, status=status)
    await keep.tick()
    # The thread's link was refused; nothing is retried, the next moment is told.
    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    acked = acknowledge(loaded.incident, by="U1", name="alice", now=T0)
    event = Event(at=T0, kind="acknowledged", text="Acknowledged", actor="U1", actor_name="alice")
    commit = Commit(with_action(acked, event), version=loaded.version, events=(event,))
    assert await store.commit(commit, now=clock.now.timestamp())
    await keep.tick()
    [number] = issues.comments
    assert [body.split("\n")[0] for body in issues.comments[number]] == [
        "**Acknowledged** by alice at 2025-12-01 02:30 UTC: Acknowledged"
    ]
    timeline = await store.events(incident.id)
    refused = [e for e in timeline if e.kind == "issue_refused"]
    assert len(refused) == 1 and said in refused[0].text


async def test_the_thread_is_waited_for_then_told_without_its_link(redis: Redis) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await keep.tick()
    assert issues.comments == {}  # linked, but the root is not posted yet
    assert await due_at(store, incident.id) == (T0 + timedelta(seconds=10)).timestamp()
    clock.now += timedelta(seconds=121)
    await keep.tick()
    [said] = issues.comments[1]
    assert said.startswith("queuepilot follows this alert as incident 1 in Slack:")


async def test_a_thread_link_not_known_yet_is_asked_again_shortly_then_told(
    redis: Redis,
) -> None:
    """Slack does not give the thread's link now (slow, failing): the issue hears nothing of
    the thread yet, and is told it with its link once Slack gives it."""
    issues, clock = FakeIssues(), Clock()
    links: dict[str, str | None] = {"C0STORE": None}
    keep, store = await keeper(redis, issues, clock, links=links, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    await keep.tick()
    assert issues.comments == {}
    assert await due_at(store, incident.id) == (T0 + timedelta(seconds=30)).timestamp()
    links["C0STORE"] = THREAD_URL
    clock.now += timedelta(seconds=30)
    await keep.tick()
    [said] = issues.comments[1]
    assert said.startswith(
        f"queuepilot follows this alert as incident 1 in [its Slack thread]({THREAD_URL})"
    )


async def test_failures_back_off_and_a_success_resets_them(redis: Redis) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    for step in (10, 20, 40):  # each wait jittered between half the step and the step
        issues.refuse["list"] = BackendError("GitHub answered 502", retryable=True, status=502)
        await keep.tick()
        due = await due_at(store, incident.id)
        assert due is not None
        wait = due - clock.now.timestamp()
        assert step / 2 <= wait <= step
        clock.now += timedelta(seconds=step)
    await keep.tick()
    link = await IssueLinks(redis, KEYS, retention_s=3600).get(incident.id)
    assert link is not None and link.failures == 0 and THREAD_MOMENT in link.told


async def test_a_moment_committed_mid_pass_is_told_after_that_pass_never_beside_it(
    redis: Redis,
) -> None:
    """A comment in flight on one replica; an acknowledgement makes the incident due again; the
    other replica's tick must not tell the issue beside the pass (a duplicate, out of order):
    it waits, and the ack follows the thread's link, once."""
    issues, clock = FakeIssues(hold=asyncio.Event()), Clock()
    first, store = await keeper(redis, issues, clock, open=True)
    second, _ = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    held = issues.hold
    assert held is not None
    passing = asyncio.create_task(first.tick())
    await asyncio.wait_for(issues.commenting.wait(), 10)

    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    acked = acknowledge(loaded.incident, by="U1", name="alice", now=T0)
    event = Event(at=T0, kind="acknowledged", text="Acknowledged", actor="U1", actor_name="alice")
    commit = Commit(with_action(acked, event), version=loaded.version, events=(event,))
    assert await store.commit(commit, now=clock.now.timestamp())
    await second.tick()
    held.set()
    await asyncio.wait_for(passing, 10)
    clock.now += timedelta(seconds=10)
    await second.tick()

    [number] = issues.comments
    said = [body.split(" ")[0] for body in issues.comments[number]]
    assert said == ["queuepilot", "**Acknowledged**"], issues.comments[number]


async def test_with_open_the_pipelines_issue_is_given_its_grace_then_one_is_opened(
    redis: Redis,
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True, grace_s=90)
    incident = await opened_due(store)
    await keep.tick()
    assert issues.issues == [] and issues.listed == 1
    assert await due_at(store, incident.id) == (T0 + timedelta(seconds=30)).timestamp()
    clock.now += timedelta(seconds=30)
    await keep.tick()
    clock.now = T0 + timedelta(seconds=90)
    await keep.tick()
    [ours] = issues.issues
    assert issues.listed == 3 and ours.body.endswith(f"{group_mark(incident)}\n")


async def test_the_pipelines_issue_opened_within_the_grace_is_linked_not_a_second(
    redis: Redis,
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True, grace_s=90)
    incident = await opened_due(store)
    await keep.tick()
    issues.issues.append(pipelines(incident, 1))
    clock.now += timedelta(seconds=30)
    await keep.tick()
    linked = await store.get(incident.id)
    assert linked is not None and linked.links.issue == "https://gh/1"
    assert len(issues.issues) == 1


async def test_a_422_to_the_issue_queuepilot_opens_is_said_once_with_its_fix_and_left(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    said = "GitHub answered 422: Validation Failed (Label name invalid ('Team:xxx'))"
    issues.refuse["create"] = BackendError(said, retryable=False, status=422)
    await keep.tick()
    assert await due_at(store, incident.id) is None
    await store.issue_due.schedule(incident.id, clock.now.timestamp())  # a later moment
    await keep.tick()
    assert issues.issues == [] and issues.listed == 1
    timeline = await store.events(incident.id)
    [refused] = [e for e in timeline if e.kind == "issue_refused"]
    assert "at most 50 characters" in refused.text
    assert "queuepilot opens no issue for this incident" in refused.text
    assert len([r for r in caplog.records if "GitHub refused the issue" in r.getMessage()]) == 1
