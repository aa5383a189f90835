"""One pass over one claimed incident's issue: link the alert's issue (or open one), tell it the
thread's link and then each moment not yet told, one comment each, and close or reopen an issue
queuepilot opened. Each write is named in the link before it is sent (`trying`), so a call whose
answer was lost is looked for before it is made again; the link is saved after each call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from bot.backends.errors import BackendError
from bot.domain.alert_issue import (
    AREA_LABEL,
    THREAD_MOMENT,
    IssueLink,
    Moment,
    comment_mark,
    group_mark,
    is_alert_issue,
    issue_labels,
    issue_title,
    pending,
)
from bot.domain.incidents import Event, Incident
from bot.render.alert_issue import comment, issue_body
from bot.render.replies import render_event
from bot.status.issue_whereabouts import theirs_now
from bot.storage.incident_store import BAND_EVENT, Commit, Reply, ThreadRef
from bot.storage.leases import Lease

if TYPE_CHECKING:
    from bot.status.alert_issue import AlertIssues

log = logging.getLogger(__name__)

SLOT = "github"  # the app-wide pacing slot and hold every call to GitHub takes
OPENING = "open"  # `IssueLink.trying` while an issue is being opened
UNPROCESSABLE, FORBIDDEN = 422, 403
BUSY_S = 5.0  # another pass holds the incident (a 0.25 replica's): look again this soon
SEARCH_AGAIN_S = (30.0, 120.0, 300.0, 900.0)  # after no issue was found, per look
THREAD_WAIT_S = 120.0  # the thread's link is the first comment: how long to wait for the root
LEASE_S = 120.0  # an incident's pass, and its claim
SLOT_WAIT_S = 10.0  # a call waits this long at most for the app-wide turn
REFUSED_RETRY_S = 900.0

T = TypeVar("T")


class Later(Exception):
    """Nothing failed: the issue waits until `at` (for the root, the issue to appear, its turn);
    None: for nothing more."""

    def __init__(self, at: float | None) -> None:
        self.at = at


@dataclass(eq=False)
class IssuePass:
    """Each call of the pass, and the link saved after it."""

    owner: AlertIssues
    incident: Incident
    thread: ThreadRef | None
    link: IssueLink
    lease: Lease
    writing: bool = False  # a write is in flight: what GitHub answers is about it

    @property
    def id(self) -> str:
        return self.incident.id

    async def save(self, **changes: Any) -> None:
        self.link = self.link.model_copy(update=changes)
        await self.owner.links.save(self.id, self.link)

    async def call(self) -> None:
        """Take the app-wide turn for one call, or wait later; keep the pass's lease, or stop
        (another pass may have begun)."""
        owner = self.owner
        away_s = await owner.pacing.wait_for_slot(
            SLOT, owner.config.github_issues_interval_ms, within_s=SLOT_WAIT_S
        )
        now = owner.clock().timestamp()
        if away_s:
            raise Later(now + away_s)
        if not await owner.leases.renew(self.lease, int(LEASE_S * 1000)):
            raise Later(now + BUSY_S)

    async def write(self, trying: str, send: Callable[[], Awaitable[T]]) -> T:
        """A call that makes something: its turn, its name in the link, then the call."""
        await self.call()
        await self.save(trying=trying)
        self.writing = True
        answer = await send()
        self.writing = False
        return answer

    async def run(self) -> None:
        if self.link.left:
            return
        timeline = await self.owner.store.events(self.id)
        if self.link.linked and not self.link.ours and pending(self.link, timeline):
            await theirs_now(self, timeline)
        if not self.link.linked:
            await self.link_issue(timeline)
        elif self.incident.links.issue != self.link.url:
            # Saved, but the record that follows the save was not made.
            await self.record("issue_linked", "", url=self.link.url)
        for moment in pending(self.link, timeline):
            await self.tell(moment, timeline)
        await self.set_state()
        if self.link.failures or self.link.refused:
            await self.save(failures=0, refused="")

    def fired_at(self, timeline: list[Event]) -> datetime:
        """When the alert last began firing: its incident's opening, or its latest re-fire."""
        refires = [event.at for event in timeline if event.kind == "reopened"]
        return max([self.incident.opened_at, *refires])

    async def link_issue(self, timeline: list[Event]) -> None:
        owner, incident = self.owner, self.incident
        await self.call()
        found = [
            issue
            for issue in await owner.issues.open_issues(AREA_LABEL)
            if is_alert_issue(incident, issue.title, issue.body, issue.labels)
            and issue.number not in self.link.passed
        ]
        # One queuepilot opened (with the group's mark) before a title's match.
        found.sort(key=lambda issue: group_mark(incident) not in issue.body)
        grace = timedelta(seconds=owner.config.github_issues_open_after_seconds)
        waited_for = self.fired_at(timeline) + grace
        if found:
            issue, ours = found[0], group_mark(incident) in found[0].body
        elif self.link.trying == OPENING or not owner.config.github_issues_open:
            if self.link.trying == OPENING:
                # Opened, its answer lost, not listed yet: opening again would make two.
                await self.save(trying="")
            raise Later(self.search_again())
        elif owner.clock() < waited_for:
            # alerting-infra's issue comes seconds after the notification: its chance first,
            # linked when it is seen.
            soon = owner.clock() + timedelta(seconds=SEARCH_AGAIN_S[0])
            raise Later(min(soon, waited_for).timestamp())
        else:
            issue = await self.write(
                OPENING,
                lambda: owner.issues.create(
                    issue_title(incident), issue_body(incident), issue_labels(incident)
                ),
            )
            ours = True
        repo = issue.repo or owner.config.github_issues_repo
        await self.save(repo=repo, number=issue.number, url=issue.url, ours=ours, trying="")
        how = "opened by queuepilot" if ours and owner.config.github_issues_open else "found open"
        text = f"Linked to GitHub issue {repo}#{issue.number} ({how})"
        await self.record("issue_linked", text, url=issue.url)

    def search_again(self) -> float | None:
        """When to look for the issue again; None once the incident is over."""
        searches = self.link.searches
        self.link = self.link.model_copy(update={"searches": searches + 1})
        if not self.incident.is_open:
            return None
        now = self.owner.clock().timestamp()
        waits = SEARCH_AGAIN_S
        return now + (waits[searches] if searches < len(waits) else REFUSED_RETRY_S)

    async def tell(self, moment: Moment, timeline: list[Event]) -> None:
        owner, incident = self.owner, self.incident
        number = self.link.number
        if self.link.trying == moment.key:
            await self.call()
            mark = comment_mark(incident, moment.key)
            if await owner.issues.find_comment(self.link.repo, number, mark):
                await self.told(moment)
                return
        thread_url = await self.thread_url() if moment.key == THREAD_MOMENT else ""
        if moment.event is not None and moment.event.kind == "reopened":
            await self.set_state()  # open again before saying it fired again
        body = comment(
            incident,
            moment,
            thread_url=thread_url,
            timeline=timeline,
            now=owner.clock(),
        )
        try:
            await self.write(moment.key, lambda: owner.issues.comment(self.link.repo, number, body))
        except BackendError as exc:
            # 422 (too long, …) or 403 on a locked issue is never taken; a 403 for a missing
            # permission is, once fixed.
            locked = exc.status == FORBIDDEN and "locked" in str(exc).lower()
            if exc.status != UNPROCESSABLE and not locked:
                raise
            # Never taken: said once, and the moments after it go on.
            self.writing = False
            if str(exc) != self.link.refused:
                await self.tell_refusal(str(exc), then="it is left out")
                await self.save(refused=str(exc))
        await self.told(moment)

    async def told(self, moment: Moment) -> None:
        told = (*self.link.told, moment.key)
        await self.save(told=told, trying="")

    async def thread_url(self) -> str:
        thread, now = self.thread, self.owner.clock()
        if thread is not None:
            link = await self.owner.permalink(thread.channel, thread.ts)
            if link is None:  # Slack does not say now: ask again shortly
                raise Later(now.timestamp() + 30)
            return link
        waited = (now - self.incident.opened_at).total_seconds()
        if waited < THREAD_WAIT_S:
            raise Later(now.timestamp() + 10)
        return ""

    async def set_state(self) -> None:
        closed = not self.incident.is_open
        if not self.link.ours or self.link.closed == closed:
            return
        await self.call()
        await self.owner.issues.set_state(self.link.repo, self.link.number, closed=closed)
        await self.save(closed=closed)

    async def tell_refusal(self, said: str, *, then: str = "") -> None:
        """In the thread: what GitHub refused, and `then` what follows (by default: it is tried
        again)."""
        then = then or f"queuepilot tries again every {round(REFUSED_RETRY_S / 60)} min"
        text = (
            f"GitHub refused the alert's issue in {self.owner.config.github_issues_repo}: {said}. "
            f"{then}; the incident goes on here."
        )
        await self.record("issue_refused", text, reply=True)

    async def record(self, kind: str, text: str, *, reply: bool = False, url: str = "") -> None:
        """A line on the timeline (unless `text` is empty), in the thread with `reply`; with
        `url`, the root links the issue."""

        def recorded(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            event = Event(at=now, kind=kind, text=text)
            updated = incident
            if url:
                links = incident.links.model_copy(update={"issue": url})
                updated = incident.model_copy(update={"links": links})
            replies = (Reply("event", BAND_EVENT, render_event(updated, event)),) if reply else ()
            events = (event,) if text else ()
            return Commit(updated, events=events, replies=replies, root=bool(url)), None

        store, clock = self.owner.store, self.owner.clock
        if not (await store.commit_fresh(self.id, recorded, clock=clock)).committed:
            log.warning("alert issue: incident %s: not recorded: %s", self.id, text)
