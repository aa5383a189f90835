"""The alert's GitHub issue, kept in step with its incident (`GITHUB_ISSUES_REPO`).

A commit that gives the issue something to hear marks the incident in `issue_due`. Each tick the
leader claims a due incident, holds its pass's lease (a 0.25 replica honours both), and runs one
pass over it (`bot.status.issue_pass`): links the alert's open `area:alerting` issue (with
`GITHUB_ISSUES_OPEN`, opens one once `GITHUB_ISSUES_OPEN_AFTER_SECONDS` have passed since the alert
fired without one from pytorch/alerting-infra), tells it what it has not heard, closes or reopens
an issue queuepilot opened. An issue someone else opened, or one that moved or is gone, is
followed as `bot.status.issue_whereabouts` says.

Every call takes the app-wide `github` slot; a failure is retried with the one backoff; a refusal
is said once in the thread and tried again every `REFUSED_RETRY_S`, except GitHub's 422 to the
issue queuepilot opens, which the same request would meet again: it is said and logged once, with
its fix, and that incident's issue is left.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot.backends.errors import BackendError
from bot.backends.issues import NOT_THERE, Issues
from bot.config import Settings
from bot.domain.alert_issue import IssueLink
from bot.pacing import Pacing, wait_after
from bot.status.issue_pass import (
    BUSY_S,
    LEASE_S,
    OPENING,
    REFUSED_RETRY_S,
    SLOT,
    UNPROCESSABLE,
    IssuePass,
    Later,
)
from bot.status.issue_whereabouts import not_there
from bot.storage.incident_store import IncidentStore, IssueLinks
from bot.storage.leases import Leases

log = logging.getLogger(__name__)

RETRY_FIRST_S, RETRY_MAX_S = 10.0, 900.0  # the backoff after a failed call

# (channel, ts) -> its link: "" when there is none, None while not known; never raises.
Permalink = Callable[[str, str], Awaitable[str | None]]


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
            step = IssuePass(self, loaded.incident, loaded.thread, link, lease)
            again: float | None = None
            try:
                await step.run()
            except Later as later:
                await step.save()
                again = later.at
            except BackendError as exc:
                again = await self._after(step, exc)
            # Done is not done if a commit marked it again meanwhile: the next pass tells that.
            if again is None:
                await self.store.issue_due.done(claim)
            else:
                await self.store.issue_due.reschedule(claim, again)
        finally:
            await self.leases.release(lease)

    async def _after(self, step: IssuePass, exc: BackendError) -> float | None:
        """When to go on after a call failed: at once when the linked issue was not there (it
        is followed, or looked for again), else as the failure says."""
        if step.link.linked and exc.status in NOT_THERE:
            try:
                if await not_there(step):
                    return self.clock().timestamp()
            except BackendError as lookup:
                exc = lookup
            except Later as later:
                return later.at or self.clock().timestamp()
        return await self._failed(step, exc)

    async def _failed(self, step: IssuePass, exc: BackendError) -> float | None:
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
        trying = "" if step.writing else link.trying
        await step.save(trying=trying, refused=said)
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
