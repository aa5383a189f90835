"""The alert's GitHub issue, kept in step with its incident (`GITHUB_ISSUES_REPO`).

A commit that gives the issue something to hear marks the incident in `issue_due`. Each tick the
leader claims a due incident, holds its pass's lease (a 0.25 replica honours both), and: links the
alert's open `area:alerting` issue (with `GITHUB_ISSUES_OPEN`, opens one); tells the thread's link,
then each moment of the timeline not yet told, one comment each; closes an issue it opened while
the incident is resolved, reopens it when it fires again. Each write is named in the link before
it is sent (`trying`), so a call whose answer was lost is looked for before it is made again.
Every call takes the app-wide `github` slot; a failure is retried with the one backoff; a refusal
is said once in the thread and tried again every `REFUSED_RETRY_S`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any, TypeVar

from redis.exceptions import RedisError

from bot.backends.errors import BackendError
from bot.backends.issues import Issues
from bot.backoff import wait_after
from bot.config import Settings
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
from bot.pacing import Pacing
from bot.render.alert_issue import comment, issue_body
from bot.render.replies import render_event
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
BUSY_S = 5.0  # another pass holds the incident (a 0.25 replica's): look again this soon
SEARCH_AGAIN_S = (30.0, 120.0, 300.0, 900.0)  # after no issue was found, per look
THREAD_WAIT_S = 120.0  # the thread's link is the first comment: how long to wait for the root
LEASE_S = 120.0  # an incident's pass, and its claim
SLOT_WAIT_S = 10.0  # a call waits this long at most for the app-wide turn
RETRY_FIRST_S, RETRY_MAX_S = 10.0, 900.0  # the backoff after a failed call
REFUSED_RETRY_S = 900.0

T = TypeVar("T")
# (channel, ts) -> its link: "" when there is none, None while not known; never raises.
Permalink = Callable[[str, str], Awaitable[str | None]]
# The incident's write-up, for a postmortem moment (`ActionCore.postmortem_markdown`).
Postmortem = Callable[[Incident, list[Event], datetime], Awaitable[str]]


class Later(Exception):
    """Nothing failed: the issue waits until `at` (for the root, the issue to appear, its turn);
    None: for nothing more."""

    def __init__(self, at: float | None) -> None:
        self.at = at


@dataclass(eq=False)
class AlertIssues:
    store: IncidentStore
    links: IssueLinks
    issues: Issues
    pacing: Pacing
    leases: Leases
    _: KW_ONLY
    config: Settings
    permalink: Permalink
    clock: Callable[[], datetime]
    postmortem: Postmortem | None = None

    async def tick(self) -> None:
        try:
            due = await self.store.issue_due.pending(self.clock().timestamp())
        except RedisError as exc:
            log.warning("alert issue: Redis unavailable: %s", exc)
            return
        for incident_id in due:
            try:
                await self.sync(incident_id)
            except RedisError as exc:
                log.warning("alert issue: incident %s: Redis: %s; retrying", incident_id, exc)
            except Exception:
                log.exception("alert issue: incident %s failed", incident_id)

    async def sync(self, incident_id: str) -> None:
        claim = await self.store.issue_due.claim(incident_id, self.clock().timestamp(), LEASE_S)
        if claim is None:
            return  # not due any more (or a 0.25 replica holds it, during a rollout)
        loaded = await self.store.load(incident_id)
        if loaded.incident is None:
            await self.store.issue_due.done(claim)
            return
        # One pass at a time per incident: the lease keeps a 0.25 replica from telling beside it.
        lease_ms = int(LEASE_S * 1000)
        lease = await self.leases.try_acquire(self.store.keys.issue_pass(incident_id), lease_ms)
        if lease is None:
            await self.store.issue_due.reschedule(claim, self.clock().timestamp() + BUSY_S)
            return
        try:
            link = await self.links.get(incident_id) or IssueLink(
                repo=self.config.github_issues_repo
            )
            step = _Step(self, loaded.incident, loaded.thread, link, lease)
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

    async def _failed(self, step: _Step, exc: BackendError) -> float:
        now = self.clock().timestamp()
        link = step.link
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
        # A refused write was not made; a refused lookup says nothing of the write it sought.
        said = str(exc)
        log.warning("alert issue: incident %s: %s", step.id, said)
        trying = "" if step.writing else link.trying
        await step.save(trying=trying, refused=said)
        if said != link.refused:
            await self._tell_refusal(step.id, said)
        return now + REFUSED_RETRY_S

    async def _tell_refusal(self, incident_id: str, said: str, *, again: bool = True) -> None:
        minutes = round(REFUSED_RETRY_S / 60)
        then = f"queuepilot tries again every {minutes} min" if again else "it is left out"
        text = (
            f"GitHub refused the alert's issue in {self.config.github_issues_repo}: {said}. "
            f"{then}; the incident goes on here."
        )
        await self.record(incident_id, "issue_refused", text, reply=True)

    async def record(
        self, incident_id: str, kind: str, text: str, *, reply: bool = False, url: str = ""
    ) -> None:
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

        if not (await self.store.commit_fresh(incident_id, recorded, clock=self.clock)).committed:
            log.warning("alert issue: incident %s: not recorded: %s", incident_id, text)


@dataclass(eq=False)
class _Step:
    """One pass over one claimed incident: each call, and the link saved after it."""

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
        if not self.link.linked:
            await self.link_issue()
        elif self.incident.links.issue != self.link.url:
            # Saved, but the record that follows the save was not made.
            await self.owner.record(self.id, "issue_linked", "", url=self.link.url)
        timeline = await self.owner.store.events(self.id)
        for moment in pending(self.link, timeline):
            await self.tell(moment, timeline)
        await self.set_state()
        if self.link.failures or self.link.refused:
            await self.save(failures=0, refused="")

    async def link_issue(self) -> None:
        owner, incident = self.owner, self.incident
        await self.call()
        found = [
            issue
            for issue in await owner.issues.open_issues(AREA_LABEL)
            if is_alert_issue(incident, issue.title, issue.body, issue.labels)
        ]
        # One queuepilot opened (with the group's mark) before a title's match.
        found.sort(key=lambda issue: group_mark(incident) not in issue.body)
        if found:
            issue, ours = found[0], group_mark(incident) in found[0].body
        elif self.link.trying == OPENING or not owner.config.github_issues_open:
            if self.link.trying == OPENING:
                # Opened, its answer lost, not listed yet: opening again would make two.
                await self.save(trying="")
            raise Later(self.search_again())
        else:
            issue = await self.write(
                OPENING,
                lambda: owner.issues.create(
                    issue_title(incident), issue_body(incident), issue_labels(incident)
                ),
            )
            ours = True
        await self.save(number=issue.number, url=issue.url, ours=ours, trying="")
        how = "opened by queuepilot" if ours and owner.config.github_issues_open else "found open"
        text = f"Linked to GitHub issue {owner.config.github_issues_repo}#{issue.number} ({how})"
        await owner.record(self.id, "issue_linked", text, url=issue.url)

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
            if await owner.issues.find_comment(number, comment_mark(incident, moment.key)):
                await self.told(moment)
                return
        thread_url = await self.thread_url() if moment.key == THREAD_MOMENT else ""
        if moment.event is not None and moment.event.kind == "reopened":
            await self.set_state()  # open again before saying it fired again
        postmortem = ""
        if moment.event is not None and moment.event.kind == "postmortem" and owner.postmortem:
            upto = [e for e in timeline if e.at <= moment.event.at]
            postmortem = await owner.postmortem(incident, upto, moment.event.at)
        body = comment(
            incident,
            moment,
            thread_url=thread_url,
            timeline=timeline,
            postmortem=postmortem,
            now=owner.clock(),
        )
        try:
            await self.write(moment.key, lambda: owner.issues.comment(number, body))
        except BackendError as exc:
            # 422 (too long, …) or 403 on a locked issue is never taken; a 403 for a missing
            # permission is, once fixed.
            locked = exc.status == FORBIDDEN and "locked" in str(exc).lower()
            if exc.status != UNPROCESSABLE and not locked:
                raise
            # Never taken: said once, and the moments after it go on.
            self.writing = False
            if str(exc) != self.link.refused:
                await owner._tell_refusal(self.id, str(exc), again=False)
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
        await self.owner.issues.set_state(self.link.number, closed=closed)
        await self.save(closed=closed)
