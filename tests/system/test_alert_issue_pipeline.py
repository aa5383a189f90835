"""queuepilot beside pytorch/alerting-infra on one repository: both get every notification; the
pipeline (`sandbox.alerting_pipeline`, built from its collector's source) opens, closes and opens
again the alert's issue on the GitHub stand-in a moment later, and queuepilot, with
GITHUB_ISSUES_OPEN, links that issue rather than opening a second one."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from bot.config import Settings
from sandbox.alerting_pipeline import AlertingPipeline
from sandbox.github_issues import TOKEN
from sandbox.github_issues import GithubIssues as GithubStandIn
from sandbox.serve import serve_in_thread
from tests.support.payloads import fixture_json, refired
from tests.support.running import RunningBot, eventually, recorded_root, run_bot
from tests.support.slack import CHANNEL, Slack

REPO = "pytorch/alerting-issues"
WAIT_S = 60  # generous for a loaded machine: each wait ends once its condition holds
PIPELINE_DELAY_S = 0.2
GRACE_S = 2  # GITHUB_ISSUES_OPEN_AFTER_SECONDS, past the pipeline's delay
TEAMS = "dev-infra, pytorch-dev-infra"


@pytest.fixture
def github() -> Iterator[GithubStandIn]:
    stand_in = GithubStandIn()
    with serve_in_thread(stand_in.app) as server:
        stand_in.base_url = server.url
        stand_in.repo(REPO)
        yield stand_in


@pytest.fixture
async def pipeline(github: GithubStandIn) -> AsyncIterator[AlertingPipeline]:
    beside = AlertingPipeline(github.base_url, REPO, TOKEN, delay_s=PIPELINE_DELAY_S)
    yield beside
    await beside.settled()


@pytest.fixture
def settings(settings_for: Callable[..., Settings], github: GithubStandIn) -> Settings:
    return settings_for(
        github_token=TOKEN,
        github_api_url=github.base_url,
        github_issues_repo=REPO,
        github_issues_open=True,
        github_issues_open_after_seconds=GRACE_S,
        github_issues_interval_ms=20,
    )


def notification(name: str, teams: str = TEAMS) -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json(name))
    for alert in (payload, *payload["alerts"]):
        alert.setdefault("commonAnnotations" if alert is payload else "annotations", {})
    payload["commonAnnotations"]["Teams"] = teams
    for alert in payload["alerts"]:
        alert["annotations"]["Teams"] = teams
    return payload


async def notify(running: RunningBot, pipeline: AlertingPipeline, payload: dict[str, Any]) -> None:
    """Grafana's one notification policy, two contact points: queuepilot and the pipeline."""
    pipeline.notify(payload)
    assert (await running.send("grafana", payload)).status_code == 202


def open_issues(github: GithubStandIn) -> list[dict[str, Any]]:
    return [issue for issue in github.issues(REPO) if issue["state"] == "open"]


def root_text(slack: Slack) -> str:
    [root] = slack.emulator.channel_messages(CHANNEL)
    return str(root.blocks)


def comments_after_close(github: GithubStandIn, number: int) -> list[str]:
    closed_at = github.issue(REPO, number)["closed_at"]
    return [c["body"] for c in github.comments(REPO, number) if c["created_at"] > closed_at]


async def test_beside_alerting_infra_one_issue_per_alert_linked_again_after_a_refire(
    settings: Settings, github: GithubStandIn, pipeline: AlertingPipeline, slack: Slack
) -> None:
    firing = notification("grafana/queue-alert-firing.json")
    async with run_bot(settings) as running:
        await notify(running, pipeline, firing)
        await recorded_root(running, slack)
        await eventually(
            lambda: "GitHub issue #1" in root_text(slack), what="the root links it", timeout=WAIT_S
        )
        [first] = open_issues(github)
        assert first["title"] == "[P2] Jobs queueing in autoscaled machines"
        assert "- *Fingerprint*: `" in first["body"]  # the pipeline's
        assert [label["name"] for label in first["labels"]] == [
            "area:alerting", "Pri:P2", "Team:dev-infra", "Team:pytorch-dev-infra", "Source:grafana"
        ]  # fmt: skip
        await eventually(
            lambda: any("Slack thread" in c["body"] for c in github.comments(REPO, 1)),
            what="the thread's link on the pipeline's issue",
            timeout=WAIT_S,
        )

        # Resolved: the pipeline closes its issue. Fired again: it opens a new one.
        await notify(running, pipeline, notification("grafana/queue-alert-resolved.json"))
        await eventually(
            lambda: github.issue(REPO, 1)["state"] == "closed", what="closed", timeout=WAIT_S
        )
        await notify(running, pipeline, refired(firing))
        await eventually(
            lambda: "GitHub issue #2" in root_text(slack), what="the new issue", timeout=WAIT_S
        )
        await eventually(
            lambda: any("Slack thread" in c["body"] for c in github.comments(REPO, 2)),
            what="the thread's link on the new issue",
            timeout=WAIT_S,
        )
        await pipeline.settled()

    assert [issue["number"] for issue in open_issues(github)] == [2]
    assert len(github.issues(REPO)) == 2  # the pipeline's two: none of queuepilot's
    assert comments_after_close(github, 1) == []  # a closed issue of the pipeline's hears nothing
    assert [action for _, action in pipeline.actions] == ["CREATE", "CLOSE", "CREATE"]


async def test_a_transferred_issue_is_followed_to_where_it_is(
    settings_for: Callable[..., Settings], github: GithubStandIn, slack: Slack
) -> None:
    """No pipeline: queuepilot opens the issue; someone moves it to another repository."""
    github.repo("pytorch/alerts-archive")
    settings = settings_for(
        github_token=TOKEN,
        github_api_url=github.base_url,
        github_issues_repo=REPO,
        github_issues_open=True,
        github_issues_open_after_seconds=0,
        github_issues_interval_ms=20,
    )
    async with run_bot(settings) as running:
        await running.send("grafana", notification("grafana/queue-alert-firing.json"))
        await recorded_root(running, slack)
        await eventually(
            lambda: github.issues(REPO) and github.comments(REPO, 1),
            what="the thread",
            timeout=WAIT_S,
        )
        moved = github.transfer_issue(REPO, 1, "pytorch/alerts-archive")
        await running.send("grafana", notification("grafana/queue-alert-resolved.json"))
        await eventually(
            lambda: moved["html_url"] in root_text(slack), what="the moved issue", timeout=WAIT_S
        )
        await eventually(
            lambda: github.issue("pytorch/alerts-archive", moved["number"])["state"] == "closed",
            what="closed where it is now",
            timeout=WAIT_S,
        )
    said = [c["body"] for c in github.comments("pytorch/alerts-archive", moved["number"])]
    assert [body.split(" ")[0] for body in said] == ["queuepilot", "**Resolved**"]
    assert len(github.issues(REPO)) == 1  # followed, not opened again
