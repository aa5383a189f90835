"""The alert's GitHub issue, kept in step with its incident (`GITHUB_ISSUES_REPO`).

A change that gives the issue something to hear marks the incident in `issue_due` (the commit
script does, with the change). Each tick, the leader claims a due incident and holds its pass's
lease (one pass at a time per incident) while it brings its issue up to date, one call after
another:

1. link: the open `area:alerting` issue that is the alert's (`is_alert_issue`), else, with
   `GITHUB_ISSUES_OPEN`, one opened in alerting-infra's manner; else look again later (a pipeline
   may open its issue a little after the alert reached us). The root then links it.
2. tell: the thread's link first, then each moment of the timeline not yet told, in order, one
   comment each; the periodic status never.
3. an issue queuepilot opened is closed while the incident is resolved, reopened when it fires
   again (the incident reopens within `REOPEN_WINDOW_SECONDS`).

Once, whoever passes: the link records each moment told after GitHub answered, and names the
call in flight before it is sent (`trying`); a call whose answer was lost is looked for
(`find_comment`, the issue's hidden mark) before it is made again. GitHub's limits: every call
takes the app-wide `github` slot (`bot/pacing.py`: one call a second, as GitHub asks of
writes), a rate limit holds that slot for as long as GitHub says, and a failure is
retried later with the one backoff (`bot/backoff.py`); none of it holds up the incident, whose
thread goes on in Slack. A refusal (a token without the permission, a repository that does not
exist) is said once in the thread, and tried again every `REFUSED_RETRY_S`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

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
from bot.storage.due_set import Claim
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Loaded, Reply
from bot.storage.issue_links import IssueLinks
from bot.storage.leases import Lease, Leases

log = logging.getLogger(__name__)

SLOT = "github"  # the app-wide pacing slot and hold every call to GitHub takes
OPENING = "open"  # `IssueLink.trying` while an issue is being opened
UNPROCESSABLE, FORBIDDEN = 422, 403
# Another pass holds the incident (a 0.25 replica's, or a deposed leader's): look again this soon.
BUSY_S = 5.0
# After no issue was found: look again this long after the first, second… look.
SEARCH_AGAIN_S = (30.0, 120.0, 300.0, 900.0)
# The thread's link is the first comment: wait this long for Slack to show the root.
THREAD_WAIT_S = 120.0
LEASE_S = 120.0  # an incident's pass, and its claim
SLOT_WAIT_S = 10.0  # a call waits this long at most for the app-wide turn
RETRY_FIRST_S, RETRY_MAX_S = 10.0, 900.0  # the backoff after a failed call
REFUSED_RETRY_S = 900.0

T = TypeVar("T")
# (channel, ts) -> a link to that message: "" when there is none, None while it is not known
# (Slack slow or failing); never raises.
Permalink = Callable[[str, str], Awaitable[str | None]]
# The incident's write-up, for a postmortem moment (`bot.actions.postmortem`).
Postmortem = Callable[[Incident, list[Event], datetime], Awaitable[str]]


def never_taken(exc: BackendError) -> bool:
    """A comment GitHub refuses for what it is, not for who asks or when: 422 (its rules: too
    long, …), or 403 on a locked issue (GitHub's answer: "Unable to create comment because issue
    is locked"). A 403 for a missing permission is not one: fixed, the comment goes through."""
    locked = exc.status == FORBIDDEN and "locked" in str(exc).lower()
    return exc.status == UNPROCESSABLE or locked


class Later(Exception):
    """Nothing failed: the incident's issue waits until `at` for something (the root, the
    pipeline's issue, the app-wide turn); None: for nothing more (no issue to link, and the
    incident is over)."""

    def __init__(self, at: float | None) -> None:
        self.at = at


class AlertIssues:
    def __init__(
        self,
        store: IncidentStore,
        links: IssueLinks,
        issues: Issues,
        pacing: Pacing,
        leases: Leases,
        *,
        config: Settings,
        permalink: Permalink,
        postmortem: Postmortem | None = None,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._due = store.issue_due
        self._keys = store.keys
        self._leases = leases
        self._links = links
        self._issues = issues
        self._pacing = pacing
        self._config = config
        self._permalink = permalink
        self._postmortem = postmortem
        self._clock = clock

    async def tick(self) -> None:
        """Bring every due incident's issue up to date; never raises."""
        try:
            due = await self._due.pending(self._clock().timestamp())
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
        claim = await self._due.claim(incident_id, self._clock().timestamp(), LEASE_S)
        if claim is None:
            return  # not due any more (or a 0.25 replica holds it, during a rollout)
        loaded = await self._store.load(incident_id)
        if loaded.incident is None:
            await self._due.done(claim)
            return
        # One pass at a time per incident: a commit of a new moment makes the incident due
        # again while a pass runs. The leader's tick passes one incident at a time; the lease
        # stays for replicas of 0.25 during a rollout, which would tell the issue beside it.
        lease_ms = int(LEASE_S * 1000)
        lease = await self._leases.try_acquire(self._keys.issue_pass(incident_id), lease_ms)
        if lease is None:
            await self._due.reschedule(claim, self._clock().timestamp() + BUSY_S)
            return
        try:
            link = await self._links.get(incident_id) or IssueLink(
                repo=self._config.github_issues_repo
            )
            await self._pass(_Step(self, loaded, link, claim, lease))
        finally:
            await self._leases.release(lease)

    async def _pass(self, step: _Step) -> None:
        try:
            await step.run()
        except Later as later:
            await step.save(step.link)
            if later.at is None:
                await self._due.done(step.claim)
            else:
                await self._due.reschedule(step.claim, later.at)
        except BackendError as exc:
            await self._failed(step, exc)
        else:
            # Not done if a commit marked it again meanwhile: the next pass tells that too.
            await self._due.done(step.claim)

    async def _failed(self, step: _Step, exc: BackendError) -> None:
        now = self._clock().timestamp()
        link = step.link
        if exc.retryable:
            failures = link.failures + 1
            wait = exc.retry_after_s
            if wait is not None:
                self._pacing.hold(SLOT, wait)
            else:
                wait = wait_after(failures, first=RETRY_FIRST_S, maximum=RETRY_MAX_S)
            log.info("alert issue: incident %s: %s; again in %.0f s", step.id, exc, wait)
            await step.save(link.model_copy(update={"failures": failures}))
            await self._due.reschedule(step.claim, now + wait)
            return
        # Refused. A refused write was not made: nothing is in flight; a refused lookup says
        # nothing of the write it looked for, still to be looked for.
        said = str(exc)
        log.warning("alert issue: incident %s: %s", step.id, said)
        trying = "" if step.writing else link.trying
        await step.save(link.model_copy(update={"trying": trying, "refused": said}))
        if said != link.refused:
            await self._tell_refusal(step.id, said)
        await self._due.reschedule(step.claim, now + REFUSED_RETRY_S)

    async def _tell_refusal(self, incident_id: str, said: str, *, again: bool = True) -> None:
        minutes = round(REFUSED_RETRY_S / 60)
        then = f"queuepilot tries again every {minutes} min" if again else "it is left out"
        text = (
            f"GitHub refused the alert's issue in {self._config.github_issues_repo}: {said}. "
            f"{then}; the incident goes on here."
        )
        await self.record(incident_id, "issue_refused", text, reply=True)

    async def record(
        self, incident_id: str, kind: str, text: str, *, reply: bool = False, url: str = ""
    ) -> None:
        """A line on the incident's timeline (none when `text` is empty), and in its thread
        (`reply`); with `url`, the root links the issue. Fenced by the incident's version like
        every change."""

        def recorded(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            event = Event(at=now, kind=kind, text=text)
            updated = incident
            if url:
                links = incident.links.model_copy(update={"issue": url})
                updated = incident.model_copy(update={"links": links})
            replies = (Reply("event", BAND_EVENT, render_event(updated, event)),) if reply else ()
            events = (event,) if text else ()
            return Commit(updated, events=events, replies=replies, root=bool(url)), None

        if not (await self._store.commit_fresh(incident_id, recorded, clock=self._clock)).committed:
            log.warning("alert issue: incident %s: not recorded: %s", incident_id, text)


class _Step:
    """One pass over one claimed incident: each call, and the link saved after it."""

    def __init__(
        self, owner: AlertIssues, loaded: Loaded, link: IssueLink, claim: Claim, lease: Lease
    ) -> None:
        assert loaded.incident is not None
        self.owner = owner
        self.loaded = loaded
        self.incident: Incident = loaded.incident
        self.id = self.incident.id
        self.link = link
        self.claim = claim
        self.lease = lease
        self.writing = False  # a write is in flight: what GitHub answers is about it

    async def save(self, link: IssueLink) -> None:
        self.link = link
        await self.owner._links.save(self.id, link)

    async def call(self) -> None:
        """Take the app-wide turn for one call to GitHub, or wait for it later; and keep the
        pass's lease, or stop (another pass may have begun: a 0.25 replica's, or the next
        leader's once this one stalled past the lease)."""
        owner = self.owner
        turn = await owner._pacing.wait_for_slot(
            SLOT, owner._config.github_issues_interval_ms, within_s=SLOT_WAIT_S
        )
        now = owner._clock().timestamp()
        if not turn.taken:
            raise Later(now + turn.retry_after_s)
        if not await owner._leases.renew(self.lease, int(LEASE_S * 1000)):
            raise Later(now + BUSY_S)

    async def write(self, trying: str, send: Callable[[], Awaitable[T]]) -> T:
        """A call that makes something (an issue, a comment): its turn first, then what it is
        named in the link (a lost answer is looked for by it), then the call."""
        await self.call()
        await self.save(self.link.model_copy(update={"trying": trying}))
        self.writing = True
        answer = await send()
        self.writing = False
        return answer

    async def run(self) -> None:
        if not self.link.linked:
            await self.link_issue()
        elif self.incident.links.issue != self.link.url:
            # The link was saved but the incident does not show it: the record that follows the
            # save was not made (the pass stopped between the two, or its commit gave up).
            await self.owner.record(self.id, "issue_linked", "", url=self.link.url)
        timeline = await self.owner._store.events(self.id)
        for moment in pending(self.link, timeline):
            await self.tell(moment, timeline)
        await self.set_state()
        if self.link.failures or self.link.refused:
            # Through to the end: a refusal met again later is said again.
            await self.save(self.link.model_copy(update={"failures": 0, "refused": ""}))

    async def link_issue(self) -> None:
        owner, incident = self.owner, self.incident
        await self.call()
        found = [
            issue
            for issue in await owner._issues.open_issues(AREA_LABEL)
            if is_alert_issue(incident, issue.title, issue.body, issue.labels)
        ]
        # One queuepilot opened carries the group's mark: that one before a title's match.
        found.sort(key=lambda issue: group_mark(incident) not in issue.body)
        if found:
            issue, ours = found[0], group_mark(incident) in found[0].body
        elif self.link.trying == OPENING or not owner._config.github_issues_open:
            if self.link.trying == OPENING:
                # Opened, its answer lost, and not listed yet: open it again would make two.
                await self.save(self.link.model_copy(update={"trying": ""}))
            raise Later(self.search_again())
        else:
            issue = await self.write(
                OPENING,
                lambda: owner._issues.create(
                    issue_title(incident), issue_body(incident), issue_labels(incident)
                ),
            )
            ours = True
        await self.save(
            self.link.model_copy(
                update={"number": issue.number, "url": issue.url, "ours": ours, "trying": ""}
            )
        )
        how = "opened by queuepilot" if ours and owner._config.github_issues_open else "found open"
        text = f"Linked to GitHub issue {owner._config.github_issues_repo}#{issue.number} ({how})"
        await owner.record(self.id, "issue_linked", text, url=issue.url)

    def search_again(self) -> float | None:
        """When to look for the alert's issue again (the looks so far are counted); None once
        the incident is over: a later moment looks again."""
        waits = SEARCH_AGAIN_S
        searches = self.link.searches
        self.link = self.link.model_copy(update={"searches": searches + 1})
        if not self.incident.is_open:
            return None
        now = self.owner._clock().timestamp()
        if searches < len(waits):
            return now + waits[searches]
        return now + REFUSED_RETRY_S

    async def tell(self, moment: Moment, timeline: list[Event]) -> None:
        owner, incident = self.owner, self.incident
        number = self.link.number
        if self.link.trying == moment.key:
            await self.call()
            if await owner._issues.find_comment(number, comment_mark(incident, moment.key)):
                await self.told(moment)
                return
        thread_url = await self.thread_url() if moment.key == THREAD_MOMENT else ""
        if moment.event is not None and moment.event.kind == "reopened":
            await self.set_state()  # open again before saying it fired again
        postmortem = ""
        if moment.event is not None and moment.event.kind == "postmortem" and owner._postmortem:
            upto = [e for e in timeline if e.at <= moment.event.at]
            postmortem = await owner._postmortem(incident, upto, moment.event.at)
        body = comment(
            incident,
            moment,
            thread_url=thread_url,
            timeline=timeline,
            postmortem=postmortem,
            now=owner._clock(),
        )
        try:
            await self.write(moment.key, lambda: owner._issues.comment(number, body))
        except BackendError as exc:
            if not never_taken(exc):
                raise
            # A comment GitHub will never take (the issue locked, a rule of its own): said
            # once, and the moments after it, and the close, go on.
            self.writing = False
            if str(exc) != self.link.refused:
                await owner._tell_refusal(self.id, str(exc), again=False)
                await self.save(self.link.model_copy(update={"refused": str(exc)}))
        await self.told(moment)

    async def told(self, moment: Moment) -> None:
        told = (*self.link.told, moment.key)
        await self.save(self.link.model_copy(update={"told": told, "trying": ""}))

    async def thread_url(self) -> str:
        """The thread's permalink; wait for the root a while, then tell without it."""
        thread = self.loaded.thread
        now = self.owner._clock()
        if thread is not None:
            link = await self.owner._permalink(thread.channel, thread.ts)
            if link is None:  # Slack does not say now: ask again shortly
                raise Later(now.timestamp() + 30)
            return link
        waited = (now - self.incident.opened_at).total_seconds()
        if waited < THREAD_WAIT_S:
            raise Later(now.timestamp() + 10)
        return ""

    async def set_state(self) -> None:
        """An issue queuepilot opened: closed while the incident is resolved, else open."""
        closed = not self.incident.is_open
        if not self.link.ours or self.link.closed == closed:
            return
        await self.call()
        await self.owner._issues.set_state(self.link.number, closed=closed)
        await self.save(self.link.model_copy(update={"closed": closed}))
