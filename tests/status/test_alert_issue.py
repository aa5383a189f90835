"""The alert issue's keeper, branch by branch, on a real Redis with GitHub as an in-memory fake
and a clock the test moves: when it looks again for a pipeline's issue and when it stops, a
comment GitHub will never take, the thread not posted yet, failures backed off and reset.
(`tests/system/test_alert_issue.py` runs the whole of it against GitHub's strict stand-in.)"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from redis.asyncio import Redis

from bot.backends.errors import BackendError
from bot.backends.issues import Issue
from bot.config import Settings
from bot.domain.alert_issue import THREAD_MOMENT, group_mark, issue_title
from bot.domain.incidents import (
    Event,
    Incident,
    Status,
    acknowledge,
    resolve_manually,
    with_action,
)
from bot.pacing import Pacing
from bot.status.alert_issue import AlertIssues
from bot.storage.incident_store import Commit, IncidentStore, IssueLinks
from bot.storage.leases import Leases
from tests.support.store import KEYS, PREFIX, T0, opened

REPO = "pytorch/alerts"
THREAD_URL = "https://slack.example/archives/C0STORE/p1"


@dataclass
class FakeIssues:
    """GitHub's issues as the keeper sees them; `refuse` answers each call named in it once."""

    issues: list[Issue] = field(default_factory=list)
    comments: dict[int, list[str]] = field(default_factory=dict)
    refuse: dict[str, BackendError] = field(default_factory=dict)
    listed: int = 0
    # Set: the next comment waits for it (a slow GitHub), `commenting` says it is in flight.
    hold: asyncio.Event | None = None
    commenting: asyncio.Event = field(default_factory=asyncio.Event)

    def _gate(self, call: str) -> None:
        if call in self.refuse:
            raise self.refuse.pop(call)

    async def open_issues(self, label: str) -> list[Issue]:
        self._gate("list")
        self.listed += 1
        return [i for i in self.issues if label in i.labels and i.state == "open"]

    async def create(self, title: str, body: str, labels: tuple[str, ...]) -> Issue:
        self._gate("create")
        issue = Issue(len(self.issues) + 1, f"https://gh/{len(self.issues) + 1}", title, body,
                      labels, "open")  # fmt: skip
        self.issues.append(issue)
        return issue

    async def issue(self, repo: str, number: int) -> Issue | None:
        self._gate("issue")
        found = [i for i in self.issues if i.number == number]
        return replace(found[0], repo=repo) if found else None

    async def comment(self, repo: str, number: int, body: str) -> None:
        self._gate("comment")
        if self.hold is not None:
            hold, self.hold = self.hold, None
            self.commenting.set()
            await hold.wait()
        self.comments.setdefault(number, []).append(body)

    async def find_comment(self, repo: str, number: int, mark: str) -> bool:
        return any(mark in body for body in self.comments.get(number, []))

    async def set_state(self, repo: str, number: int, *, closed: bool) -> None:
        self._gate("state")


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


async def keeper(
    redis: Redis,
    issues: FakeIssues,
    clock: Clock,
    *,
    open: bool = False,
    links: dict[str, str | None] | None = None,
    grace_s: int = 0,
) -> tuple[AlertIssues, IncidentStore]:
    """A replica's keeper; `links`: each channel's thread link as Slack gives it now (None:
    not known yet), THREAD_URL in C0STORE unless given."""
    store = IncidentStore(redis, PREFIX, issues=True)
    permalinks = {"C0STORE": THREAD_URL} if links is None else links

    async def permalink(channel: str, ts: str) -> str | None:
        return permalinks.get(channel, "")

    config = Settings(
        github_issues_repo=REPO,
        github_issues_open=open,
        github_issues_open_after_seconds=grace_s,
        github_issues_interval_ms=10,
    )
    return (
        AlertIssues(
            store,
            IssueLinks(redis, KEYS, retention_s=3600),
            issues,
            Pacing(),
            Leases(redis),
            config=config,
            permalink=permalink,
            clock=clock,
        ),
        store,
    )


async def opened_due(store: IncidentStore) -> Incident:
    """An incident just opened, due for its issue (the intake's commit marks it so)."""
    incident = await opened(store)
    await store.issue_due.schedule(incident.id, T0.timestamp())
    return incident


async def with_thread(redis: Redis, incident: Incident) -> None:
    """The root posted, as the channel's sender records it (`record_root.lua`)."""
    thread = json.dumps({"channel": "C0STORE", "ts": "1.000100"})
    await redis.hset(KEYS.incident(incident.id), "thread", thread)


async def due_at(store: IncidentStore, incident_id: str) -> float | None:
    return await store.issue_due.due_at(incident_id)


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
    for wait in (10, 20, 40):
        issues.refuse["list"] = BackendError("GitHub answered 502", retryable=True, status=502)
        await keep.tick()
        assert await due_at(store, incident.id) == (clock.now + timedelta(seconds=wait)).timestamp()
        clock.now += timedelta(seconds=wait)
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


async def commit_event(store: IncidentStore, incident: Incident, kind: str, at: datetime) -> None:
    """The incident resolved, or fired again, with its moment on the timeline."""
    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    if kind == "resolved":
        changed = resolve_manually(loaded.incident, by="U1", name="alice", now=at)
    else:
        update = {"status": Status.FIRING, "resolved_at": None, "resolution": None}
        changed = loaded.incident.model_copy(update=update)
    event = Event(at=at, kind=kind, text=kind)
    commit = Commit(changed, version=loaded.version, events=(event,))
    assert await store.commit(commit, now=at.timestamp())


def pipelines(incident: Incident, number: int, state: str = "open") -> Issue:
    """The issue alerting-infra opens for the alert."""
    labels = ("area:alerting", "Pri:P2", "Team:pytorch-dev-infra", "Source:grafana")
    return Issue(number, f"https://gh/{number}", issue_title(incident), "", labels, state)


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
