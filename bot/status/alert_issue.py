"""The alert's GitHub issue, kept in step with its incident (`GITHUB_ISSUES_REPO`).

A tick runs one pass per incident due in `issue_due`, under a lease renewed before each call (so a
successor never runs a pass beside a deposed leader's): link the alert's open `area:alerting` issue
(pytorch/alerting-infra's; with `GITHUB_ISSUES_OPEN`, one queuepilot opens once
`GITHUB_ISSUES_OPEN_AFTER_SECONDS` passed without it), comment each moment not yet told, and close
or reopen an issue queuepilot opened. Each write is named in the link (`trying`) before it is sent,
so a call whose answer was lost is looked for before it is made again. An issue someone else opened
is theirs: never closed or reopened, never told anything once closed. alerting-infra closes its
issue at the resolve and opens a new one at a re-fire, so the link moves; a transferred issue is
followed, a deleted one looked for again. GitHub's 422 to the issue queuepilot opens is not retried:
the same request would meet it again (said and logged once, with its fix; that issue is left).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.backends.http import BackendError
from bot.backends.issues import NOT_THERE, GithubIssues, Issue
from bot.config import Settings
from bot.domain.alerting.alert_issue import (
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
from bot.domain.incident.incidents import Event, Incident
from bot.pacing import Pacing, wait_after
from bot.render.alert_issue import comment, issue_body
from bot.render.replies import render_event
from bot.storage.due_set import sweep
from bot.storage.incident_store import (
    BAND_EVENT,
    Commit,
    IncidentStore,
    IssueLinks,
    Reply,
    ThreadRef,
)
from bot.storage.leases import Lease, Leases

log = logging.getLogger(__name__)

SLOT = "github"  # the app-wide pacing slot and hold every call to GitHub takes
OPENING = "open"  # `IssueLink.trying` while an issue is being opened
UNPROCESSABLE, FORBIDDEN = 422, 403
BUSY_S = 5.0  # another pass holds the incident (a deposed leader's): look again this soon
SEARCH_AGAIN_S = (30.0, 120.0, 300.0, 900.0)  # after no issue was found, per look
THREAD_WAIT_S = 120.0  # the thread's link is the first comment: how long to wait for the root
LEASE_S = 120.0  # an incident's pass, and its claim
SLOT_WAIT_S = 10.0  # a call waits this long at most for the app-wide turn
REFUSED_RETRY_S = 900.0
RETRY_FIRST_S, RETRY_MAX_S = 10.0, 900.0  # the backoff after a failed call

T = TypeVar("T")

# (channel, ts) -> its link: "" when there is none, None while not known; never raises.
Permalink = Callable[[str, str], Awaitable[str | None]]


class Later(Exception):
    """Nothing failed: the issue waits until `at` (for the root, the issue to appear, its turn);
    None: for nothing more."""

    def __init__(self, at: float | None) -> None:
        self.at = at


@dataclass(eq=False)
class AlertIssues:
    store: IncidentStore
    links: IssueLinks
    issues: GithubIssues
    pacing: Pacing
    leases: Leases
    _: KW_ONLY
    config: Settings
    permalink: Permalink
    clock: Callable[[], datetime]

    async def tick(self) -> None:
        now = self.clock().timestamp()
        await sweep(self.store.issue_due, now, self.sync, log, "alert issue: incident")

    async def sync(self, incident_id: str) -> None:
        claim = await self.store.issue_due.claim(incident_id, self.clock().timestamp(), LEASE_S)
        if claim is None:
            return  # not due any more, or claimed by another pass
        loaded = await self.store.load(incident_id)
        if loaded.incident is None:
            await self.store.issue_due.done(claim)
            return
        lease_ms = int(LEASE_S * 1000)
        lease = await self.leases.try_acquire(self.store.keys.issue_pass(incident_id), lease_ms)
        if lease is None:
            await self.store.issue_due.reschedule(claim, self.clock().timestamp() + BUSY_S)
            return
        try:
            fresh = IssueLink(repo=self.config.github_issues_repo)
            link = await self.links.get(incident_id) or fresh
            step = IssuePass(self, loaded.incident, loaded.thread, link, lease)
            again: float | None = None
            try:
                await step.run()
            except Later as later:
                await step.save()
                again = later.at
            except BackendError as exc:
                again = await self._failed(step, exc)
            # Done is not done if a commit marked it again meanwhile: the next pass tells that.
            if again is None:
                await self.store.issue_due.done(claim)
            else:
                await self.store.issue_due.reschedule(claim, again)
        finally:
            await self.leases.release(lease)

    async def _failed(self, step: IssuePass, exc: BackendError) -> float | None:
        """When to go on after a call failed: at once when the linked issue was not there (it
        is followed, or looked for again), else as the failure says."""
        if step.link.linked and exc.status in NOT_THERE:
            try:
                if await step.not_there():
                    return self.clock().timestamp()
            except BackendError as lookup:
                exc = lookup
            except Later as later:
                return later.at or self.clock().timestamp()
        now, link = self.clock().timestamp(), step.link
        if exc.retryable:
            failures = link.failures + 1
            wait = exc.retry_after_s
            if wait is not None:
                self.pacing.hold(SLOT, wait)
            else:
                wait = wait_after(failures, first=RETRY_FIRST_S, maximum=RETRY_MAX_S)
            log.info("alert issue: incident %s: %s; again in %.0f s", step.id, exc, wait)
            await step.save(failures=failures)
            return now + wait
        said = str(exc)
        if exc.status == UNPROCESSABLE and link.trying == OPENING:
            # The same issue would be refused again: left, said once with what fixes it.
            log.error(
                "alert issue: incident %s: GitHub refused the issue queuepilot opens in %s: %s. %s",
                step.id, self.config.github_issues_repo, said, fix_of(said),
            )  # fmt: skip
            await step.save(trying="", refused=said, left=True)
            then = f"{fix_of(said)}. queuepilot opens no issue for this incident"
            await step.tell_refusal(said, then=then)
            return None
        # A refused write was not made; a refused lookup says nothing of the write it sought.
        log.warning("alert issue: incident %s: %s", step.id, said)
        await step.save(trying="" if step.writing else link.trying, refused=said)
        if said != link.refused:
            await step.tell_refusal(said)
        return now + REFUSED_RETRY_S


def fix_of(refusal: str) -> str:
    """What fixes a 422 to the issue queuepilot opens (GitHub validates the whole request)."""
    if "label" in refusal.lower():
        return (
            "The fix: a label of at most 50 characters (GitHub's limit): shorten the alert rule's "
            "team or priority annotation"
        )
    return "The fix: correct the alert rule's title, priority or team annotations"


@dataclass(eq=False)
class IssuePass:
    """One pass over one claimed incident's issue: each call, and the link saved after it."""

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
        """Take the app-wide turn for one call and keep the pass's lease, or stop for `Later`."""
        owner, interval_ms = self.owner, self.owner.config.github_issues_interval_ms
        away_s = await owner.pacing.wait_for_slot(SLOT, interval_ms, within_s=SLOT_WAIT_S)
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
            await self.theirs_now(timeline)
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
        # From when the alert last began firing: its incident's opening, or its latest re-fire.
        fired_at = max([incident.opened_at, *(e.at for e in timeline if e.kind == "reopened")])
        waited_for = fired_at + timedelta(seconds=owner.config.github_issues_open_after_seconds)
        if found:
            issue, ours = found[0], group_mark(incident) in found[0].body
        elif self.link.trying == OPENING or not owner.config.github_issues_open:
            if self.link.trying == OPENING:
                # Opened, its answer lost, not listed yet: opening again would make two.
                await self.save(trying="")
            raise Later(self.search_again())
        elif owner.clock() < waited_for:
            # alerting-infra's issue comes seconds after the notification: its chance first.
            soon = owner.clock() + timedelta(seconds=SEARCH_AGAIN_S[0])
            raise Later(min(soon, waited_for).timestamp())
        else:
            made = issue_title(incident), issue_body(incident), issue_labels(incident)
            issue = await self.write(OPENING, lambda: owner.issues.create(*made))
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
        wait = SEARCH_AGAIN_S[searches] if searches < len(SEARCH_AGAIN_S) else REFUSED_RETRY_S
        return self.owner.clock().timestamp() + wait

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
        now = owner.clock()
        body = comment(incident, moment, thread_url=thread_url, timeline=timeline, now=now)
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
        await self.save(told=(*self.link.told, moment.key), trying="")

    async def thread_url(self) -> str:
        thread, now = self.thread, self.owner.clock()
        if thread is not None:
            link = await self.owner.permalink(thread.channel, thread.ts)
            if link is None:  # Slack does not say now: ask again shortly
                raise Later(now.timestamp() + 30)
            return link
        if (now - self.incident.opened_at).total_seconds() < THREAD_WAIT_S:
            raise Later(now.timestamp() + 10)
        return ""

    async def set_state(self) -> None:
        closed = not self.incident.is_open
        if not self.link.ours or self.link.closed == closed:
            return
        await self.call()
        await self.owner.issues.set_state(self.link.repo, self.link.number, closed=closed)
        await self.save(closed=closed)

    async def theirs_now(self, timeline: list[Event]) -> None:
        """Before telling an issue someone else opened: is it still there, and still open? After a
        re-fire alerting-infra has closed it and opens another: that one is linked instead."""
        moments = pending(self.link, timeline)
        refires = [i for i, m in enumerate(moments) if m.event and m.event.kind == "reopened"]
        await self.call()
        issue = await self.owner.issues.issue(self.link.repo, self.link.number)
        if issue is None or not self.is_linked(issue):
            await self.moved(issue)
            if issue is None:
                return
        # Judged where it is now (a transfer keeps its state).
        if issue.state == "closed" and (refires or self.incident.is_open):
            # What came before the re-fire was the closed issue's to hear; the new one hears the
            # thread's link and what follows.
            before = tuple(m.key for m in moments[: refires[-1] + 1]) if refires else ()
            await self.look_again(f"{self.where} was closed", told=before)
        elif issue.state == "closed":
            # Closed by its owner when the alert resolved: never told anything more.
            await self.save(told=(*self.link.told, *(m.key for m in moments)))

    async def not_there(self) -> bool:
        """The linked issue answered 301, 404 or 410 to a call: followed where it is now, or left
        and looked for again; False when it is where it was (the refusal was of the call)."""
        await self.call()
        found = await self.owner.issues.issue(self.link.repo, self.link.number)
        if found is not None and self.is_linked(found):
            return False
        await self.moved(found)
        return True

    def is_linked(self, issue: Issue) -> bool:
        """Whether `issue` is the linked one where it was (GitHub's names ignore case)."""
        return issue.number == self.link.number and issue.repo.lower() == self.link.repo.lower()

    @property
    def where(self) -> str:
        return f"GitHub issue {self.link.repo}#{self.link.number}"

    async def moved(self, issue: Issue | None) -> None:
        """The linked issue is elsewhere (`issue`, transferred) or nowhere (deleted, gone)."""
        if issue is None:
            await self.look_again(f"{self.where} is gone (deleted, or no longer visible)")
            return
        text = f"{self.where} moved to {issue.repo}#{issue.number}: linked there"
        log.info("alert issue: incident %s: %s", self.id, text)
        await self.save(repo=issue.repo, number=issue.number, url=issue.url, trying="")
        await self.record("issue_linked", text, url=issue.url)

    async def look_again(self, why: str, *, told: tuple[str, ...] = ()) -> None:
        """Leave the linked issue; the alert's is looked for again (the thread's link goes to the
        next one; the moments already told, and `told`, stay told)."""
        log.info("alert issue: incident %s: %s; looking for the alert's issue again", self.id, why)
        link = self.link
        told = tuple(key for key in (*link.told, *told) if key != THREAD_MOMENT)
        repo = self.owner.config.github_issues_repo
        self.link = IssueLink(repo=repo, told=told, passed=(*link.passed, link.number))
        await self.save()
        await self.record("issue_unlinked", f"{why}: looking for the alert's issue")

    async def tell_refusal(self, said: str, *, then: str = "") -> None:
        """In the thread: what GitHub refused, and `then` what follows."""
        then = then or f"queuepilot tries again every {round(REFUSED_RETRY_S / 60)} min"
        text = (
            f"GitHub refused the alert's issue in {self.owner.config.github_issues_repo}: {said}. "
            f"{then}; the incident goes on here."
        )
        await self.record("issue_refused", text, reply=True)

    async def record(self, kind: str, text: str, *, reply: bool = False, url: str = "") -> None:
        """A line on the timeline; with `url`, the root links the issue."""

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
