"""The alert issue's keeper (`bot.status.alert_issue`) on a real Redis, with GitHub as an
in-memory fake and a clock the test moves: what `tests/status/test_alert_issue*.py` and
`tests/backends/test_github_quota.py` share."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from redis.asyncio import Redis

from bot.backends.http import BackendError
from bot.backends.issues import GithubIssues, Issue
from bot.config import Settings
from bot.domain.alerting.alert_issue import issue_title
from bot.domain.incident.incidents import Event, Incident, Status, resolve_manually
from bot.pacing import Pacing
from bot.status.alert_issue import AlertIssues
from bot.storage.incident_store import Commit, IncidentStore, IssueLinks
from bot.storage.leases import Leases
from tests.support.incidents import changed as regrouped
from tests.support.store import KEYS, PREFIX, T0, opened

REPO = "pytorch/alerts"
THREAD_URL = "https://slack.example/archives/C0STORE/p1"


@dataclass
class FakeIssues:
    """GitHub's issues as the keeper sees them; `refuse` answers each call named in it once."""

    issues: list[Issue] = field(default_factory=list)
    comments: dict[int, list[str]] = field(default_factory=dict)
    refuse: dict[str, BackendError] = field(default_factory=dict)
    moves: dict[int, Issue] = field(default_factory=dict)  # transferred: where each is now
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
        if number in self.moves:
            return self.moves[number]
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
    issues: GithubIssues | FakeIssues,
    clock: Callable[[], datetime],
    *,
    open: bool = False,
    links: dict[str, str | None] | None = None,
    grace_s: int = 0,
    pacing: Pacing | None = None,
) -> tuple[AlertIssues, IncidentStore]:
    """A replica's keeper; `links`: each channel's thread link as Slack gives it now (None:
    not known yet), THREAD_URL in C0STORE unless given; `pacing`: the app-wide one, on a clock
    of the test's."""
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
            pacing or Pacing(),
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


async def commit_event(store: IncidentStore, incident: Incident, kind: str, at: datetime) -> None:
    """The incident resolved, or fired again, with its moment on the timeline."""
    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    if kind == "resolved":
        changed = resolve_manually(loaded.incident, by="U1", name="alice", now=at)
    else:
        update = {"status": Status.FIRING, "resolved_at": None, "resolution": None}
        changed = regrouped(loaded.incident, **update)
    event = Event(at=at, kind=kind, text=kind)
    commit = Commit(changed, version=loaded.version, events=(event,))
    assert await store.commit(commit, now=at.timestamp())


def pipelines(incident: Incident, number: int, state: str = "open") -> Issue:
    """The issue alerting-infra opens for the alert."""
    labels = ("area:alerting", "Pri:P2", "Team:pytorch-dev-infra", "Source:grafana")
    return Issue(number, f"https://gh/{number}", issue_title(incident), "", labels, state)
