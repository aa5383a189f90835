"""The GitHub issues stand-in answers as GitHub's REST API does (docs.github.com/rest/issues): what
a client of GitHub would notice, from the token and User-Agent checks to the issue and comment
shapes, the `link` pages, ETags, the rate limits and the switches that make GitHub misbehave."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from sandbox.github_issues import TOKEN, GithubIssues
from sandbox.serve import serve_in_thread

START = 1_750_000_000.0  # 2025-06-15T15:06:40Z
REPO = "pytorch/pytorch"
ISSUES = f"/repos/{REPO}/issues"
CREATE_DOCS = "https://docs.github.com/rest/issues/issues#create-an-issue"
HEADERS = {"User-Agent": "queuepilot-tests", "Accept": "application/vnd.github+json"}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def gh(clock: Clock) -> GithubIssues:
    api = GithubIssues(base_url="http://api.gh.test", html_url_base="http://gh.test", clock=clock)
    api.repo(REPO)
    return api


def client(gh: GithubIssues, token: str | None = TOKEN) -> httpx.AsyncClient:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=gh.app)
    return httpx.AsyncClient(transport=transport, base_url=gh.base_url, headers=HEADERS | auth)


@pytest.fixture
async def http(gh: GithubIssues) -> AsyncIterator[httpx.AsyncClient]:
    async with client(gh) as c:
        yield c


# -- the door: token, User-Agent, API version -------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "status", "message"),
    [
        (None, 401, "Requires authentication"),
        ("Bearer ghp_not-a-token", 401, "Bad credentials"),
        (f"Basic {TOKEN}", 401, "Bad credentials"),
        (f"Bearer {TOKEN}", 200, None),
        (f"token {TOKEN}", 200, None),
    ],
)
async def test_the_token_goes_in_authorization_as_bearer_or_token(
    gh: GithubIssues, authorization: str | None, status: int, message: str | None
) -> None:
    async with client(gh, token=None) as http:
        headers = {"Authorization": authorization} if authorization else {}
        answer = await http.get(ISSUES, headers=headers)

    assert answer.status_code == status
    if message:
        assert answer.json() == {
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": "401",
        }
        assert answer.headers["x-ratelimit-used"] == "0", "an unauthenticated call spends nothing"


@pytest.mark.parametrize("user_agent", [None, ""])
async def test_a_request_without_a_user_agent_is_refused(
    gh: GithubIssues, http: httpx.AsyncClient, user_agent: str | None
) -> None:
    request = http.build_request("GET", ISSUES)
    if user_agent is None:
        del request.headers["user-agent"]
    else:
        request.headers["user-agent"] = user_agent

    answer = await http.send(request)

    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.text.startswith(
        "Request forbidden by administrative rules. Please make sure your request has a "
        "User-Agent header"
    )


@pytest.mark.parametrize(
    ("sent", "status", "selected"),
    [(None, 200, "2022-11-28"), ("2022-11-28", 200, "2022-11-28"),
     ("2026-03-10", 200, "2026-03-10"), ("v3", 400, None)],
)  # fmt: skip
async def test_the_api_version_header_selects_a_supported_version_or_is_refused(
    http: httpx.AsyncClient, sent: str | None, status: int, selected: str | None
) -> None:
    headers = {"X-GitHub-Api-Version": sent} if sent else {}

    answer = await http.get(ISSUES, headers=headers)

    assert answer.status_code == status
    assert answer.headers.get("x-github-api-version-selected") == selected
    if status == 400:
        assert answer.json()["message"] == (
            'The version you specified in the "X-GitHub-Api-Version" request header, "v3", is '
            "not a supported version. The following versions are currently supported: "
            '"2026-03-10" (most recent), "2022-11-28".'
        )


async def test_every_api_answer_carries_the_rate_limit_and_request_headers(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    answers = [
        await http.get(ISSUES),
        await http.post(ISSUES, json={}),
        await http.get(f"{ISSUES}/404"),
        await http.get("/rate_limit"),
    ]

    for answer in answers:
        assert {
            "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset",
            "x-ratelimit-resource", "x-github-request-id", "x-github-api-version-selected",
        } <= set(answer.headers), answer.status_code  # fmt: skip
        assert answer.headers["x-ratelimit-resource"] == "core"
    assert [a.headers["x-ratelimit-used"] for a in answers] == ["1", "2", "3", "3"]
    assert len({a.headers["x-github-request-id"] for a in answers}) == 4
    assert gh.calls == [
        ("GET", ISSUES, 200),
        ("POST", ISSUES, 422),
        ("GET", f"{ISSUES}/404", 404),
        ("GET", "/rate_limit", 200),
    ]


# -- issues -----------------------------------------------------------------------------------


async def test_creating_an_issue_answers_201_with_its_location_and_creates_missing_labels(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    answer = await http.post(ISSUES, json={
        "title": "ci: sev: linux-jammy queue stuck", "body": "Queue above 2h for 30 min.",
        "labels": ["bug", {"name": "ci: sev"}]})  # fmt: skip

    assert answer.status_code == 201
    issue = answer.json()
    assert answer.headers["location"] == issue["url"] == f"{gh.base_url}{ISSUES}/1"
    assert issue["html_url"] == "http://gh.test/pytorch/pytorch/issues/1"
    assert issue["comments_url"] == f"{gh.base_url}{ISSUES}/1/comments"
    assert (issue["number"], issue["state"], issue["state_reason"]) == (1, "open", None)
    assert issue["created_at"] == issue["updated_at"] == "2025-06-15T15:06:40Z"
    assert issue["closed_at"] is None and issue["locked"] is False
    assert (issue["user"]["login"], issue["user"]["type"]) == ("queuepilot[bot]", "Bot")
    labels = {label["name"]: label for label in issue["labels"]}
    assert labels["bug"]["default"] is True, "GitHub's own label, there from the start"
    assert labels["ci: sev"]["default"] is False, "created by the call"
    assert set(labels["ci: sev"]) == {
        "id", "node_id", "url", "name", "color", "default", "description"}  # fmt: skip
    fetched = await http.get(answer.headers["location"])
    assert fetched.json() == issue
    numbered = await http.post(ISSUES, json={"title": 42})
    assert (numbered.json()["number"], numbered.json()["title"]) == (2, "42"), "an integer title"


@pytest.mark.parametrize("body", [{}, {"title": ""}, {"title": None, "body": "no title"}])
async def test_an_issue_without_a_title_is_refused_as_missing_field(
    http: httpx.AsyncClient, body: dict
) -> None:
    answer = await http.post(ISSUES, json=body)

    assert answer.status_code == 422
    assert answer.json() == {
        "message": "Validation Failed",
        "errors": [{"resource": "Issue", "code": "missing_field", "field": "title"}],
        "documentation_url": CREATE_DOCS,
        "status": "422",
    }
    assert (await http.get(ISSUES, params={"state": "all"})).json() == []


@pytest.mark.parametrize(("field", "most"), [("title", 256), ("body", 65536)])
async def test_a_title_or_body_past_githubs_length_is_refused(
    http: httpx.AsyncClient, field: str, most: int
) -> None:
    fits = await http.post(ISSUES, json={"title": "t", field: "x" * most})
    too_long = await http.post(ISSUES, json={"title": "t", field: "x" * (most + 1)})

    assert fits.status_code == 201
    assert too_long.status_code == 422
    assert too_long.json()["errors"] == [{
        "resource": "Issue", "code": "custom", "field": field,
        "message": f"{field} is too long (maximum is {most} characters)"}]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [(b"{title: 1", 400, "Problems parsing JSON"),
     (b'["title"]', 400, "Body should be a JSON object"),
     (b'{"title": ["a"]}', 422, "Invalid request.\n\nFor 'properties/title', [\"a\"] is not a "
                                "string or integer."),
     (b'{"title": "t", "labels": "bug"}', 422, "Invalid request.\n\nFor 'properties/labels', "
                                                '"bug" is not an array.')],
)  # fmt: skip
async def test_a_body_that_is_not_the_documented_json_is_refused(
    http: httpx.AsyncClient, content: bytes, status: int, message: str
) -> None:
    answer = await http.post(ISSUES, content=content, headers={"Content-Type": "application/json"})

    assert answer.status_code == status
    assert answer.json()["message"] == message
    assert answer.json()["documentation_url"] == CREATE_DOCS


@pytest.mark.parametrize(
    ("query", "numbers"),
    [({}, [4, 2, 1]),
     ({"labels": "ci: sev,module: infra"}, [1]),
     ({"labels": "ci: sev,module: infra", "state": "all"}, [3, 1]),
     ({"labels": "CI: SEV"}, [2, 1]),
     ({"state": "closed"}, [3]),
     ({"creator": "octocat"}, [4]),
     ({"direction": "asc"}, [1, 2, 4]),
     ({"sort": "updated", "state": "all"}, [2, 4, 3, 1]),
     ({"since": "2025-06-15T15:08:40Z", "state": "all"}, [4, 3, 2])],
)  # fmt: skip
async def test_listing_filters_by_every_label_state_creator_and_since(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock, query: dict, numbers: list[int]
) -> None:
    for title, labels, state, login in [
        ("A", ("ci: sev", "module: infra"), "open", "pytorch-alerting[bot]"),
        ("B", ("ci: sev",), "open", "pytorch-alerting[bot]"),
        ("C", ("ci: sev", "module: infra"), "closed", "pytorch-alerting[bot]"),
        ("D", ("module: infra",), "open", "octocat"),
    ]:
        gh.seed_issue(REPO, title, labels=labels, state=state, user_login=login)
        clock.now += 60
    await http.patch(f"{ISSUES}/2", json={"body": "touched last"})

    answer = await http.get(ISSUES, params=query)

    assert answer.status_code == 200
    assert [issue["number"] for issue in answer.json()] == numbers


@pytest.mark.parametrize(
    ("name", "value"),
    [("state", "opened"), ("sort", "created_at"), ("direction", "down"), ("since", "yesterday")],
)
async def test_listing_refuses_a_value_the_docs_do_not_list(
    http: httpx.AsyncClient, name: str, value: str
) -> None:
    answer = await http.get(ISSUES, params={name: value})

    assert answer.status_code == 422
    assert answer.json()["message"] == "Validation Failed"
    assert answer.json()["errors"] == [
        {"resource": "Issue", "code": "invalid", "field": name, "value": value}
    ]


async def test_pages_are_followed_through_the_link_header_as_given(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    for n in range(7):
        gh.seed_issue(REPO, f"alert {n + 1}")
        clock.now += 1
    numbers, pages, url = [], [], f"{ISSUES}?per_page=3"

    while url:
        answer = await http.get(url)
        pages.append(answer)
        numbers += [issue["number"] for issue in answer.json()]
        url = answer.links.get("next", {}).get("url")

    assert numbers == [7, 6, 5, 4, 3, 2, 1]
    assert len(pages) == 3
    first, middle, last = (page.links for page in pages)
    assert first["next"]["url"].startswith(f"{gh.base_url}/repositories/"), "GitHub's own form"
    assert first["last"]["url"].endswith("per_page=3&page=3")
    assert set(middle) == {"prev", "next", "last", "first"}
    assert set(last) == {"prev", "first"}
    clamped = await http.get(ISSUES, params={"per_page": 500})
    assert len(clamped.json()) == 7 and "link" not in clamped.headers


async def test_a_conditional_get_with_the_etag_answers_304_and_spends_nothing(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.seed_issue(REPO, "alert")
    first = await http.get(f"{ISSUES}/1")

    again = await http.get(f"{ISSUES}/1", headers={"If-None-Match": first.headers["etag"]})

    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"]
    await http.post(f"{ISSUES}/1/comments", json={"body": "still stuck"})
    changed = await http.get(f"{ISSUES}/1", headers={"If-None-Match": first.headers["etag"]})
    assert changed.status_code == 200
    assert changed.json()["comments"] == 1
    assert changed.headers["etag"] != first.headers["etag"]


async def test_closing_and_reopening_set_the_reason_and_closed_at(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.seed_issue(REPO, "alert")
    clock.now += 60

    closed = (await http.patch(f"{ISSUES}/1", json={
        "state": "closed", "state_reason": "not_planned"})).json()  # fmt: skip
    clock.now += 60
    reopened = (await http.patch(f"{ISSUES}/1", json={"state": "open"})).json()
    clock.now += 60
    done = (await http.patch(f"{ISSUES}/1", json={"state": "closed"})).json()
    ignored = (await http.patch(f"{ISSUES}/1", json={"state_reason": "not_planned"})).json()

    assert (closed["state"], closed["state_reason"]) == ("closed", "not_planned")
    assert closed["closed_at"] == closed["updated_at"] == "2025-06-15T15:07:40Z"
    assert closed["closed_by"]["login"] == "queuepilot[bot]"
    assert (reopened["state"], reopened["state_reason"]) == ("open", "reopened")
    assert reopened["closed_at"] is None and reopened["closed_by"] is None
    assert (done["state_reason"], done["closed_at"]) == ("completed", "2025-06-15T15:09:40Z")
    assert ignored["state_reason"] == "completed", "ignored unless `state` is changed (docs)"


@pytest.mark.parametrize(
    ("was", "body", "field"),
    [("open", {"state": "shut"}, "state"),
     ("open", {"state": "closed", "state_reason": "wontfix"}, "state_reason"),
     ("open", {"state": "closed", "state_reason": "reopened"}, "state_reason"),
     ("closed", {"state": "open", "state_reason": "completed"}, "state_reason")],
)  # fmt: skip
async def test_an_update_with_a_state_or_reason_that_does_not_fit_is_refused(
    gh: GithubIssues, http: httpx.AsyncClient, was: str, body: dict, field: str
) -> None:
    gh.seed_issue(REPO, "alert", state=was)

    answer = await http.patch(f"{ISSUES}/1", json=body)

    assert answer.status_code == 422
    assert [(e["field"], e["code"]) for e in answer.json()["errors"]] == [(field, "invalid")]
    assert gh.issue(REPO, 1)["state"] == was, "nothing changed"


# -- comments ---------------------------------------------------------------------------------


async def test_a_comment_is_created_counted_and_listed_oldest_first(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.seed_issue(REPO, "alert")
    first = await http.post(f"{ISSUES}/1/comments", json={"body": "Incident opened"})
    clock.now += 30
    second = await http.post(f"{ISSUES}/1/comments", json={"body": "Resolved"})

    assert first.status_code == second.status_code == 201
    comment = first.json()
    assert first.headers["location"] == comment["url"]
    assert comment["url"] == f"{gh.base_url}/repos/{REPO}/issues/comments/{comment['id']}"
    assert comment["html_url"] == f"http://gh.test/{REPO}/issues/1#issuecomment-{comment['id']}"
    assert comment["issue_url"] == f"{gh.base_url}{ISSUES}/1"
    assert comment["user"]["login"] == "queuepilot[bot]"
    assert {"node_id", "created_at", "updated_at", "author_association"} <= set(comment)
    issue = (await http.get(f"{ISSUES}/1")).json()
    assert issue["comments"] == 2
    assert issue["updated_at"] == second.json()["created_at"] == "2025-06-15T15:07:10Z"
    listed = await http.get(f"{ISSUES}/1/comments")
    assert [c["body"] for c in listed.json()] == ["Incident opened", "Resolved"]
    since = await http.get(f"{ISSUES}/1/comments", params={"since": "2025-06-15T15:07:10Z"})
    assert [c["body"] for c in since.json()] == ["Resolved"]


@pytest.mark.parametrize(
    ("body", "error"),
    [({}, {"resource": "IssueComment", "code": "missing_field", "field": "body"}),
     ({"body": "x" * 65537}, {"resource": "IssueComment", "code": "unprocessable", "field": "data",
                              "message": "Body is too long (maximum is 65536 characters)"})],
)  # fmt: skip
async def test_a_comment_without_a_body_or_too_long_is_refused(
    gh: GithubIssues, http: httpx.AsyncClient, body: dict, error: dict
) -> None:
    gh.seed_issue(REPO, "alert")

    answer = await http.post(f"{ISSUES}/1/comments", json=body)

    assert answer.status_code == 422
    assert answer.json()["errors"] == [error]
    assert gh.comments(REPO, 1) == []


async def test_a_locked_issue_refuses_the_apps_comment(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.seed_issue(REPO, "alert")
    gh.lock(REPO, 1, "too heated")

    answer = await http.post(f"{ISSUES}/1/comments", json={"body": "Resolved"})

    assert answer.status_code == 403
    assert answer.json()["message"] == "Unable to create comment because issue is locked."
    assert (await http.get(f"{ISSUES}/1")).json()["active_lock_reason"] == "too heated"


# -- repositories, refusals -------------------------------------------------------------------


async def test_the_repository_tells_whether_it_has_issues_and_the_callers_role(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.repo("pytorch/test-infra", has_issues=False, private=True)

    pytorch = await http.get(f"/repos/{REPO}")
    infra = await http.get("/repos/PyTorch/Test-Infra")

    assert pytorch.json()["full_name"] == REPO
    assert pytorch.json()["has_issues"] is True
    assert pytorch.json()["permissions"] == {
        "admin": False, "maintain": False, "push": True, "triage": True, "pull": True}  # fmt: skip
    assert pytorch.headers["x-accepted-github-permissions"] == "metadata=read"
    assert (infra.json()["has_issues"], infra.json()["visibility"]) == (False, "private")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("GET", "/issues", None), ("POST", "/issues", {"title": "t"}), ("GET", "/issues/1", None),
     ("PATCH", "/issues/1", {"state": "closed"}), ("GET", "/issues/1/comments", None),
     ("POST", "/issues/1/comments", {"body": "b"})],
)  # fmt: skip
async def test_a_repository_with_issues_disabled_answers_410(
    gh: GithubIssues, http: httpx.AsyncClient, method: str, path: str, body: dict | None
) -> None:
    gh.repo("pytorch/test-infra", has_issues=False)

    answer = await http.request(method, f"/repos/pytorch/test-infra{path}", json=body)

    assert answer.status_code == 410
    assert answer.json()["message"] == "Issues are disabled for this repo"


@pytest.mark.parametrize(
    ("method", "path", "docs"),
    [("GET", "/repos/pytorch/nowhere/issues", "rest/issues/issues#list-repository-issues"),
     ("GET", f"{ISSUES}/99", "rest/issues/issues#get-an-issue"),
     ("POST", f"{ISSUES}/99/comments", "rest/issues/comments#create-an-issue-comment"),
     ("GET", f"/repos/{REPO}/pulls", "rest"),
     ("GET", f"{ISSUES}/", "rest"),
     ("DELETE", f"{ISSUES}/1", "rest"),
     ("PUT", ISSUES, "rest")],
)  # fmt: skip
async def test_an_unknown_repository_issue_route_or_method_answers_404(
    gh: GithubIssues, http: httpx.AsyncClient, method: str, path: str, docs: str
) -> None:
    gh.seed_issue(REPO, "alert")

    answer = await http.request(method, path, json={"body": "b"} if method != "GET" else None)

    assert answer.status_code == 404
    assert answer.json() == {
        "message": "Not Found",
        "documentation_url": f"https://docs.github.com/{docs}",
        "status": "404",
    }


async def test_a_token_that_may_only_read_issues_is_refused_writes_naming_the_permission(
    gh: GithubIssues,
) -> None:
    gh.read_only_tokens.add("github_pat_read-only")
    gh.seed_issue(REPO, "alert")

    async with client(gh, token="github_pat_read-only") as http:
        listed = await http.get(ISSUES)
        created = await http.post(ISSUES, json={"title": "t"})
        commented = await http.post(f"{ISSUES}/1/comments", json={"body": "b"})

    assert listed.status_code == 200
    assert listed.headers["x-accepted-github-permissions"] == "issues=read"
    assert created.status_code == commented.status_code == 403
    assert created.json()["message"] == "Resource not accessible by personal access token"
    assert created.headers["x-accepted-github-permissions"] == "issues=write"
    assert commented.headers["x-accepted-github-permissions"] == "issues=write; pull_requests=write"
    assert gh.comments(REPO, 1) == [] and len(listed.json()) == 1


# -- limits -----------------------------------------------------------------------------------


async def test_content_past_the_minutes_budget_waits_for_retry_after(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.content_per_minute = 2
    await http.post(ISSUES, json={"title": "one"})
    await http.post(ISSUES, json={"title": "two"})
    clock.now += 20

    refused = await http.post(ISSUES, json={"title": "three"})
    read = await http.get(ISSUES)
    clock.now += 40
    created = await http.post(ISSUES, json={"title": "three"})

    assert refused.status_code == 403
    assert refused.headers["retry-after"] == "40"
    assert refused.json()["message"].startswith("You have exceeded a secondary rate limit")
    assert refused.json()["documentation_url"].endswith("#about-secondary-rate-limits")
    assert refused.headers["x-ratelimit-remaining"] != "0", "not the primary limit"
    assert read.status_code == 200, "reading creates no content"
    assert created.status_code == 201
    assert created.json()["number"] == 3


async def test_content_past_the_hours_budget_waits_for_the_hour(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.content_per_hour = 2
    await http.post(ISSUES, json={"title": "one"})
    clock.now += 120
    await http.post(f"{ISSUES}/1/comments", json={"body": "two"})

    refused = await http.patch(f"{ISSUES}/1", json={"state": "closed"})

    assert refused.status_code == 403
    assert refused.headers["retry-after"] == str(3600 - 120)


@pytest.mark.parametrize(("status", "retry_after"), [(403, 30), (429, None)])
async def test_a_secondary_limit_switched_on_refuses_then_lets_through(
    gh: GithubIssues, http: httpx.AsyncClient, status: int, retry_after: int | None
) -> None:
    gh.refuse_next(2, status=status, retry_after=retry_after)

    refused = [await http.get(ISSUES), await http.post(ISSUES, json={"title": "t"})]
    after = await http.post(ISSUES, json={"title": "t"})

    assert [r.status_code for r in refused] == [status, status]
    assert [r.headers.get("retry-after") for r in refused] == [
        None if retry_after is None else str(retry_after)
    ] * 2
    assert "secondary rate limit" in refused[0].json()["message"]
    assert after.status_code == 201
    assert after.json()["number"] == 1, "the refused creation created nothing"


@pytest.mark.parametrize("status", [403, 429])
async def test_past_the_primary_quota_every_call_is_refused_until_the_reset(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock, status: int
) -> None:
    gh.quota, gh.limit_status = 3, status
    spent = [await http.get(ISSUES) for _ in range(3)]

    refused = await http.get(ISSUES)
    rate = await http.get("/rate_limit")
    clock.now = int(refused.headers["x-ratelimit-reset"])
    renewed = await http.get(ISSUES)

    assert [r.headers["x-ratelimit-remaining"] for r in spent] == ["2", "1", "0"]
    assert refused.status_code == status
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert refused.json()["message"].startswith("API rate limit exceeded for user ID 190000001.")
    assert rate.status_code == 200, "GET /rate_limit answers without spending"
    assert rate.json()["resources"]["core"] == rate.json()["rate"] == {
        "limit": 3, "used": 3, "remaining": 0,
        "reset": int(refused.headers["x-ratelimit-reset"])}  # fmt: skip
    assert set(rate.json()["resources"]) >= {"core", "search"}
    assert renewed.status_code == 200
    assert renewed.headers["x-ratelimit-remaining"] == "2"


# -- GitHub misbehaving -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [502, 503])
async def test_an_outage_answers_5xx_then_passes(
    gh: GithubIssues, http: httpx.AsyncClient, status: int
) -> None:
    gh.fail_next(2, status=status)

    failed = [await http.get(ISSUES), await http.post(ISSUES, json={"title": "t"})]
    after = await http.get(ISSUES, params={"state": "all"})

    assert [f.status_code for f in failed] == [status, status]
    assert after.status_code == 200
    assert after.json() == [], "the failed creation created nothing"


async def test_a_hung_call_outlasts_the_clients_patience_until_released(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gate = gh.hang_next()

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(http.get(ISSUES), timeout=0.05)
    gate.set()

    assert (await http.get(ISSUES)).status_code == 200


async def test_a_lost_answer_leaves_the_comment_in_place_for_the_lookup(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.seed_issue(REPO, "alert")
    gh.lose_next_answers()

    with pytest.raises(httpx.RemoteProtocolError):
        await http.post(f"{ISSUES}/1/comments", json={"body": "Resolved"})
    landed = await http.get(f"{ISSUES}/1/comments")
    after = await http.post(f"{ISSUES}/1/comments", json={"body": "Reopened"})

    assert [c["body"] for c in landed.json()] == ["Resolved"], "the write took effect"
    assert after.status_code == 201


def test_over_a_socket_a_lost_answer_and_a_hang_fail_as_a_client_sees_them(
    gh: GithubIssues,
) -> None:
    gh.seed_issue(REPO, "alert")
    with serve_in_thread(gh.app) as server:
        gh.base_url = server.url
        headers = HEADERS | {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=5) as http:
            gh.lose_next_answers()
            with pytest.raises(httpx.RemoteProtocolError):
                http.post(f"{ISSUES}/1/comments", json={"body": "Resolved"})
            gate = gh.hang_next()
            with pytest.raises(httpx.ReadTimeout):
                http.get(ISSUES, timeout=0.2)
            gate.set()
            listed = http.get(f"{ISSUES}/1/comments")

    assert [c["body"] for c in listed.json()] == ["Resolved"]
    assert listed.json()[0]["url"].startswith(server.url), "URLs follow base_url"


async def test_concurrent_creations_get_distinct_consecutive_numbers(
    http: httpx.AsyncClient,
) -> None:
    answers = await asyncio.gather(
        *(http.post(ISSUES, json={"title": f"alert {n}"}) for n in range(20))
    )

    assert sorted(a.json()["number"] for a in answers) == list(range(1, 21))


# -- the page for people ----------------------------------------------------------------------


async def test_the_issue_page_shows_the_issue_escaped_with_its_comments_in_order(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    issue = gh.seed_issue(REPO, "<script>alert(1)</script> queue stuck", body="<b>2h</b> & more",
                          labels=("ci: sev",))  # fmt: skip
    await http.post(f"{ISSUES}/1/comments", json={"body": "Incident opened"})
    await http.post(f"{ISSUES}/1/comments", json={"body": "<i>Resolved</i>"})

    async with client(gh, token=None) as browser:
        page = await browser.get(urlsplit(issue["html_url"]).path)
        missing = await browser.get(f"/{REPO}/issues/99")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; queue stuck" in page.text
    assert "<pre>&lt;b&gt;2h&lt;/b&gt; &amp; more</pre>" in page.text
    assert "<li>ci: sev</li>" in page.text and "Open" in page.text
    assert page.text.index("Incident opened") < page.text.index("&lt;i&gt;Resolved&lt;/i&gt;")
    assert missing.status_code == 404


async def test_the_issues_list_links_each_issue_newest_first_escaped(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.seed_issue(REPO, "<script>x</script> first")
    gh.seed_issue(REPO, "second", state="closed")
    async with client(gh, token=None) as browser:
        listed = await browser.get(f"/{REPO}/issues")
        unknown = await browser.get("/nobody/nothing/issues")
    assert listed.status_code == 200 and "<script>" not in listed.text
    assert listed.text.index("#2 second") < listed.text.index("#1 &lt;script&gt;")
    assert f'href="{gh.html_url_base}/{REPO}/issues/1"' in listed.text  # as html_url
    assert unknown.status_code == 404
