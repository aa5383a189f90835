"""What the GitHub stand-in (`sandbox.github_issues`, with its Apps) does that no test of the bot
reaches: the headers of every answer, the listing's other filters, `link` pages, ETags, the
quota's renewal, concurrent creations, an App's installation by organization or client ID, and
github.com's pages the demo links to. What it refuses is test_github_refusals.py; creating,
commenting, closing, finding the alert's issue, lost answers, hangs and the App's tokens are
tested through the bot (tests/system/test_alert_issue*.py, tests/backends/test_github_auth.py,
tests/checks/test_issues_probe.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from sandbox.github_issues import TOKEN, GithubIssues
from tests.support.github_app import APP_ID, CLIENT_ID, public_pem, signed

START = 1_750_000_000.0  # 2025-06-15T15:06:40Z
REPO = "pytorch/pytorch"
ISSUES = f"/repos/{REPO}/issues"
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


async def test_every_answer_says_the_version_the_quota_and_the_request(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    answers = [
        await http.get(ISSUES, headers={"Authorization": f"token {TOKEN}"}),  # the older scheme
        await http.post(ISSUES, json={"title": 42}),  # the schema's "string or integer"
        await http.get(f"{ISSUES}/404", headers={"X-GitHub-Api-Version": "2026-03-10"}),
        await http.get("/rate_limit"),
    ]

    assert [a.status_code for a in answers] == [200, 201, 404, 200]
    assert answers[0].headers["x-accepted-github-permissions"] == "issues=read"
    assert answers[1].json()["title"] == "42"
    for answer in answers:
        assert {
            "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset",
            "x-ratelimit-resource", "x-github-request-id",
        } <= set(answer.headers), answer.status_code  # fmt: skip
    selected = [a.headers["x-github-api-version-selected"] for a in answers]
    assert selected == ["2022-11-28", "2022-11-28", "2026-03-10", "2022-11-28"]
    assert [a.headers["x-ratelimit-used"] for a in answers] == ["1", "2", "3", "3"]
    assert len({a.headers["x-github-request-id"] for a in answers}) == 4
    assert gh.calls == [
        ("GET", ISSUES, 200),
        ("POST", ISSUES, 201),
        ("GET", f"{ISSUES}/404", 404),
        ("GET", "/rate_limit", 200),
    ]


async def test_the_quota_is_whole_again_at_its_reset_and_rate_limit_costs_none(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.limits.limit = 3
    spent = [await http.get(ISSUES) for _ in range(4)]
    rate = await http.get("/rate_limit")
    clock.now = int(spent[-1].headers["x-ratelimit-reset"])
    renewed = await http.get(ISSUES)

    assert [r.headers["x-ratelimit-remaining"] for r in spent] == ["2", "1", "0", "0"]
    assert rate.status_code == 200
    assert rate.json()["resources"]["core"] == rate.json()["rate"] == {
        "limit": 3, "used": 3, "remaining": 0,
        "reset": int(spent[-1].headers["x-ratelimit-reset"])}  # fmt: skip
    assert set(rate.json()["resources"]) >= {"core", "search"}
    assert renewed.status_code == 200 and renewed.headers["x-ratelimit-remaining"] == "2"


async def test_an_app_finds_its_installation_on_an_organization_and_by_its_client_id(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.apps.register(APP_ID, public_pem(), client_id=CLIENT_ID)
    on_org = gh.apps.install(APP_ID, "meta")
    usual = {"iat": int(clock.now) - 60, "exp": int(clock.now) + 540}

    by_org = await http.get(
        "/orgs/meta/installation",
        headers={"Authorization": f"Bearer {signed(usual | {'iss': APP_ID})}"},
    )
    by_client = await http.get(
        "/orgs/meta/installation",
        headers={"Authorization": f"Bearer {signed(usual | {'iss': CLIENT_ID})}"},
    )

    assert by_org.json()["id"] == by_client.json()["id"] == on_org.id
    assert by_org.json()["repository_selection"] == "all"
    assert by_org.json()["account"]["login"] == "meta"


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


async def test_concurrent_creations_get_distinct_consecutive_numbers(
    http: httpx.AsyncClient,
) -> None:
    answers = await asyncio.gather(
        *(http.post(ISSUES, json={"title": f"alert {n}"}) for n in range(20))
    )

    assert sorted(a.json()["number"] for a in answers) == list(range(1, 21))


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
    assert "<p>&lt;b&gt;2h&lt;/b&gt; &amp; more</p>" in page.text
    assert "<li>ci: sev</li>" in page.text and "Open" in page.text
    assert page.text.index("Incident opened") < page.text.index("&lt;i&gt;Resolved&lt;/i&gt;")
    assert missing.status_code == 404


async def test_the_issue_page_renders_markdown_as_github_does_and_hides_html_comments(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    body = (
        "**Jobs are queueing** in _linux.2xlarge_ · `/queue diagnose 3`\n\n"
        "## Alert details\n\n| Field | Value |\n|---|---|\n| Peak queued \\| jobs | 43 |\n\n"
        "- [Slack thread](https://slack.test/archives/C1/p1)\n- [bad](javascript:alert(1))\n"
        "- issue \\#12 and 2\\*3\n\n<!-- queuepilot:group:abc -->"
    )
    issue = gh.seed_issue(REPO, "Jobs queueing", body=body)
    await http.post(
        f"{ISSUES}/1/comments",
        json={"body": "✅ **Resolved** after 12 min\n<!-- queuepilot:moment:0123abcd -->"},
    )

    async with client(gh, token=None) as browser:
        page = (await browser.get(urlsplit(issue["html_url"]).path)).text

    assert "<strong>Jobs are queueing</strong> in <em>linux.2xlarge</em>" in page
    assert "<code>/queue diagnose 3</code>" in page and "<h2>Alert details</h2>" in page
    assert "<th>Field</th>" in page and "<td>Peak queued | jobs</td>" in page
    assert '<li><a href="https://slack.test/archives/C1/p1">Slack thread</a></li>' in page
    assert 'href="javascript' not in page, "a link GitHub would not make is not made"
    assert "<li>issue #12 and 2*3</li>" in page, "escapes read as the characters they keep"
    assert "<strong>Resolved</strong> after 12 min" in page
    assert "queuepilot:" not in page and "**" not in page and "&lt;!--" not in page


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


async def test_a_transferred_issue_is_found_where_its_location_says_and_gone_from_the_list(
    gh: GithubIssues, http: httpx.AsyncClient
) -> None:
    gh.repo("pytorch/alerting")
    gh.seed_issue(REPO, "[P2] Jobs queueing", labels=("area:alerting",))
    gh.seed_issue("pytorch/alerting", "older")
    gh.transfer_issue(REPO, 1, "pytorch/alerting")

    answer = await http.get(f"{ISSUES}/1")
    there = await http.get(answer.headers["location"])

    assert answer.status_code == 301
    assert there.status_code == 200
    assert there.json()["html_url"] == "http://gh.test/pytorch/alerting/issues/2"
    assert [there.json()[k] for k in ("title", "state")] == ["[P2] Jobs queueing", "open"]
    assert [label["name"] for label in there.json()["labels"]] == ["area:alerting"]
    assert (await http.get(ISSUES)).json() == []
