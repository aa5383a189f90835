"""Where the alert's issue lives: GitHub's REST API. Nothing here retries: a write whose answer was
lost may have been made, and `find_comment` is how the caller looks before writing again."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from bot.backends.github_api import GithubApi
from bot.backends.http import BackendError

# Open issues looked through for the alert's: GitHub's largest page, newest first.
PAGE = 100
MAX_PAGES = 3
# An issue not where it was: transferred (301 to a write; a read follows it), deleted, or hidden.
NOT_THERE = frozenset({301, 404, 410})


@dataclass(frozen=True)
class Issue:
    number: int
    url: str  # for people (html_url)
    title: str
    body: str
    labels: tuple[str, ...]
    state: str
    repo: str = ""  # owner/name, where it is now


class GithubIssues:
    def __init__(self, api: GithubApi, repo: str) -> None:
        self.api = api
        self.repo = repo
        self._path = f"/repos/{repo}/issues"

    async def open_issues(self, label: str) -> list[Issue]:
        """Open issues carrying `label`, newest first (a few pages at most)."""
        url = f"{self._path}?state=open&labels={quote(label)}&sort=created&direction=desc"
        listing = await self.api.pages(f"{url}&per_page={PAGE}", None, max_pages=MAX_PAGES)
        return [issue_of(item) for item in listing.items if _is_issue(item)]

    async def create(self, title: str, body: str, labels: tuple[str, ...]) -> Issue:
        issue = {"title": title, "body": body, "labels": list(labels)}
        return issue_of(await self.api.send("POST", self._path, issue, expect=(201,)))

    async def issue(self, repo: str, number: int) -> Issue | None:
        """The issue where it is now (followed when transferred); None when deleted or gone."""
        try:
            body, _ = await self.api.get(f"/repos/{repo}/issues/{number}")
        except BackendError as exc:
            if exc.status in NOT_THERE:
                return None
            raise
        found = issue_of(body)
        return found if found.repo else replace(found, repo=repo)

    async def comment(self, repo: str, number: int, body: str) -> None:
        url = f"/repos/{repo}/issues/{number}/comments"
        await self.api.send("POST", url, {"body": body}, expect=(201,))

    async def find_comment(self, repo: str, number: int, mark: str) -> bool:
        """Whether a comment on the issue carries `mark` (every page: oldest come first)."""
        url = f"/repos/{repo}/issues/{number}/comments?per_page={PAGE}"
        listing = await self.api.pages(url, None, max_pages=10)
        return any(isinstance(c, dict) and mark in str(c.get("body") or "") for c in listing.items)

    async def set_state(self, repo: str, number: int, *, closed: bool) -> None:
        change = {"state": "closed", "state_reason": "completed"} if closed else {"state": "open"}
        await self.api.send("PATCH", f"/repos/{repo}/issues/{number}", change)


def issue_of(item: Any) -> Issue:
    if not _is_issue(item):
        raise BackendError("GitHub answered with an unexpected shape", retryable=True)
    labels = tuple(
        str(label.get("name")) if isinstance(label, dict) else str(label)
        for label in item.get("labels") or ()
    )
    text = {key: str(item.get(key) or "") for key in ("html_url", "title", "body", "state")}
    return Issue(
        int(item["number"]), text["html_url"], text["title"], text["body"], labels, text["state"],
        _repo_of(item.get("repository_url")),
    )  # fmt: skip


def _repo_of(api_url: object) -> str:
    """owner/name from the API's `repository_url`."""
    _, found, tail = str(api_url or "").partition("/repos/")
    return tail.strip("/") if found and tail.strip("/").count("/") == 1 else ""


def _is_issue(item: Any) -> bool:
    """Not a pull request (GitHub lists those among issues)."""
    number = item.get("number") if isinstance(item, dict) else None
    return isinstance(number, int) and not isinstance(number, bool) and "pull_request" not in item
