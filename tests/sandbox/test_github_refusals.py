"""What GitHub's REST API refuses, as the GitHub stand-in (`sandbox.github_issues`, with its Apps)
must: one table, a row per refusal with GitHub's whole answer.

GitHub's error body is `message`, `documentation_url` (the endpoint's docs) and, on most, the
status as a string ("Troubleshooting the REST API"; "Resources in the REST API" for 401 "Bad
credentials"); 422 "Validation Failed" carries `errors` with a `code` per field; limits answer 403
or 429 with `x-ratelimit-remaining: 0` (primary) or a secondary limit's message and maybe
`retry-after` ("Rate limits for the REST API"); an App's JWT is refused in the words its users
quote (octokit/auth-app.js#698 and #375, github3.py#1050). A refused request changes no issue
or comment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from sandbox.github_issues import TOKEN, GithubIssues
from tests.support.github_app import APP_ID, public_pem, signed
from tests.support.refusals import Answer, Holding, Like, assert_answered

START = 1_750_000_000.0  # 2025-06-15T15:06:40Z
REPO = "pytorch/pytorch"
ISSUES = f"/repos/{REPO}/issues"
HEADERS = {"User-Agent": "queuepilot-tests", "Accept": "application/vnd.github+json"}
DOCS = "https://docs.github.com/rest"
CREATE, LIST = (
    f"{DOCS}/issues/issues#create-an-issue",
    f"{DOCS}/issues/issues#list-repository-issues",
)
UPDATE = f"{DOCS}/issues/issues#update-an-issue"
GET = f"{DOCS}/issues/issues#get-an-issue"
MOVED = Like(r"http://api\.gh\.test/repositories/\d+/issues/1")  # the issue's number there
COMMENT = f"{DOCS}/issues/comments#create-an-issue-comment"
LIMITS = f"{DOCS}/overview/rate-limits-for-the-rest-api"
MINT = f"{DOCS}/apps/apps#create-an-installation-access-token-for-an-app"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Github:
    """The stand-in, its clock, and a client of it (ASGI, in-process)."""

    api: GithubIssues
    clock: Clock
    http: httpx.AsyncClient
    unchanged: bool | None = None

    def held(self) -> list[Any]:
        """Every issue and comment: what a refusal must leave as it was."""
        return [
            (issue, self.api.comments(name, issue["number"]))
            for name in (REPO, "pytorch/test-infra")
            for issue in self.api.issues(name)
        ]

    async def final(self, method: str, path: str, **request: Any) -> Answer:
        return await self.answer(self.http.request(method, path, **request))

    async def answer(self, request: Awaitable[httpx.Response]) -> Answer:
        before = self.held()
        answer = Answer.of(await request)
        self.unchanged = self.held() == before
        return answer


@pytest.fixture
async def github() -> AsyncIterator[Github]:
    clock = Clock(START)
    api = GithubIssues(base_url="http://api.gh.test", clock=clock)
    api.repo(REPO)
    api.repo("pytorch/test-infra", has_issues=False)
    api.seed_issue(REPO, "alert")
    api.apps.register(APP_ID, public_pem())
    transport = httpx.ASGITransport(app=api.app)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url=api.base_url, headers=HEADERS | auth
    ) as http:
        yield Github(api, clock, http)


Ask = Callable[[Github], Awaitable[Answer]]


def call(method: str, path: str, **request: Any) -> Ask:
    return lambda gh: gh.final(method, path, **request)


def after(prepare: Callable[[Github], Any], ask: Ask) -> Ask:
    async def asked(gh: Github) -> Answer:
        prepare(gh)
        return await ask(gh)

    return asked


def refused(
    status: int,
    message: str | Like,
    docs: str = DOCS,
    *,
    headers: dict[str, Any] | None = None,
    **beside: Any,
) -> Answer:
    """GitHub's error body, with its status as a string."""
    body = {"message": message, **beside, "documentation_url": docs, "status": str(status)}
    return Answer(status, body, headers or {})


def invalid(docs: str, *errors: dict[str, Any]) -> Answer:
    return refused(422, "Validation Failed", docs, errors=list(errors))


def field(resource: str, code: str, name: str, **beside: Any) -> dict[str, Any]:
    return {"resource": resource, "code": code, "field": name, **beside}


def limited(
    status: int, message: str, anchor: str = "", headers: dict[str, Any] | None = None
) -> Answer:
    """Past a limit: no status in the body, the request's ID at the end of the message."""
    support = r" If you reach out to GitHub Support for help, please include the request ID \S+\."
    body = {"message": Like(message + support), "documentation_url": LIMITS + anchor}
    return Answer(status, body, headers or {})


SECONDARY = (
    r"You have exceeded a secondary rate limit\. Please wait a few minutes before you try again\."
)
CONTENT = (
    r"You have exceeded a secondary rate limit and have been temporarily blocked from content "
    r"creation\. Please retry your request again later\."
)
PRIMARY = r"API rate limit exceeded for user ID 190000001\."
SECOND = "#about-secondary-rate-limits"


def no_user_agent(agent: str | None) -> Ask:
    async def ask(gh: Github) -> Answer:
        request = gh.http.build_request("GET", ISSUES)
        if agent is None:
            del request.headers["user-agent"]
        else:
            request.headers["user-agent"] = agent
        return await gh.answer(gh.http.send(request))

    return ask


def authorized(authorization: str | None, method: str = "GET", path: str = ISSUES) -> Ask:
    async def ask(gh: Github) -> Answer:
        headers = {**HEADERS, **({"Authorization": authorization} if authorization else {})}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=gh.api.app), base_url=gh.api.base_url, headers=headers
        ) as http:
            return await gh.answer(http.request(method, path))

    return ask


def at_state(state: str, body: dict[str, Any]) -> Ask:
    async def ask(gh: Github) -> Answer:
        number = gh.api.seed_issue(REPO, "another", state=state)["number"]
        return await gh.final("PATCH", f"{ISSUES}/{number}", json=body)

    return ask


def transferred(gh: Github) -> None:
    gh.api.repo("pytorch/alerting")
    gh.api.transfer_issue(REPO, 1, "pytorch/alerting")


async def content_past_a_minute(gh: Github) -> Answer:
    gh.api.content_per_minute = 2
    await gh.http.post(ISSUES, json={"title": "one"})
    await gh.http.post(ISSUES, json={"title": "two"})
    gh.clock.now += 20
    assert (await gh.http.get(ISSUES)).status_code == 200, "reading creates no content"
    return await gh.final("POST", ISSUES, json={"title": "three"})


def past_the_limit(name: str, most: int) -> Ask:
    """As long as GitHub takes it, and one more."""

    async def ask(gh: Github) -> Answer:
        assert (
            await gh.http.post(ISSUES, json={"title": "t", name: "x" * most})
        ).status_code == 201
        return await gh.final("POST", ISSUES, json={"title": "t", name: "x" * (most + 1)})

    return ask


async def content_past_an_hour(gh: Github) -> Answer:
    gh.api.content_per_hour = 2
    await gh.http.post(ISSUES, json={"title": "one"})
    gh.clock.now += 120
    await gh.http.post(f"{ISSUES}/1/comments", json={"body": "two"})
    return await gh.final("PATCH", f"{ISSUES}/1", json={"state": "closed"})


def past_the_quota(status: int) -> Ask:
    async def ask(gh: Github) -> Answer:
        gh.api.limits.limit, gh.api.limit_status = 3, status
        for _ in range(3):
            await gh.http.get(ISSUES)
        return await gh.final("GET", ISSUES)

    return ask


def as_reader(method: str, path: str, body: dict[str, Any]) -> Ask:
    """A fine-grained token that may read issues only."""

    async def ask(gh: Github) -> Answer:
        gh.api.read_only_tokens.add("github_pat_read-only")
        headers = {"Authorization": "Bearer github_pat_read-only"}
        return await gh.final(method, path, json=body, headers=headers)

    return ask


# -- Apps: a JWT as GitHub asks for it, but for the claims, key or algorithm given


def jwt(now: float, *, which: str = "app", alg: str = "RS256", **claims: Any) -> str:
    usual = {"iat": int(now) - 60, "exp": int(now) + 540, "iss": APP_ID}
    return signed({**usual, **claims}, which=which, alg=alg)


NOT_DECODED = "A JSON web token could not be decoded"
EXPIRED = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
    "which the assertion expires"
)
JWTS: list[tuple[str, Callable[[float], str], str]] = [
    ("exp past ten minutes", lambda now: f"Bearer {jwt(now, exp=int(now) + 601)}",
     "'Expiration time' claim ('exp') is too far in the future"),
    ("exp gone by", lambda now: f"Bearer {jwt(now, iat=int(now) - 700, exp=int(now) - 1)}",
     EXPIRED),
    ("exp a string", lambda now: f"Bearer {jwt(now, exp=str(int(now) + 60))}", EXPIRED),
    ("iat ahead", lambda now: f"Bearer {jwt(now, iat=int(now) + 30)}",
     "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was "
     "issued"),
    # Signed by a key the App does not have, or naming another App: not decoded either.
    ("another key", lambda now: f"Bearer {jwt(now, which='other')}", NOT_DECODED),
    ("another App", lambda now: f"Bearer {jwt(now, iss='999')}", NOT_DECODED),
    ("HS256", lambda now: f"Bearer {jwt(now, alg='HS256')}", NOT_DECODED),
    # A JWT goes as Bearer only; a token is no JWT.
    ("as token", lambda now: f"token {jwt(now)}", NOT_DECODED),
    ("a personal token", lambda now: "Bearer ghp_a-personal-token", NOT_DECODED),
    ("no claims", lambda now: "Bearer e30.e30.e30", NOT_DECODED),
]  # fmt: skip


def with_jwt(authorization: Callable[[float], str], method: str, path: Callable[[int], str]) -> Ask:
    async def ask(gh: Github) -> Answer:
        installation = gh.api.apps.install(APP_ID, "pytorch")
        headers = {"Authorization": authorization(gh.clock.now)}
        answer = await gh.final(method, path(installation.id), headers=headers)
        assert gh.api.apps.minted == 0
        return answer

    return ask


APP_PATHS: list[tuple[str, str, Callable[[int], str]]] = [
    ("a repository's installation", "GET", lambda _: f"/repos/{REPO}/installation"),
    ("an organization's installation", "GET", lambda _: "/orgs/pytorch/installation"),
    ("a token", "POST", lambda installation: f"/app/installations/{installation}/access_tokens"),
]


async def mint(gh: Github, installation: int) -> dict[str, str]:
    url = f"/app/installations/{installation}/access_tokens"
    answer = await gh.http.post(url, headers={"Authorization": f"Bearer {jwt(gh.clock.now)}"})
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def as_installation(
    method: str,
    path: str,
    *,
    repos: tuple[str, ...] | None = None,
    permissions: dict[str, str] | None = None,
    later_s: float = 0,
    revoked: bool = False,
) -> Ask:
    async def ask(gh: Github) -> Answer:
        installation = gh.api.apps.install(APP_ID, "pytorch", repos=repos, permissions=permissions)
        token = await mint(gh, installation.id)
        if later_s:
            gh.clock.now += later_s - 1
            assert (await gh.http.get(ISSUES, headers=token)).status_code == 200, "till then"
            gh.clock.now += 1
        if revoked:
            gh.api.apps.revoke(token["Authorization"].removeprefix("Bearer "))
        body = {"title": "t"} if method == "POST" else None
        return await gh.final(method, path, headers=token, json=body)

    return ask


def theirs(gh: Github) -> int:
    gh.api.apps.register("777", public_pem("other"))
    return gh.api.apps.install("777", "pytorch").id


def mint_for(installation: Callable[[Github], int]) -> Ask:
    async def ask(gh: Github) -> Answer:
        number = installation(gh)
        headers = {"Authorization": f"Bearer {jwt(gh.clock.now)}"}
        url = f"/app/installations/{number}/access_tokens"
        answer = await gh.final("POST", url, headers=headers)
        assert gh.api.apps.minted == 0
        return answer

    return ask


async def installed_elsewhere(gh: Github) -> Answer:
    gh.api.apps.install(APP_ID, "pytorch", repos=("pytorch/vision",))
    headers = {"Authorization": f"Bearer {jwt(gh.clock.now)}"}
    return await gh.final("GET", f"/repos/{REPO}/installation", headers=headers)


def page_for_people(path: str) -> Ask:
    """github.com's pages, for people: no token."""
    return authorized(None, path=path)


TOO_LONG = "x" * 65537
ROWS: list[tuple[str, Ask, Answer]] = [
    # -- the door: a token, a User-Agent, a version GitHub serves
    ("no token", authorized(None), Answer(401, {
        "message": "Requires authentication", "documentation_url": DOCS, "status": "401"},
        {"x-ratelimit-used": "0"})),
    ("a token GitHub does not know", authorized("Bearer ghp_not-a-token"),
     refused(401, "Bad credentials")),
    ("a token sent as Basic", authorized(f"Basic {TOKEN}"), refused(401, "Bad credentials")),
    *((f"User-Agent {agent!r}", no_user_agent(agent), Answer(403, Like(
        "Request forbidden by administrative rules. Please make sure your request has a "
        "User-Agent header .*"), {"content-type": Like("text/html.*")}))
      for agent in (None, "")),
    ("an API version GitHub does not serve", call("GET", ISSUES, headers={
        "X-GitHub-Api-Version": "v3"}), refused(400,
        'The version you specified in the "X-GitHub-Api-Version" request header, "v3", is not a '
        'supported version. The following versions are currently supported: "2026-03-10" (most '
        'recent), "2022-11-28".', headers={"x-github-api-version-selected": None})),
    # GitHub documents no size; its front end has refused oversized bodies with a 413.
    ("a body past a megabyte", call("POST", ISSUES, json={"title": "t", "body": "x" * (1 << 20)}),
     refused(413, "Request Entity Too Large")),
    # -- an issue's fields, as the create and update endpoints' schemas have them
    *((f"a title {body}", call("POST", ISSUES, json=body),
       invalid(CREATE, field("Issue", "missing_field", "title")))
      for body in ({}, {"title": ""}, {"title": None, "body": "no title"})),
    ("a title of 257", past_the_limit("title", 256), invalid(
        CREATE, field("Issue", "custom", "title", message="title is too long (maximum is 256 "
                      "characters)"))),
    ("a body of 65537", past_the_limit("body", 65536), invalid(
        CREATE, field("Issue", "custom", "body", message="body is too long (maximum is 65536 "
                      "characters)"))),
    ("a milestone", call("POST", ISSUES, json={"title": "t", "milestone": 1}),
     invalid(CREATE, field("Issue", "invalid", "milestone", value=1))),
    ("not JSON", call("POST", ISSUES, content=b"{title: 1"), refused(
        400, "Problems parsing JSON", CREATE)),
    ("not an object", call("POST", ISSUES, content=b'["title"]'), refused(
        400, "Body should be a JSON object", CREATE)),
    ("a title that is an array", call("POST", ISSUES, json={"title": ["a"]}), refused(
        422, "Invalid request.\n\nFor 'properties/title', [\"a\"] is not a string or integer.",
        CREATE)),
    ("labels that are a string", call("POST", ISSUES, json={"title": "t", "labels": "bug"}),
     refused(422, "Invalid request.\n\nFor 'properties/labels', \"bug\" is not an array.",
             CREATE)),
    ("a label without a name", call("POST", ISSUES, json={"title": "t", "labels": [{"x": 1}]}),
     refused(422, "Invalid request.\n\nFor 'items', {\"x\": 1} is not a string or an object "
             "with a name.", CREATE)),
    # A label name past 50 characters (github/docs#32156: an issue naming one is refused so).
    ("a label of 51 characters", call("POST", ISSUES, json={"title": "t", "labels": [
        "area:alerting", "Team:" + "x" * 46]}), invalid(CREATE, field(
        "Label", "invalid", "name", value="Team:" + "x" * 46))),
    ("a label of 51 characters, on an update", call("PATCH", f"{ISSUES}/1", json={
        "labels": ["y" * 51]}), invalid(UPDATE, field("Label", "invalid", "name", value="y" * 51))),
    # A deleted issue is Gone; a transferred one Moved Permanently where it may be read.
    *((f"a deleted issue: {method} {tail}", after(
        lambda gh: gh.api.delete_issue(REPO, 1), call(method, f"{ISSUES}/1{tail}", **request)),
       refused(410, "This issue was deleted", docs))
      for method, tail, request, docs in [("GET", "", {}, GET), ("PATCH", "", {"json": {
          "state": "closed"}}, UPDATE), ("POST", "/comments", {"json": {"body": "b"}}, COMMENT)]),
    *((f"a transferred issue: {method}", after(transferred, call(
        method, f"{ISSUES}/1", **request)), Answer(301, {
        "message": "Moved Permanently", "url": MOVED, "documentation_url": docs}, {
        "location": MOVED}))
      for method, request, docs in [("GET", {}, GET), ("PATCH", {"json": {"state": "closed"}},
                                                         UPDATE)]),
    ("a transferred issue's comments", after(transferred, call(
        "POST", f"{ISSUES}/1/comments", json={"body": "b"})), refused(404, "Not Found", COMMENT)),
    ("assignees that are a string", call("POST", ISSUES, json={"title": "t", "assignees": "a"}),
     refused(422, "Invalid request.\n\nFor 'properties/assignees', \"a\" is not an array.",
             CREATE)),
    *((f"listing by {name}={value}", call("GET", ISSUES, params={name: value}),
       invalid(LIST, field("Issue", "invalid", name, value=value)))
      for name, value in [("state", "opened"), ("sort", "created_at"), ("direction", "down"),
                          ("since", "yesterday")]),
    *((f"{was} issue: {body}", at_state(was, body), invalid(UPDATE, field(
        "Issue", "invalid", name, value=body[name])))
      for was, body, name in [
          ("open", {"state": "shut"}, "state"),
          ("open", {"state": "closed", "state_reason": "wontfix"}, "state_reason"),
          ("open", {"state": "closed", "state_reason": "reopened"}, "state_reason"),
          ("closed", {"state": "open", "state_reason": "completed"}, "state_reason")]),
    # -- comments
    ("a comment without a body", call("POST", f"{ISSUES}/1/comments", json={}),
     invalid(COMMENT, field("IssueComment", "missing_field", "body"))),
    ("a comment of 65537", call("POST", f"{ISSUES}/1/comments", json={"body": TOO_LONG}),
     invalid(COMMENT, field("IssueComment", "unprocessable", "data",
                            message="Body is too long (maximum is 65536 characters)"))),
    ("a comment that is no string", call("POST", f"{ISSUES}/1/comments", json={"body": 7}),
     refused(422, "Invalid request.\n\nFor 'properties/body', 7 is not a string.", COMMENT)),
    # Apps may not comment on a locked issue (probot/stale#25, renovatebot/renovate#6215).
    ("a comment on a locked issue", after(lambda gh: gh.api.lock(REPO, 1, "too heated"), call(
        "POST", f"{ISSUES}/1/comments", json={"body": "Resolved"})), Answer(403, {
        "message": "Unable to create comment because issue is locked.",
        "documentation_url": "https://docs.github.com/articles/locking-conversations/"})),
    # -- where issues are not: disabled (410), unknown (404 with the endpoint's docs)
    *((f"issues disabled: {method} {path}",
       call(method, f"/repos/pytorch/test-infra{path}", json=body),
       refused(410, "Issues are disabled for this repo", docs))
      for method, path, body, docs in [
          ("GET", "/issues", None, LIST), ("POST", "/issues", {"title": "t"}, CREATE),
          ("GET", "/issues/1", None, f"{DOCS}/issues/issues#get-an-issue"),
          ("PATCH", "/issues/1", {"state": "closed"}, UPDATE),
          ("GET", "/issues/1/comments", None, f"{DOCS}/issues/comments#list-issue-comments"),
          ("POST", "/issues/1/comments", {"body": "b"}, COMMENT)]),
    *((f"{method} {path}", call(method, path, json={"body": "b"} if method != "GET" else None),
       refused(404, "Not Found", f"https://docs.github.com/{docs}"))
      for method, path, docs in [
          ("GET", "/repos/pytorch/nowhere/issues", "rest/issues/issues#list-repository-issues"),
          ("GET", f"{ISSUES}/99", "rest/issues/issues#get-an-issue"),
          ("POST", f"{ISSUES}/99/comments", "rest/issues/comments#create-an-issue-comment"),
          ("GET", f"/repos/{REPO}/pulls", "rest"), ("GET", f"{ISSUES}/", "rest"),
          ("DELETE", f"{ISSUES}/1", "rest"), ("PUT", ISSUES, "rest")]),
    ("github.com's page of an issue that is not there", page_for_people(f"/{REPO}/issues/99"),
     Answer(404, Like(".*Page not found.*"))),
    ("github.com's issues of a repository that is not there",
     page_for_people("/nobody/nothing/issues"), Answer(404, Like(".*Page not found.*"))),
    # -- permissions: a token's, named in X-Accepted-GitHub-Permissions
    ("a reader creating an issue", as_reader("POST", ISSUES, {"title": "t"}), Answer(
        403, Holding(message="Resource not accessible by personal access token"),
        {"x-accepted-github-permissions": "issues=write"})),
    ("a reader commenting", as_reader("POST", f"{ISSUES}/1/comments", {"body": "b"}), Answer(
        403, Holding(message="Resource not accessible by personal access token"),
        {"x-accepted-github-permissions": "issues=write; pull_requests=write"})),
    # -- limits
    ("content past the minute's", content_past_a_minute, limited(403, CONTENT, SECOND, {
        "retry-after": "40", "x-ratelimit-remaining": Like("(?!0$).*")})),
    ("content past the hour's", content_past_an_hour, limited(403, CONTENT, SECOND, {
        "retry-after": str(3600 - 120)})),
    ("a secondary limit with retry-after",
     after(lambda gh: gh.api.refuse_next(status=403, retry_after=30), call("GET", ISSUES)),
     limited(403, SECONDARY, SECOND, {"retry-after": "30"})),
    ("a secondary limit as 429 without retry-after",
     after(lambda gh: gh.api.refuse_next(status=429, retry_after=None),
           call("POST", ISSUES, json={"title": "t"})),
     limited(429, SECONDARY, SECOND, {"retry-after": None})),
    *((f"past the hour's quota: {status}", past_the_quota(status), limited(
        status, PRIMARY, headers={"x-ratelimit-remaining": "0"})) for status in (403, 429)),
    # -- GitHub down
    *((f"an outage: {status}", after(lambda gh, s=status: gh.api.fail_next(status=s), call(
        "POST", ISSUES, json={"title": "t"})), refused(status, message))
      for status, message in [(502, "Server Error"), (503, "Service Unavailable")]),
    # -- GitHub Apps: the App's own endpoints take its JWT only...
    *((f"{what} with {name}", with_jwt(authorization, method, path), Answer(401, Holding(
        message=message)))
      for name, authorization, message in JWTS for what, method, path in APP_PATHS),
    ("a token for another App's installation", mint_for(theirs), refused(404, "Not Found", MINT)),
    ("a token for no installation", mint_for(lambda gh: 1), refused(404, "Not Found", MINT)),
    ("an installation on the owner's other repositories", installed_elsewhere,
     Answer(404, Holding(message="Not Found"))),
    # ...and its installation's token lasts an hour, on its repositories, with its permissions.
    ("an installation token an hour on", as_installation("GET", ISSUES, later_s=3600),
     refused(401, "Bad credentials")),
    ("a revoked installation token", as_installation("GET", ISSUES, revoked=True),
     refused(401, "Bad credentials")),
    ("an installation token on a repository it was not given",
     as_installation("GET", ISSUES, repos=("pytorch/vision",)),
     Answer(404, Holding(message="Not Found"))),
    ("an installation that may read issues, writing one", as_installation(
        "POST", ISSUES, permissions={"issues": "read", "metadata": "read"}), Answer(
        403, Holding(message="Resource not accessible by integration"),
        {"x-accepted-github-permissions": "issues=write"})),
]  # fmt: skip


@pytest.mark.parametrize(
    ("ask", "expected"), [pytest.param(ask, expected, id=name) for name, ask, expected in ROWS]
)
async def test_github_refuses_it_so(github: Github, ask: Ask, expected: Answer) -> None:
    assert_answered(await ask(github), expected)
    assert github.unchanged, "a refused request changes nothing"
