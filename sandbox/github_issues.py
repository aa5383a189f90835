"""GitHub's REST API for issues and issue comments (version 2022-11-28), as strict as GitHub: the
bot links each incident to "the alert's GitHub issue" (opened by pytorch/alerting-infra, or its
own), comments on it, closes and reopens it. Tests and the `make demo` sandbox serve this.

Its rules and refusals come from GitHub's published docs, not from what a client sends:
- "REST API endpoints for issues" and "... for issue comments" (docs.github.com/rest/issues),
  with the schemas, enums and status codes of GitHub's OpenAPI description
  (github/rest-api-description, api.github.com.2022-11-28.json): `title` a string or integer,
  `state_reason` completed|not_planned|duplicate|reopened|null and "ignored unless `state` is
  changed", 201 with a `Location`, 410 where issues are disabled; "Get a repository".
- "Troubleshooting the REST API": 400 "Problems parsing JSON" / "Body should be a JSON object",
  422 "Validation Failed" (`errors[].code` missing_field, invalid, custom...) or "Invalid
  request" for a wrong type, `X-Accepted-GitHub-Permissions`, 400 for an unknown API version,
  "User agent required" (403, text/html, worded as "Resources in the REST API" shows).
- "Getting started with the REST API" (`Authorization: Bearer` or `token`), "Resources in the
  REST API" (401 "Bad credentials"; conditional requests, whose 304 costs no quota), "API
  Versions" (2022-11-28 and 2026-03-10), "Using pagination in the REST API" (`link` rel
  prev/next/last/first; GitHub's pages point at /repositories/{id}/..., to follow as given).
- GitHub Apps (`sandbox.github_apps`): `GET /repos/{owner}/{repo}/installation` and
  `GET /orgs/{org}/installation` and `POST /app/installations/{id}/access_tokens`, as the App
  (a JWT checked as GitHub checks it); the installation token it mints reads and writes as the
  installation's permissions allow, on its repositories only, for an hour ("REST API endpoints
  for GitHub Apps"; 403 "Resource not accessible by integration" past its permissions).
- "Rate limits for the REST API": the primary quota (5,000/h) in `x-ratelimit-*`, 403 or 429 with
  `x-ratelimit-remaining: 0` until reset; secondary limits (80 content-generating requests a
  minute, 500 an hour) refused with a message and maybe `retry-after`.
- "Get an issue": an issue transferred to a repository the caller can read answers 301 Moved
  Permanently (its new address in `Location`, at /repositories/{id}/...), one deleted answers 410
  Gone, either where the caller cannot read answers 404; "Update an issue" lists the same.
  A transferred issue's comments answer 404 here (their endpoints document no 301).
Wordings the docs leave out are GitHub's answers as its users quoted them (title or body too long,
a label name past 50 characters: 422 with `{"resource": "Label", "field": "name", "code":
"invalid"}` when an issue names it, as github/docs#32156 shows; a locked issue, issues disabled, an
unsupported version). Not modelled: pull requests (numbers
count issues only), milestones (any is invalid), anonymous callers (every API call needs a token).
Test switches refuse the next calls as a secondary limit, fail them (502/503), hang them until
released, or apply a write and lose its answer, for a client's "did my comment land?" lookup.
The clock is injectable, so no test waits for a limit.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import json
import math
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from markdown_it import MarkdownIt
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from sandbox.github_apps import GithubApps, Installation, JwtRefused
from sandbox.github_quota import GithubQuota

TOKEN = "ghs_queuepilot-test"
# An issue page's Markdown as github.com renders it: CommonMark with GitHub's tables and
# strikethrough; raw HTML shown as text (GitHub strips most), its comments hidden as GitHub does.
MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
PAGE_STYLE = "table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:4px 12px}"
DOCS = "https://docs.github.com/rest"
ISSUES, COMMENTS = f"{DOCS}/issues/issues", f"{DOCS}/issues/comments"
LIMITS = f"{DOCS}/overview/rate-limits-for-the-rest-api"
APPS = f"{DOCS}/apps/apps"
VERSIONS = ("2022-11-28", "2026-03-10")  # github/docs data/tables/rest-api-versions.yml
TITLE_MAX, BODY_MAX, LABEL_MAX = 256, 65536, 50
REASONS = ("completed", "not_planned", "duplicate", "reopened", None)
# The labels GitHub gives every new repository (`default: true`): name -> (color, description).
DEFAULT_LABELS = {
    "bug": ("d73a4a", "Something isn't working"), "duplicate": ("cfd3d7", "This issue or pull "
    "request already exists"), "documentation": ("0075ca", "Improvements or additions to "
    "documentation"), "enhancement": ("a2eeef", "New feature or request"), "good first issue":
    ("7057ff", "Good for newcomers"), "help wanted": ("008672", "Extra attention is needed"),
    "invalid": ("e4e669", "This doesn't seem right"), "question": ("d876e3", "Further "
    "information is requested"), "wontfix": ("ffffff", "This will not be worked on"),
}  # fmt: skip
BOT = {"login": "queuepilot[bot]", "id": 190000001, "node_id": "BOT_kgDOC1ZjAQ", "type": "Bot"}
NO_USER_AGENT = (
    "Request forbidden by administrative rules. Please make sure your request has a User-Agent "
    "header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-"
    "required). Check https://developer.github.com for other possible causes.\n"
)
SUPPORT = " If you reach out to GitHub Support for help, please include the request ID {}."
LIMIT_MESSAGES = {  # (message, docs anchor); `content`: the wording shown for content creation
    "primary": ("API rate limit exceeded for user ID {}.", ""),
    "secondary": ("You have exceeded a secondary rate limit. Please wait a few minutes before "
                  "you try again.", "#about-secondary-rate-limits"),
    "content": ("You have exceeded a secondary rate limit and have been temporarily blocked from "
                "content creation. Please retry your request again later.",
                "#about-secondary-rate-limits"),
}  # fmt: skip
ALL_METHODS = ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"]
_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_ANY = rf"({_REPO}|/repositories/(?P<repo_id>\d+))"
# path -> method -> (handler, the endpoint's docs, the fine-grained permissions it takes)
ROUTES: list[tuple[re.Pattern[str], dict[str, tuple[str, str, str]]]] = [
    (re.compile(p), m)
    for p, m in [
        ("/rate_limit", {"GET": ("rate", f"{DOCS}/rate-limit/rate-limit", "")}),
        (_REPO, {"GET": ("get_repo", f"{DOCS}/repos/repos#get-a-repository", "metadata=read")}),
        (f"{_ANY}/issues", {
            "GET": ("list_issues", f"{ISSUES}#list-repository-issues", "issues=read"),
            "POST": ("create_issue", f"{ISSUES}#create-an-issue", "issues=write")}),
        (f"{_ANY}/issues/(?P<number>\\d+)", {
            "GET": ("get_issue", f"{ISSUES}#get-an-issue", "issues=read"),
            "PATCH": ("update_issue", f"{ISSUES}#update-an-issue", "issues=write")}),
        (f"{_ANY}/issues/(?P<number>\\d+)/comments", {
            "GET": ("list_comments", f"{COMMENTS}#list-issue-comments",
                    "issues=read; pull_requests=read"),
            "POST": ("create_comment", f"{COMMENTS}#create-an-issue-comment",
                     "issues=write; pull_requests=write")}),
        (f"{_REPO}/installation", {"GET": ("repo_installation",
            f"{APPS}#get-a-repository-installation-for-the-authenticated-app", "")}),
        ("/orgs/(?P<org>[^/]+)/installation", {"GET": ("org_installation",
            f"{APPS}#get-an-organization-installation-for-the-authenticated-app", "")}),
        ("/app/installations/(?P<installation_id>\\d+)/access_tokens", {"POST": ("create_token",
            f"{APPS}#create-an-installation-access-token-for-an-app", "")}),
    ]
]  # fmt: skip
# Endpoints an App calls as itself, with a JWT: no installation's token, no quota of one.
AS_APP = {"repo_installation", "org_installation", "create_token"}
LEVELS = {"read": 1, "write": 2, "admin": 3}
READ_ONLY = {"issues": "read", "metadata": "read"}  # a fine-grained token's, issues: read


class Refusal(Exception):
    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


def error(status: int, message: str, doc: str = DOCS, *, with_status: bool = True,
          **extra: Any) -> Refusal:  # fmt: skip
    """GitHub's error body: `message`, `documentation_url` and (most now) the status, a string."""
    body = {"message": message, **extra, "documentation_url": doc}
    return Refusal(status, {**body, "status": str(status)} if with_status else body)


def failed(doc: str, *errors: dict[str, Any]) -> Refusal:
    return error(422, "Validation Failed", doc, errors=list(errors))


class _LostAnswer(Response):
    """An answer whose connection closes after its status line: the write was applied, the client
    never learns it. Under uvicorn the raise closes the socket (the client's httpx raises
    RemoteProtocolError); in-process (httpx.ASGITransport) the same error reaches the client."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


@dataclass
class _Repo:
    id: int
    full_name: str
    has_issues: bool
    private: bool
    created_at: float
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower-case name -> label
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_number: int = 1


@dataclass(frozen=True)
class _Caller:
    """Who calls: a token and its permissions (None: a classic token's, every one), an App
    installation's token (its repositories only), or an App itself (`app_id`, by its JWT)."""

    kind: str  # as GitHub's 403 names it
    permissions: dict[str, str] | None = None
    installation: Installation | None = None
    app_id: str = ""

    def may(self, accepted: str) -> bool:
        """Whether one of the endpoint's accepted permissions ("issues=read; ...") is granted."""
        if self.permissions is None or not accepted:
            return True
        wanted = [part.strip().partition("=") for part in accepted.split(";")]
        return any(
            LEVELS.get(self.permissions.get(name, ""), 0) >= LEVELS[level]
            for name, _, level in wanted
        )


@dataclass
class _Call:
    params: dict[str, str]
    query: QueryParams
    body: dict[str, Any]
    doc: str  # the endpoint's docs, which GitHub's refusals link to
    caller: _Caller


@dataclass
class GithubIssues:
    base_url: str = ""  # where the API is served; every URL in an answer starts with it
    html_url_base: str = ""  # github.com's stand-in, for `html_url`s; "" means base_url
    tokens: set[str] = field(default_factory=lambda: {TOKEN})
    read_only_tokens: set[str] = field(default_factory=set)  # fine-grained, issues: read
    apps: GithubApps = field(default_factory=GithubApps)  # and their installations' tokens
    user: dict[str, Any] = field(default_factory=lambda: dict(BOT))  # the tokens' owner
    author_association: str = "NONE"
    # The owner's role on every repository, as `GET /repos/{owner}/{repo}` reports it.
    permissions: dict[str, bool] = field(default_factory=lambda: dict(
        admin=False, maintain=False, push=True, triage=True, pull=True))  # fmt: skip
    # The primary limit, per principal; the Actions API's stand-in may share it (one token).
    limits: GithubQuota = field(default_factory=GithubQuota)
    limit_status: int = 403  # GitHub refuses past a limit with 403 or 429
    content_per_minute: int = 80  # the secondary limits on content-generating requests
    content_per_hour: int = 500
    max_body_bytes: int = 1 << 20
    clock: Callable[[], float] = time.time
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status)
    called_at: list[float] = field(default_factory=list)  # when each of `calls` was answered

    def __post_init__(self) -> None:
        self._lock = threading.RLock()  # the server and the test may run on different threads
        self._repos: dict[str, _Repo] = {}
        self._by_id: dict[str, _Repo] = {}
        self._ids, self._requests = 2_900_000_000, 0
        self._gate = threading.Event()
        self.held = 0  # requests hung by `hang_next`, waiting for their event
        self.reset_limits()

    # -- helpers for tests -------------------------------------------------------------------

    def repo(self, full_name: str, *, has_issues: bool = True, private: bool = False) -> dict:
        with self._lock:
            repo = self._repos.get(full_name.lower())
            if repo is None:
                repo = _Repo(self._next_id() // 4, full_name, has_issues, private, self.clock())
                for name, (color, description) in DEFAULT_LABELS.items():
                    self._label(repo, name, color, description, default=True)
                self._repos[full_name.lower()] = self._by_id[str(repo.id)] = repo
            repo.has_issues, repo.private = has_issues, private
            return self._repo_json(repo)

    def seed_issue(
        self,
        full_name: str,
        title: str,
        body: str = "",
        labels: tuple[str, ...] = (),
        state: str = "open",
        user_login: str = "pytorch-alerting[bot]",
    ) -> dict:
        """An issue someone else opened (by default the alerting pipeline), as GitHub shows it."""
        with self._lock:
            repo = self._repos[full_name.lower()]
            keys = [self._label(repo, n) for n in labels]
            issue = self._new_issue(repo, title, body, keys, _person(user_login))
            if state == "closed":
                issue.update(state="closed", state_reason="completed", closed_at=self.clock())
            return self._issue_json(repo, issue)

    def issue(self, full_name: str, number: int) -> dict:
        with self._lock:
            repo = self._repos[full_name.lower()]
            return self._issue_json(repo, repo.issues[number])

    def issues(self, full_name: str) -> list[dict]:
        """Every issue of the repository, in the order opened."""
        with self._lock:
            repo = self._repos[full_name.lower()]
            return [self._issue_json(repo, issue) for _, issue in sorted(repo.issues.items())]

    def comments(self, full_name: str, number: int) -> list[dict]:
        with self._lock:
            repo = self._repos[full_name.lower()]
            issue = repo.issues[number]
            return [self._comment_json(repo, issue, c) for c in issue["comments"]]

    def delete_issue(self, full_name: str, number: int) -> None:
        """Deleted by an admin: its number answers 410 from now on."""
        with self._lock:
            self._repos[full_name.lower()].issues[number]["fate"] = "deleted"

    def transfer_issue(self, full_name: str, number: int, to: str) -> dict:
        """Moved to the repository `to` (which must exist): a new number there, with its title,
        body, labels, comments and state; the old number answers 301 pointing at it."""
        with self._lock:
            old, new = self._repos[full_name.lower()], self._repos[to.lower()]
            issue = old.issues[number]
            keys = [self._label(new, old.labels[k]["name"]) for k in issue["labels"]]
            moved = self._new_issue(new, issue["title"], issue["body"], keys, issue["user"])
            for name in ("state", "state_reason", "comments", "created_at", "closed_at"):
                moved[name] = issue[name]
            issue["fate"] = (new.id, moved["number"])
            return self._issue_json(new, moved)

    def lock(self, full_name: str, number: int, reason: str | None = "resolved") -> None:
        with self._lock:
            issue = self._repos[full_name.lower()].issues[number]
            issue.update(locked=True, active_lock_reason=reason)

    def reset_limits(self) -> None:
        """A fresh hour: the whole quota, no content created lately, no switch set."""
        with self._lock:
            self._gate.set()  # nothing stays hung
            self.limits.clear()
            self._writes: deque[float] = deque()  # when content was created, within the hour
            self._refusals: list[tuple[int, int | None]] = []
            self._failures: list[int] = []
            self._hangs = self._lost = 0

    # -- switches --------------------------------------------------------------------------------

    def refuse_next(self, times: int = 1, *, retry_after: int | None = 60,
                    status: int = 403) -> None:  # fmt: skip
        """The next calls are refused as past a secondary limit: 403 or 429, with `retry-after`
        or without (when GitHub's docs say to wait at least a minute)."""
        with self._lock:
            self._refusals += [(status, retry_after)] * times

    def fail_next(self, times: int = 1, *, status: int = 503) -> None:
        """The next calls meet an outage: 502 or 503."""
        with self._lock:
            self._failures += [status] * times

    def hang_next(self, times: int = 1) -> threading.Event:
        """The next calls wait (past any client's timeout) until the returned event is set, then
        go on as usual. A thread's event: the server may run on another thread's loop."""
        with self._lock:
            if self._gate.is_set():
                self._gate = threading.Event()
            self._hangs += times
            return self._gate

    def lose_next_answers(self, times: int = 1) -> None:
        """The next writes (POST, PATCH) take effect, then the connection closes unanswered."""
        with self._lock:
            self._lost += times

    # -- HTTP ------------------------------------------------------------------------------------

    @cached_property
    def app(self) -> Starlette:
        api = [Route(p, self._serve, methods=ALL_METHODS) for p in
               ("/rate_limit", "/repos/{rest:path}", "/repositories/{rest:path}")]  # fmt: skip
        page = Route("/{owner}/{repo}/issues/{number:int}", self._page, methods=["GET"])
        index = Route("/{owner}/{repo}/issues", self._index, methods=["GET"])
        rest = Route("/{rest:path}", self._serve, methods=ALL_METHODS)  # 404, as GitHub answers
        return Starlette(routes=[*api, page, index, rest])

    async def _serve(self, request: Request) -> Response:
        method, path, raw = request.method, request.url.path, await request.body()
        version = request.headers.get("x-github-api-version") or VERSIONS[0]
        who = self._who(request)
        with self._lock:
            self._requests += 1
            rid = f"{self._requests:04X}:{zlib.crc32(path.encode()) & 0xFFFFF:X}:{self._ids:X}"
            route, params = _route(path, "GET" if method == "HEAD" else method)
            if not request.headers.get("user-agent", "").strip():  # GitHub's front door answers
                return self._answer(request, rid, version, 403, NO_USER_AGENT, {}, who)
            try:
                caller = self._gatekeep(request, version, raw, route)
            except Refusal as no:
                return self._answer(request, rid, version, no.status, no.body, no.headers, who)
        await self._maybe_hang()
        with self._lock:
            try:
                status, payload, headers = self._handle(request, route, params, raw, caller, who)
            except Refusal as no:
                status, payload, headers = no.status, no.body, no.headers
            if route and route[2]:
                headers["x-accepted-github-permissions"] = route[2]
            answer = self._answer(request, rid, version, status, payload, headers, who)
            if method in ("POST", "PATCH") and status < 300 and self._lost > 0:
                self._lost -= 1
                return _LostAnswer(answer.body, status, dict(answer.headers))
            return answer

    def _gatekeep(self, request: Request, version: str, raw: bytes,
                  route: tuple[str, str, str] | None) -> _Caller:  # fmt: skip
        """What GitHub checks before any endpoint: the version, the body's size, the token (or
        an App's JWT, where the endpoint is the App's own). Returns who calls."""
        if version not in VERSIONS:  # GitHub's words, its versions listed newest first
            newest = VERSIONS[::-1]
            listed = ", ".join([f'"{newest[0]}" (most recent)', *(f'"{v}"' for v in newest[1:])])
            raise error(400, f'The version you specified in the "X-GitHub-Api-Version" request '
                        f'header, "{version}", is not a supported version. The following '
                        f"versions are currently supported: {listed}.")  # fmt: skip
        if len(raw) > self.max_body_bytes:
            # GitHub documents no size; its front end has refused oversized bodies with a 413.
            raise error(413, "Request Entity Too Large")
        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if not scheme:
            raise error(401, "Requires authentication")
        if route is not None and route[0] in AS_APP:
            try:
                return _Caller("integration", app_id=self.apps.app_of(authorization, self.clock()))
            except JwtRefused as no:
                raise error(401, str(no)) from None
        token = token.strip()
        if scheme.lower() not in ("bearer", "token"):
            raise error(401, "Bad credentials")
        minted = self.apps.tokens.get(token)
        if token in self.tokens:
            return _Caller("personal access token")
        if token in self.read_only_tokens:
            return _Caller("personal access token", READ_ONLY)
        if minted is not None and self.clock() < minted.expires_at:
            installation = minted.installation
            return _Caller("integration", installation.permissions, installation)
        raise error(401, "Bad credentials")  # GitHub's answer to a lapsed token too

    async def _maybe_hang(self) -> None:
        with self._lock:
            if self._hangs <= 0:
                return
            self._hangs -= 1
            self.held += 1
            gate = self._gate
        # A thread's event, polled: the test that releases it may run on another loop. The
        # sleep is cancelled with the request when the client gives up.
        try:
            while not gate.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        finally:
            with self._lock:
                self.held -= 1

    def _handle(
        self,
        request: Request,
        route: tuple[str, str, str] | None,
        params: dict[str, str],
        raw: bytes,
        caller: _Caller,
        who: str,
    ) -> tuple[int, Any, dict]:
        if self._failures:
            status = self._failures.pop(0)
            raise error(status, "Server Error" if status == 502 else "Service Unavailable")
        if self._refusals:
            raise self._limited(*self._refusals.pop(0), "secondary")
        if route is None:  # an unknown path, or a method the path does not take
            self.limits.spend(who, self.clock())
            raise error(404, "Not Found")
        name, doc, accepted = route
        if name == "rate":  # GET /rate_limit costs no quota
            return 200, self._rate_json(who), {}
        if name in AS_APP:
            body = _json_body(raw, doc) if request.method == "POST" else {}
            return getattr(self, f"_{name}")(_Call(params, request.query_params, body, doc, caller))
        if self.limits.exhausted(who, self.clock()):
            raise self._limited(self.limit_status, None, "primary")
        writes, now = request.method in ("POST", "PATCH"), self.clock()
        while self._writes and self._writes[0] <= now - 3600:
            self._writes.popleft()
        minute = [t for t in self._writes if t > now - 60]
        if writes and len(minute) >= self.content_per_minute:
            raise self._limited(self.limit_status, math.ceil(minute[0] + 60 - now), "content")
        if writes and len(self._writes) >= self.content_per_hour:
            raise self._limited(
                self.limit_status, math.ceil(self._writes[0] + 3600 - now), "content"
            )
        self.limits.spend(who, now)
        if not caller.may(accepted):
            no = error(403, f"Resource not accessible by {caller.kind}", doc)
            raise Refusal(403, no.body, {"x-accepted-github-permissions": accepted})
        body = _json_body(raw, doc) if writes else {}
        call = _Call(params, request.query_params, body, doc, caller)
        status, payload, headers = getattr(self, f"_{name}")(call)
        if writes and status < 300:
            self._writes.append(now)
        if not writes and status == 200:
            # Per token, as GitHub's (`Vary: Authorization`): another token's ETag is a 200.
            seen = request.headers.get("authorization", "").encode() + _dump(payload)
            headers["etag"] = etag = f'W/"{hashlib.sha256(seen).hexdigest()}"'
            if request.headers.get("if-none-match", "").removeprefix("W/") == etag[2:]:
                self.limits.spend(who, now, -1)  # GitHub: a 304 does not count against the limit
                return 304, None, headers
        return status, payload, headers

    def _answer(self, request: Request, rid: str, version: str, status: int, payload: Any,
                headers: dict[str, str], who: str) -> Response:  # fmt: skip
        base = {**self.limits.headers(who, self.clock()), "x-github-request-id": rid}
        if version in VERSIONS:
            base["x-github-api-version-selected"] = version
        self.calls.append((request.method, request.url.path, status))
        self.called_at.append(self.clock())
        if isinstance(payload, str):
            return HTMLResponse(payload, status, {**base, **headers})
        content = b"" if payload is None or request.method == "HEAD" else _dump(payload)
        json_type = "application/json; charset=utf-8"
        return Response(content, status, {**base, **headers}, media_type=json_type)

    def _who(self, request: Request) -> str:
        """Whose quota a request spends: an installation's token its installation's, any other
        token its own (the stand-ins give each user one token)."""
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
        minted = self.apps.tokens.get(token)
        return f"installation:{minted.installation.id}" if minted is not None else token

    def _limited(self, status: int, retry_after: int | None, kind: str) -> Refusal:
        """GitHub's refusal past a limit (as tests/support/fakes/github_api.py words it)."""
        message, anchor = LIMIT_MESSAGES[kind]
        request_id = f"{self._requests:04X}:{self._ids:X}"  # GitHub's varies; any will do
        message = message.format(self.user["id"]) + SUPPORT.format(request_id)
        no = error(status, message, LIMITS + anchor, with_status=False)
        if retry_after is not None:
            no.headers["retry-after"] = str(retry_after)
        return no

    async def _index(self, request: Request) -> Response:
        """github.com's list of a repository's issues, for people (the demo prints its link)."""
        owner, name = request.path_params["owner"], request.path_params["repo"]
        with self._lock:
            repo = self._repos.get(f"{owner}/{name}".lower())
            if repo is None:
                return HTMLResponse("<!doctype html><title>Page not found</title>", 404)
            e = html.escape
            rows = "".join(
                f'<li><a href="{e(self._html)}/{e(repo.full_name)}/issues/{n}">#{n} '
                f"{e(str(issue['title']))}</a> · {issue['state']}</li>"
                for n, issue in sorted(repo.issues.items(), reverse=True)
            )
            return HTMLResponse(
                f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Issues · '
                f"{e(repo.full_name)}</title></head><body><h1>Issues · {e(repo.full_name)}</h1>"
                f"<ul>{rows or '<li>No issues yet.</li>'}</ul></body></html>"
            )

    async def _page(self, request: Request) -> Response:
        """github.com's issue page, for people (the demo's Slack root links here): no token."""
        owner, name, number = (request.path_params[k] for k in ("owner", "repo", "number"))
        with self._lock:
            repo = self._repos.get(f"{owner}/{name}".lower())
            issue = repo.issues.get(number) if repo else None
            if repo is None or issue is None:
                return HTMLResponse("<!doctype html><title>Page not found</title>", 404)
            e = html.escape
            reason = f" ({issue['state_reason']})" if issue["state_reason"] else ""
            labels = "".join(f"<li>{e(repo.labels[k]['name'])}</li>" for k in issue["labels"])
            comments = "".join(
                f'<article id="issuecomment-{c["id"]}"><p><b>{e(c["user"]["login"])}</b> '
                f"commented at {_iso(c['created_at'])}</p>{as_github_shows(c['body'])}</article>"
                for c in issue["comments"]
            )
            title = e(issue["title"])
            return HTMLResponse(
                f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · '
                f"Issue #{number} · {e(repo.full_name)}</title><style>{PAGE_STYLE}</style>"
                "</head><body>"
                f"<h1>{title} <span>#{number}</span></h1>"
                f'<p class="state">{issue["state"].capitalize()}{e(reason)} · opened by '
                f"{e(issue['user']['login'])} at {_iso(issue['created_at'])}</p>"
                f'<ul class="labels">{labels}</ul>{as_github_shows(issue["body"] or "")}'
                f"<h2>{len(issue['comments'])} comments</h2>{comments}</body></html>"
            )

    # -- endpoints -------------------------------------------------------------------------------

    def _rate_json(self, who: str) -> dict[str, Any]:
        core = self.limits.rate(who, self.clock())
        search = {"limit": 30, "used": 0, "remaining": 30, "reset": int(self.clock()) + 60}
        return {"resources": {"core": core, "search": search}, "rate": core}

    def _get_repo(self, call: _Call) -> tuple[int, Any, dict]:
        return 200, self._repo_json(self._find_repo(call)), {}

    def _repo_installation(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._find_repo(call)
        return self._installation_json(call, lambda i: i.covers(repo.full_name))

    def _org_installation(self, call: _Call) -> tuple[int, Any, dict]:
        org = call.params["org"].lower()
        return self._installation_json(call, lambda i: i.account.lower() == org)

    def _create_token(self, call: _Call) -> tuple[int, Any, dict]:
        installation = self.apps.installations.get(int(call.params["installation_id"]))
        if installation is None or installation.app_id != call.caller.app_id:
            raise error(404, "Not Found", call.doc)
        token, minted = self.apps.mint(installation, self.clock())
        selection = "all" if installation.repos is None else "selected"
        return 201, {"token": token, "expires_at": _iso(minted.expires_at),
                     "permissions": dict(installation.permissions),
                     "repository_selection": selection}, {}  # fmt: skip

    def _list_issues(self, call: _Call) -> tuple[int, Any, dict]:
        repo, q = self._issues_repo(call), call.query
        state, sort = q.get("state", "open"), q.get("sort", "created")
        direction = q.get("direction", "desc")
        for name, value, allowed in (("state", state, ("open", "closed", "all")),
                                     ("sort", sort, ("created", "updated", "comments")),
                                     ("direction", direction, ("asc", "desc"))):  # fmt: skip
            if value not in allowed:
                raise failed(call.doc, _invalid(name, value))
        since = _since(q, call.doc)
        wanted = {n.strip().lower() for n in q.get("labels", "").split(",") if n.strip()}
        creator = q.get("creator", "").lower()
        chosen = [
            i for i in repo.issues.values()
            if not i["fate"] and state in ("all", i["state"]) and wanted <= set(i["labels"])
            and creator in ("", i["user"]["login"].lower()) and int(i["updated_at"]) >= since
        ]  # fmt: skip
        key = {"created": "created_at", "updated": "updated_at"}.get(sort)
        chosen.sort(key=lambda i: (i[key] if key else len(i["comments"]), i["number"]),
                    reverse=direction == "desc")  # fmt: skip
        items = [self._issue_json(repo, i) for i in chosen]
        return self._paged(call, items, f"/repositories/{repo.id}/issues")

    def _create_issue(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._issues_repo(call)
        edits = self._edits(call, repo, creating=True)
        issue = self._new_issue(repo, edits.pop("title"), edits.pop("body", None), [], self.user)
        issue.update(edits)
        answer = self._issue_json(repo, issue)
        return 201, answer, {"location": answer["url"]}

    def _get_issue(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._issues_repo(call)
        return 200, self._issue_json(repo, self._find_issue(repo, call, moves=True)), {}

    def _update_issue(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._issues_repo(call)
        issue = self._find_issue(repo, call, moves=True)
        state, reason = call.body.get("state", issue["state"]), call.body.get("state_reason")
        errors = [] if state in ("open", "closed") else [_invalid("state", state)]
        changing = state != issue["state"]
        # A reason must fit the change: GitHub's closing reasons leave out `reopened`, and a
        # reopened issue's reason is `reopened`. Without a change it is ignored (documented).
        if reason not in REASONS or (
            changing and reason and (reason == "reopened") == (state == "closed")
        ):
            errors.append(_invalid("state_reason", reason))
        if errors:
            raise failed(call.doc, *errors)
        issue.update(self._edits(call, repo, creating=False))
        now = self.clock()
        if changing and state == "closed":
            reason = reason or "completed"
            issue.update(state=state, state_reason=reason, closed_at=now, closed_by=self.user)
        elif changing:
            issue.update(state=state, state_reason="reopened", closed_at=None, closed_by=None)
        if call.body:
            issue["updated_at"] = now
        return 200, self._issue_json(repo, issue), {}

    def _list_comments(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._issues_repo(call)
        issue, since = self._find_issue(repo, call), _since(call.query, call.doc)
        items = [self._comment_json(repo, issue, c) for c in issue["comments"]
                 if int(c["updated_at"]) >= since]  # fmt: skip
        path = f"/repositories/{repo.id}/issues/{issue['number']}/comments"
        return self._paged(call, items, path)

    def _create_comment(self, call: _Call) -> tuple[int, Any, dict]:
        repo = self._issues_repo(call)
        issue = self._find_issue(repo, call)
        text = _typed(call.body, "body", (str,), "a string", call.doc)
        if not text:
            missing = {"resource": "IssueComment", "code": "missing_field", "field": "body"}
            raise failed(call.doc, missing)
        if len(text) > BODY_MAX:
            message = f"Body is too long (maximum is {BODY_MAX} characters)"
            raise failed(call.doc, {"resource": "IssueComment", "code": "unprocessable",
                                    "field": "data", "message": message})  # fmt: skip
        # Only collaborators with push access may comment on a locked issue, and apps not even
        # then (probot/stale#25, renovatebot/renovate#6215 quote GitHub's 403).
        if issue["locked"] and (self.user["type"] == "Bot" or not self.permissions.get("push")):
            raise error(403, "Unable to create comment because issue is locked.",
                        "https://docs.github.com/articles/locking-conversations/",
                        with_status=False)  # fmt: skip
        now = self.clock()
        comment = {"id": self._next_id(), "body": text, "user": self.user, "created_at": now,
                   "updated_at": now, "author_association": self.author_association}  # fmt: skip
        issue["comments"].append(comment)
        issue["updated_at"] = now
        answer = self._comment_json(repo, issue, comment)
        return 201, answer, {"location": answer["url"]}

    # -- state and shapes ------------------------------------------------------------------------

    def _edits(self, call: _Call, repo: _Repo, *, creating: bool) -> dict[str, Any]:
        """An issue's fields from a create or update body, checked as GitHub checks them."""
        body, doc, edits = call.body, call.doc, {}
        if creating or "title" in body:
            title = _typed(body, "title", (str, int), "a string or integer", doc)
            if title in (None, ""):
                raise failed(doc, {"resource": "Issue", "code": "missing_field", "field": "title"})
            edits["title"] = str(title)
        if "body" in body:
            edits["body"] = _typed(body, "body", (str,), "a string", doc)
        errors = [
            {"resource": "Issue", "code": "custom", "field": name,
             "message": f"{name} is too long (maximum is {most} characters)"}
            for name, most in (("title", TITLE_MAX), ("body", BODY_MAX))
            if len(edits.get(name) or "") > most
        ]  # fmt: skip
        if body.get("milestone") is not None:  # no milestones here: none exists
            errors.append(_invalid("milestone", body["milestone"]))
        if errors:
            raise failed(doc, *errors)
        labels = _labels(body, doc) if "labels" in body else None
        too_long = [
            {"value": name, "resource": "Label", "field": "name", "code": "invalid"}
            for name in labels or ()
            if len(name) > LABEL_MAX and name.lower() not in repo.labels
        ]
        if too_long:
            raise failed(doc, *too_long)
        assignees = _typed(body, "assignees", (list,), "an array", doc)
        if isinstance(body.get("assignee"), str):  # closing down, still taken
            assignees = [*(assignees or []), body["assignee"]]
        if self.permissions.get("push"):  # without push access GitHub silently drops these
            if labels is not None:
                edits["labels"] = [self._label(repo, n) for n in labels]
            if assignees is not None:
                edits["assignees"] = [_person(str(a)) for a in assignees]
        return edits

    def _find_repo(self, call: _Call) -> _Repo:
        name = f"{call.params.get('owner')}/{call.params.get('repo')}".lower()
        repo = self._by_id.get(call.params.get("repo_id", "")) or self._repos.get(name)
        installation = call.caller.installation
        # An installation's token sees its repositories only; GitHub hides the rest (404).
        if repo is None or (installation and not installation.covers(repo.full_name)):
            raise error(404, "Not Found", call.doc)
        return repo

    def _issues_repo(self, call: _Call) -> _Repo:
        repo = self._find_repo(call)
        if not repo.has_issues:
            raise error(410, "Issues are disabled for this repo", call.doc)
        return repo

    def _find_issue(self, repo: _Repo, call: _Call, *, moves: bool = False) -> dict[str, Any]:
        """The issue; `moves`: an endpoint that answers a transferred issue with 301."""
        issue = repo.issues.get(int(call.params["number"]))
        fate = issue["fate"] if issue else None
        if fate == "deleted":
            raise error(410, "This issue was deleted", call.doc)
        if fate and moves:
            to = f"{self.base_url}/repositories/{fate[0]}/issues/{fate[1]}"
            moved = error(301, "Moved Permanently", call.doc, with_status=False, url=to)
            raise Refusal(301, moved.body, {"location": to})
        if issue is None or fate:
            raise error(404, "Not Found", call.doc)
        return issue

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _label(self, repo: _Repo, name: str, color: str = "ededed", description: str | None = None,
               default: bool = False) -> str:  # fmt: skip
        """The key of the repository's label `name` (names ignore case), created if missing as
        GitHub does for a caller with push access."""
        key = name.lower()
        if key not in repo.labels:
            repo.labels[key] = {"id": self._next_id(), "name": name, "color": color,
                                "default": default, "description": description}  # fmt: skip
        return key

    def _new_issue(self, repo: _Repo, title: str, body: str | None, labels: list[str],
                   user: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
        now = self.clock()
        association = self.author_association if user is self.user else "NONE"
        issue = {"id": self._next_id(), "number": repo.next_number, "title": title, "body": body,
                 "state": "open", "state_reason": None, "user": user, "labels": labels,
                 "assignees": [], "locked": False, "active_lock_reason": None, "comments": [],
                 "created_at": now, "updated_at": now, "closed_at": None, "closed_by": None,
                 "author_association": association, "fate": None}  # fmt: skip
        repo.issues[repo.next_number] = issue
        repo.next_number += 1  # monotonic, under the lock: concurrent creations never share one
        return issue

    def _paged(self, call: _Call, items: list[Any], path: str) -> tuple[int, Any, dict]:
        """A page of `items` and GitHub's `link` header, its URLs at /repositories/{id}."""
        per_page = min(max(_int(call.query.get("per_page"), 30), 1), 100)
        page = max(_int(call.query.get("page"), 1), 1)
        last = max(math.ceil(len(items) / per_page), 1)

        def link(to: int, rel: str) -> str:
            pairs = [(k, v) for k, v in call.query.multi_items() if k != "page"]
            return f'<{self.base_url}{path}?{urlencode([*pairs, ("page", to)])}>; rel="{rel}"'

        links = [link(min(page - 1, last), "prev")] if page > 1 else []
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links.append(link(1, "first"))
        headers = {"link": ", ".join(links)} if links else {}
        return 200, items[(page - 1) * per_page : page * per_page], headers

    @property
    def _html(self) -> str:
        return self.html_url_base or self.base_url

    def _user_json(self, user: dict[str, Any]) -> dict[str, Any]:
        login, app = user["login"], user["type"] == "Bot"
        return {"login": login, "id": user["id"], "node_id": user["node_id"],
                "avatar_url": f"https://avatars.githubusercontent.com/u/{user['id']}?v=4",
                "gravatar_id": "", "url": f"{self.base_url}/users/{quote(login)}",
                "html_url": f"{self._html}/{'apps/' if app else ''}{login.removesuffix('[bot]')}",
                "type": user["type"], "site_admin": user.get("site_admin", False)}  # fmt: skip

    def _installation_json(
        self, call: _Call, where: Callable[[Installation], bool]
    ) -> tuple[int, Any, dict]:
        """The calling App's installation that `where` picks, as GitHub shows it; 404 when the
        App is not installed there."""
        app = call.caller.app_id
        found = [i for i in self.apps.installations.values() if i.app_id == app and where(i)]
        if not found:
            raise error(404, "Not Found", call.doc)
        i = found[0]
        account = self._user_json(_person(i.account, "Organization"))
        tokens_url = f"{self.base_url}/app/installations/{i.id}/access_tokens"
        return 200, {"id": i.id, "account": account, "app_id": _int(app, 0) or app,
                     "repository_selection": "all" if i.repos is None else "selected",
                     "access_tokens_url": tokens_url,
                     "repositories_url": f"{self.base_url}/installation/repositories",
                     "target_id": account["id"], "target_type": "Organization",
                     "permissions": dict(i.permissions), "events": [],
                     "suspended_at": None}, {}  # fmt: skip

    def _repo_json(self, repo: _Repo) -> dict[str, Any]:
        url, owner = f"{self.base_url}/repos/{repo.full_name}", repo.full_name.split("/")[0]
        created = _iso(repo.created_at)
        return {"id": repo.id, "node_id": _node("R_kgDO", repo.id),
                "name": repo.full_name.split("/")[1], "full_name": repo.full_name,
                "private": repo.private, "owner": self._user_json(_person(owner, "Organization")),
                "html_url": f"{self._html}/{repo.full_name}", "description": None, "fork": False,
                "url": url, "issues_url": f"{url}/issues{{/number}}",
                "labels_url": f"{url}/labels{{/name}}", "has_issues": repo.has_issues,
                "open_issues_count": sum(i["state"] == "open" for i in repo.issues.values()),
                "visibility": "private" if repo.private else "public", "archived": False,
                "disabled": False, "default_branch": "main",
                "permissions": dict(self.permissions), "created_at": created,
                "updated_at": created, "pushed_at": created}  # fmt: skip

    def _issue_json(self, repo: _Repo, issue: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/repos/{repo.full_name}/issues/{issue['number']}"
        assignees = [self._user_json(a) for a in issue["assignees"]]
        closed_by = issue["closed_by"]
        labels = [{**lb, "node_id": _node("LA_kwDO", lb["id"]),
                   "url": f"{self.base_url}/repos/{repo.full_name}/labels/{quote(lb['name'])}"}
                  for lb in (repo.labels[k] for k in issue["labels"])]  # fmt: skip
        return {
            "id": issue["id"], "node_id": _node("I_kwDO", issue["id"]), "url": url,
            "repository_url": f"{self.base_url}/repos/{repo.full_name}",
            "labels_url": f"{url}/labels{{/name}}", "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"{self._html}/{repo.full_name}/issues/{issue['number']}",
            "number": issue["number"], "state": issue["state"],
            "state_reason": issue["state_reason"], "title": issue["title"], "body": issue["body"],
            "user": self._user_json(issue["user"]), "labels": labels,
            "assignee": assignees[0] if assignees else None, "assignees": assignees,
            "milestone": None, "locked": issue["locked"],
            "active_lock_reason": issue["active_lock_reason"], "comments": len(issue["comments"]),
            "created_at": _iso(issue["created_at"]), "updated_at": _iso(issue["updated_at"]),
            "closed_at": _iso(issue["closed_at"]),
            "closed_by": self._user_json(closed_by) if closed_by else None,
            "author_association": issue["author_association"],
        }  # fmt: skip

    def _comment_json(self, repo: _Repo, issue: dict[str, Any], c: dict[str, Any]) -> dict:
        issue_url = f"{self.base_url}/repos/{repo.full_name}/issues/{issue['number']}"
        html_url = f"{self._html}/{repo.full_name}/issues/{issue['number']}#issuecomment-{c['id']}"
        return {"id": c["id"], "node_id": _node("IC_kwDO", c["id"]),
                "url": f"{self.base_url}/repos/{repo.full_name}/issues/comments/{c['id']}",
                "html_url": html_url, "body": c["body"], "user": self._user_json(c["user"]),
                "created_at": _iso(c["created_at"]), "updated_at": _iso(c["updated_at"]),
                "issue_url": issue_url, "author_association": c["author_association"]}  # fmt: skip


def _route(path: str, method: str) -> tuple[tuple[str, str, str] | None, dict[str, str]]:
    for pattern, methods in ROUTES:
        if (match := pattern.fullmatch(path)) and method in methods:
            return methods[method], {k: v for k, v in match.groupdict().items() if v}
    return None, {}


def _json_body(raw: bytes, doc: str) -> dict[str, Any]:
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise error(400, "Problems parsing JSON", doc) from None
    if not isinstance(body, dict):
        raise error(400, "Body should be a JSON object", doc)
    return body


def _typed(body: dict[str, Any], name: str, kinds: tuple[type, ...], what: str, doc: str) -> Any:
    """A body parameter of its documented type (or null); GitHub's schema refusal otherwise."""
    value = body.get(name)
    if value is None or (isinstance(value, kinds) and not isinstance(value, bool)):
        return value
    message = f"Invalid request.\n\nFor 'properties/{name}', {json.dumps(value)} is not {what}."
    raise error(422, message, doc)


def _labels(body: dict[str, Any], doc: str) -> list[str]:
    """Label names from strings or objects with a `name`, as create and update both take them."""
    names = []
    for item in _typed(body, "labels", (list,), "an array", doc) or []:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            what = "is not a string or an object with a name."
            raise error(422, f"Invalid request.\n\nFor 'items', {json.dumps(item)} {what}", doc)
        names.append(name.strip())
    return names


def _invalid(name: str, value: Any) -> dict[str, Any]:
    return {"resource": "Issue", "code": "invalid", "field": name, "value": value}


def _since(query: QueryParams, doc: str) -> int:
    """`since` (ISO 8601, `YYYY-MM-DDTHH:MM:SSZ`) in epoch seconds; 0 without one."""
    value = query.get("since")
    if value is None:
        return 0
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise failed(doc, _invalid("since", value)) from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def _person(login: str, kind: str | None = None) -> dict[str, Any]:
    uid = zlib.crc32(login.encode()) % 90_000_000 + 1_000_000
    kind = kind or ("Bot" if login.endswith("[bot]") else "User")
    return {"login": login, "id": uid, "node_id": _node("U_kgDO", uid), "type": kind}


def _node(prefix: str, n: int) -> str:
    return prefix + base64.urlsafe_b64encode(n.to_bytes(6, "big")).decode().rstrip("=")


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _dump(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def as_github_shows(markdown: str) -> str:
    """An issue's or comment's body as its page shows it: rendered, without its HTML comments."""
    return MARKDOWN.render(HTML_COMMENT.sub("", markdown))
