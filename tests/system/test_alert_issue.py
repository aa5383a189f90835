"""The alert's GitHub issue, end to end: a real bot (or two, on one Redis) against the Slack
emulator and the strict GitHub stand-in (`sandbox.github_issues`), as a CI team sees it: the
issue that alerting-infra opened is found and linked from the root, it gets the thread's link and
one comment per step, an issue queuepilot opened is closed and reopened, and GitHub's limits,
lost answers and refusals never make a comment twice or hold up the incident."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.config import Settings
from bot.render.alert_issue import unlinked
from sandbox.github_issues import TOKEN
from sandbox.github_issues import GithubIssues as GithubStandIn
from sandbox.serve import serve_in_thread
from tests.actions.test_postmortem import files_in_thread
from tests.support.payloads import fixture_json, refired
from tests.support.running import RunningBot, eventually, open_incident, run_bot
from tests.support.slack import CHANNEL, Slack, post_event, slash, thread_texts

REPO = "pytorch/alerting-issues"
TITLE = "[P2] Jobs queueing in autoscaled machines"
LABELS = ("area:alerting", "Pri:P2", "Team:pytorch-dev-infra", "Source:grafana")
FIRING = "grafana/queue-alert-firing.json"
# Generous for a loaded 2-core machine: every wait ends as soon as its condition holds.
WAIT_S = 60
RESOLVED = "grafana/queue-alert-resolved.json"


@pytest.fixture
def github() -> Iterator[GithubStandIn]:
    stand_in = GithubStandIn()
    with serve_in_thread(stand_in.app) as server:
        stand_in.base_url = server.url
        stand_in.repo(REPO)
        yield stand_in
        stand_in.reset_limits()  # nothing stays hung


@pytest.fixture
def issue_settings(
    settings_for: Callable[..., Settings], github: GithubStandIn
) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values = {
            "github_token": TOKEN,
            "github_api_url": github.base_url,
            "github_issues_repo": REPO,
            "github_issues_interval_ms": 20,
            "github_issues_open_after_seconds": 0,  # no alerting-infra beside it here
        }
        return settings_for(**{**values, **overrides})

    return make


def bodies(github: GithubStandIn, number: int) -> list[str]:
    return [str(c["body"]) for c in github.comments(REPO, number)]


def told(github: GithubStandIn, number: int, words: str) -> list[str]:
    return [body for body in bodies(github, number) if words in body]


async def ack(running: RunningBot) -> None:
    assert (await post_event(running.http, slash("ack 1"))).status_code == 200


def root_links(slack: Slack) -> str:
    [root] = slack.emulator.channel_messages(CHANNEL)
    return str(root.blocks)


async def test_alerting_infras_issue_is_found_linked_and_told_each_step_once(
    issue_settings: Callable[..., Settings], github: GithubStandIn, slack: Slack
) -> None:
    other = github.seed_issue(REPO, "[P1] Disk full on the HUD", labels=("area:alerting",))
    issue = github.seed_issue(REPO, TITLE, body="**Alert Details**", labels=LABELS)
    number = issue["number"]
    async with run_bot(issue_settings()) as running:
        root = await open_incident(running, slack)
        await eventually(
            lambda: f"GitHub issue #{number}" in root_links(slack),
            what="the root's issue link",
            timeout=WAIT_S,
        )
        [thread] = await eventually(
            lambda: told(github, number, "Slack thread"), what="link", timeout=WAIT_S
        )
        permalink = re.search(r"\]\((https?://[^)]+)\)", thread)
        assert permalink and root.ts.replace(".", "") in permalink[1]

        await ack(running)
        await eventually(
            lambda: told(github, number, "**Acknowledged**"), what="the ack", timeout=WAIT_S
        )
        await running.send("grafana", fixture_json(RESOLVED))
        [resolved] = await eventually(
            lambda: told(github, number, "**Resolved**"), what="end", timeout=WAIT_S
        )
        assert (await post_event(running.http, slash("postmortem 1"))).status_code == 200
        [write_up] = await eventually(
            lambda: told(github, number, "# Postmortem: incident 1"),
            what="the postmortem",
            timeout=WAIT_S,
        )
        [(_, in_slack)] = await eventually(
            lambda: files_in_thread(slack, root.ts), what="the postmortem in the thread"
        )
    assert "### Summary" in resolved and "### Impact" in resolved
    assert "no jobs source" not in resolved, "no postmortem read any jobs yet: nothing claimed"
    assert "## Timeline" in write_up and "## Questions" in write_up
    # One record: the issue's write-up is the thread's, counts and all, drafted later; only
    # the thread's lists the issue's link, which on the issue would lead to itself.
    assert "| Actions taken | 1, by " in in_slack
    link = f"- GitHub issue: <{github.issue(REPO, number)['html_url']}>\n"
    assert link in in_slack and link.strip() not in write_up
    assert unlinked(in_slack.replace(link, "")).strip() in write_up
    said = bodies(github, number)
    assert len(said) == 4, said  # the thread, ack, resolve, postmortem: never a status
    assert github.issue(REPO, number)["state"] == "open"  # not ours to close
    assert github.comments(REPO, other["number"]) == []


async def test_an_issue_is_opened_closed_on_resolve_and_reopened_when_it_fires_again(
    issue_settings: Callable[..., Settings], github: GithubStandIn, slack: Slack
) -> None:
    async with run_bot(issue_settings(github_issues_open=True)) as running:
        await open_incident(running, slack)
        opened = await eventually(lambda: _issues(github), what="an opened issue", timeout=WAIT_S)
        [issue] = opened
        number = issue["number"]
        assert issue["title"] == TITLE
        assert {label["name"] for label in issue["labels"]} >= {"area:alerting", "Pri:P2"}
        assert "Source:grafana" in {label["name"] for label in issue["labels"]}
        await eventually(
            lambda: f"GitHub issue #{number}" in root_links(slack), what="link", timeout=WAIT_S
        )

        await running.send("grafana", fixture_json(RESOLVED))
        await eventually(
            lambda: github.issue(REPO, number)["state"] == "closed", what="close", timeout=WAIT_S
        )
        assert github.issue(REPO, number)["state_reason"] == "completed"
        await running.send("grafana", refired(fixture_json(FIRING)))
        await eventually(
            lambda: github.issue(REPO, number)["state"] == "open", what="reopen", timeout=WAIT_S
        )
        await eventually(
            lambda: told(github, number, "**Fired again**"), what="said", timeout=WAIT_S
        )
    assert len(_issues(github)) == 1  # the same issue, not a second one


def _issues(github: GithubStandIn) -> list[dict[str, Any]]:
    return github.issues(REPO)


@pytest.mark.slow
async def test_two_replicas_a_lost_answer_and_a_secondary_limit_comment_once(
    issue_settings: Callable[..., Settings], github: GithubStandIn, slack: Slack
) -> None:
    number = github.seed_issue(REPO, TITLE, labels=LABELS)["number"]
    settings = issue_settings()
    async with run_bot(settings) as first, run_bot(settings) as second:
        await open_incident(first, slack)
        await eventually(
            lambda: told(github, number, "Slack thread"), what="the thread's link", timeout=WAIT_S
        )
        # The ack's comment is made but its answer is lost; then GitHub's secondary limit.
        github.lose_next_answers(1)
        await ack(second)
        await eventually(
            lambda: told(github, number, "**Acknowledged**"), what="the ack", timeout=WAIT_S
        )
        github.refuse_next(1, retry_after=1)
        assert (await post_event(first.http, slash("resolve 1 anyway"))).status_code == 200
        refused = await eventually(
            lambda: _refused(github), what="the secondary limit", timeout=WAIT_S
        )
        await eventually(
            lambda: len(github.called_at) > refused, what="a call after it", timeout=WAIT_S
        )
        # Neither replica called GitHub again before the `retry-after` second had passed.
        assert github.called_at[refused] - github.called_at[refused - 1] >= 1.0
        await eventually(
            lambda: told(github, number, "**Resolved**"), what="the resolve", timeout=WAIT_S
        )
    for words in ("Slack thread", "**Acknowledged**", "**Resolved**"):
        assert len(told(github, number, words)) == 1, (words, bodies(github, number))


def _refused(github: GithubStandIn) -> int | None:
    """The position after the first call GitHub refused, once one was."""
    statuses = [call[2] for call in github.calls]
    return statuses.index(403) + 1 if 403 in statuses else None


async def test_a_refusal_is_said_once_in_the_thread_and_the_incident_goes_on(
    issue_settings: Callable[..., Settings], slack: Slack
) -> None:
    settings = issue_settings(github_issues_repo="pytorch/no-such-repo", github_issues_open=True)
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        said = await eventually(
            lambda: [t for t in thread_texts(slack, root.ts) if "GitHub refused" in t],
            what="the refusal in the thread",
            timeout=WAIT_S,
        )
        assert "404" in said[0]
        await ack(running)
        await eventually(
            lambda: any("Acknowledged" in t for t in thread_texts(slack, root.ts)),
            what="ack",
            timeout=WAIT_S,
        )
    assert len([t for t in thread_texts(slack, root.ts) if "GitHub refused" in t]) == 1
