"""Where the linked issue is now, against the keeper on a real Redis (`tests.support.alert_issue`):
alerting-infra's issue closed and a new one opened after a re-fire, an issue deleted or
transferred."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from redis.asyncio import Redis

from bot.backends.http import BackendError
from tests.support.alert_issue import (
    Clock,
    FakeIssues,
    commit_event,
    keeper,
    opened_due,
    pipelines,
    with_thread,
)


async def test_after_a_refire_the_pipelines_new_issue_is_linked_and_the_closed_one_hears_nothing(
    redis: Redis,
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True, grace_s=90)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    issues.issues.append(pipelines(incident, 1))
    await keep.tick()
    assert len(issues.comments[1]) == 1  # the thread's link
    # The alert resolves: alerting-infra closes its issue before queuepilot tells it.
    issues.issues[0] = pipelines(incident, 1, "closed")
    clock.now += timedelta(minutes=10)
    await commit_event(store, incident, "resolved", clock.now)
    await keep.tick()
    # It fires again: alerting-infra opens a new issue.
    clock.now += timedelta(minutes=10)
    await commit_event(store, incident, "reopened", clock.now)
    issues.issues.append(pipelines(incident, 2))
    await keep.tick()

    linked = await store.get(incident.id)
    assert linked is not None and linked.links.issue == "https://gh/2"
    assert len(issues.comments[1]) == 1  # neither the resolve nor the re-fire on the closed one
    [thread] = issues.comments[2]
    assert thread.startswith("queuepilot follows this alert as incident 1 in [its Slack thread]")
    assert len(issues.issues) == 2  # alerting-infra's two, none of queuepilot's


async def test_a_deleted_issue_is_looked_for_again_and_with_open_one_is_opened(
    redis: Redis,
) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    issues.issues.append(pipelines(incident, 1))
    await keep.tick()
    issues.issues.clear()  # deleted: GitHub answers 410
    issues.refuse["comment"] = BackendError("GitHub answered 410", retryable=False, status=410)
    await commit_event(store, incident, "resolved", clock.now)
    await keep.tick()
    await keep.tick()
    [ours] = issues.issues
    linked = await store.get(incident.id)
    assert linked is not None and linked.links.issue == ours.url
    timeline = await store.events(incident.id)
    assert any("#1 is gone" in e.text for e in timeline)


async def test_their_issue_transferred_and_closed_there_is_followed_and_told_nothing_more(
    redis: Redis,
) -> None:
    """alerting-infra's issue moved to another repository and closed there: the root follows
    it, and the resolve is not commented on a closed issue that is not queuepilot's."""
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    issues.issues.append(pipelines(incident, 1))
    await keep.tick()
    assert len(issues.comments[1]) == 1  # the thread's link
    archived = replace(pipelines(incident, 4, "closed"), repo="pytorch/archive")
    issues.moves[1] = archived
    clock.now += timedelta(minutes=10)
    await commit_event(store, incident, "resolved", clock.now)
    await keep.tick()

    linked = await store.get(incident.id)
    assert linked is not None and linked.links.issue == archived.url
    assert 4 not in issues.comments and len(issues.comments[1]) == 1
    timeline = await store.events(incident.id)
    assert any("moved to pytorch/archive#4" in e.text for e in timeline)
