"""Team channels in the demo, end to end: the GPU team's own Grafana rule fires for its runner
type and `SLACK_ROUTES` (on `runner_type`) sends its incident to #gpu-ci-incidents, while the
2xlarge incident opens in #ci-queue-incidents and leaves the GPU type to the team's thread."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import (
    CHANNEL,
    GPU_CHANNEL,
    ISSUES_REPO,
    Sandbox,
    SandboxConfig,
    start_sandbox,
)
from tests.support.running import eventually
from tests.support.servers import RedisServer

GPU = "linux.g5.4xlarge.nvidia.gpu"


@pytest.fixture
def sandbox(redis_server: RedisServer) -> Iterator[Sandbox]:
    redis_server.flush()
    with ExitStack() as stack:
        # A fleet minute every second; the GPU surge begins with the 2xlarge one. A status every
        # 5 s: the roots list their runner types from the reading a status commits.
        config = SandboxConfig(
            speed=60, metrics_interval_s=1, status_interval_s=5, team_burst_at_min=1.0
        )
        yield start_sandbox(stack, redis_server.url, "qproutes", config)


def root(sandbox: Sandbox, channel: str, title: str) -> Any:
    return next(
        (m for m in sandbox.emulator.channel_messages(channel) if title in m.text + str(m.blocks)),
        None,
    )


async def test_the_gpu_teams_alert_opens_in_its_channel_and_the_rest_in_the_default(
    sandbox: Sandbox,
) -> None:
    gpu = await eventually(
        lambda: root(sandbox, GPU_CHANNEL, "GPU jobs queueing"),
        what="the GPU team's incident in its channel",
        timeout=120,
    )
    main = await eventually(
        lambda: root(sandbox, CHANNEL, "Jobs queueing in autoscaled machines"),
        what="the 2xlarge incident in the default channel",
        timeout=120,
    )
    assert root(sandbox, CHANNEL, "GPU jobs queueing") is None, "not in the default channel"
    assert root(sandbox, GPU_CHANNEL, "Jobs queueing in autoscaled machines") is None
    # Each root says what its own rule watches: the GPU rule's words, not the main rule's.
    assert "GPU jobs are queueing" in str(gpu.blocks)
    assert "regular runner types" not in str(gpu.blocks)
    assert "regular runner types" in str(main.blocks)
    # Each root lists its own team's runner types from the live reading.
    await eventually(
        lambda: GPU in str(root(sandbox, GPU_CHANNEL, "GPU jobs queueing").blocks),
        what="the GPU root listing its type",
        timeout=60,
    )
    await eventually(
        lambda: "linux.2xlarge" in str(root(sandbox, CHANNEL, "Jobs queueing").blocks),
        what="the 2xlarge root listing its type",
        timeout=60,
    )
    assert GPU not in str(root(sandbox, CHANNEL, "Jobs queueing").blocks)
    assert gpu.ts and main.ts
    # Each incident has its GitHub issue, which its own root links and its own thread's link
    # opens: two issues, one per channel's incident.
    github = sandbox.github
    assert github is not None
    for channel, title in ((CHANNEL, "Jobs queueing in autoscaled"), (GPU_CHANNEL, "GPU jobs")):
        issue = await eventually(
            lambda t=title: next((i for i in github.issues(ISSUES_REPO) if t in i["title"]), None),
            what=f"the issue of {title}",
            timeout=60,
        )
        number = issue["number"]
        await eventually(
            lambda c=channel, t=title, n=number: (
                f"GitHub issue #{n}" in str(root(sandbox, c, t).blocks)
            ),
            what=f"{title}'s root linking issue #{number}",
            timeout=60,
        )
        [thread] = await eventually(
            lambda n=number: [
                c for c in github.comments(ISSUES_REPO, n) if "Slack thread" in c["body"]
            ],
            what=f"issue #{number} told its thread",
            timeout=60,
        )
        assert channel in thread["body"]  # the permalink is of this channel's thread
    assert len(github.issues(ISSUES_REPO)) == 2
    # Every link either root carries opens a page: the rule, the silence form, the runbook,
    # the fleet, the GitHub issue.
    for channel, title in ((CHANNEL, "Jobs queueing"), (GPU_CHANNEL, "GPU jobs queueing")):
        links = links_of(root(sandbox, channel, title).blocks)
        assert len(links) == 6, links
        async with httpx.AsyncClient() as client:
            for link in links:
                answer = await client.get(link)
                assert answer.status_code == 200, (link, answer.status_code, answer.text[:200])


def links_of(blocks: list[dict[str, Any]]) -> list[str]:
    """Every URL in the blocks' mrkdwn links (`<url|label>`, entities decoded as Slack does)
    and buttons."""
    text = json.dumps(blocks)
    found = re.findall(r"<(https?://[^|>]+)\|", text) + re.findall(r'"url": "([^"]+)"', text)
    return [html.unescape(url) for url in found]
