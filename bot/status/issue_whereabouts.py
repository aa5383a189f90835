"""Where the linked issue is now, and whose it is: an issue someone else opened (alerting-infra's)
is theirs, never closed or reopened, and never told anything once closed. alerting-infra closes
its issue when the alert resolves and opens a new one when it fires again, so after a re-fire the
incident links the issue open now. A linked issue that was transferred is followed to where it
is; one deleted or gone is left, and the alert's issue looked for again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.backends.issues import Issue
from bot.domain.alert_issue import THREAD_MOMENT, IssueLink, pending
from bot.domain.incidents import Event

if TYPE_CHECKING:
    from bot.status.issue_pass import IssuePass

log = logging.getLogger(__name__)


def is_linked(issue: Issue, link: IssueLink) -> bool:
    """Whether `issue` is the linked one where it was (GitHub's names ignore case)."""
    return issue.number == link.number and issue.repo.lower() == link.repo.lower()


def where(link: IssueLink) -> str:
    return f"GitHub issue {link.repo}#{link.number}"


async def theirs_now(step: IssuePass, timeline: list[Event]) -> None:
    """Before telling an issue someone else opened: is it still there, and still open? After a
    re-fire alerting-infra has closed it and opens another: that one is linked instead."""
    moments = pending(step.link, timeline)
    refires = [i for i, m in enumerate(moments) if m.event and m.event.kind == "reopened"]
    await step.call()
    issue = await step.owner.issues.issue(step.link.repo, step.link.number)
    if issue is None or not is_linked(issue, step.link):
        await moved(step, issue)
        if issue is None:
            return
    # Judged where it is now (a transfer keeps its state).
    if issue.state == "closed" and (refires or step.incident.is_open):
        # What came before the re-fire was the closed issue's to hear; the new one hears the
        # thread's link and what follows.
        before = tuple(m.key for m in moments[: refires[-1] + 1]) if refires else ()
        await look_again(step, f"{where(step.link)} was closed", told=before)
    elif issue.state == "closed":
        # Closed by its owner when the alert resolved: never told anything more.
        await step.save(told=(*step.link.told, *(m.key for m in moments)))


async def not_there(step: IssuePass) -> bool:
    """The linked issue answered 301, 404 or 410 to a call: followed where it is now, or left
    and looked for again; False when it is where it was (the refusal was of the call)."""
    await step.call()
    found = await step.owner.issues.issue(step.link.repo, step.link.number)
    if found is not None and is_linked(found, step.link):
        return False
    await moved(step, found)
    return True


async def moved(step: IssuePass, issue: Issue | None) -> None:
    """The linked issue is elsewhere (`issue`, transferred) or nowhere (deleted, gone)."""
    if issue is None:
        await look_again(step, f"{where(step.link)} is gone (deleted, or no longer visible)")
        return
    text = f"{where(step.link)} moved to {issue.repo}#{issue.number}: linked there"
    log.info("alert issue: incident %s: %s", step.id, text)
    await step.save(repo=issue.repo, number=issue.number, url=issue.url, trying="")
    await step.record("issue_linked", text, url=issue.url)


async def look_again(step: IssuePass, why: str, *, told: tuple[str, ...] = ()) -> None:
    """Leave the linked issue; the alert's is looked for again (the thread's link goes to the
    next one; the moments already told, and `told`, stay told)."""
    log.info("alert issue: incident %s: %s; looking for the alert's issue again", step.id, why)
    link = step.link
    told = tuple(key for key in (*link.told, *told) if key != THREAD_MOMENT)
    passed = (*link.passed, link.number)
    step.link = IssueLink(repo=step.owner.config.github_issues_repo, told=told, passed=passed)
    await step.save()
    await step.record("issue_unlinked", f"{why}: looking for the alert's issue")
