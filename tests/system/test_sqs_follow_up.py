"""An SQS scale-up followed through the real paths: moto's server mode for SQS and EC2, a
GitHub-shaped API counting the registered runners, Slack emulated, Redis. The queue accepts the
messages and no instance starts: by the deadline the scale-up's own reply says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from sandbox.serve import RunningServer
from tests.support.fakes.github_api import FakeGithub
from tests.support.jobs import GPU
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.servers import free_port, moto_server
from tests.support.slack import CHANNEL, USER, Slack, post_event, shown, slash

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with moto_server() as url:
        yield url


def replies(slack: Slack) -> list[str]:
    roots = slack.emulator.channel_messages(CHANNEL)
    return [shown(m) for m in slack.emulator.thread(CHANNEL, roots[0].ts)[1:]] if roots else []


@pytest.mark.slow
async def test_an_sqs_scale_up_that_starts_no_instance_is_said_by_the_deadline(
    settings_for: Any, slack: Slack, aws: str, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=aws)
    queue_url = sqs.create_queue(QueueName=f"ghci-{free_port()}-queued-builds")["QueueUrl"]
    settings = settings_for(
        metrics_backend="github",
        github_token="ghp-test",
        github_api_url=github_jobs[1].url,
        github_org="pytorch",
        github_repos="pytorch/pytorch",
        metrics_interval_seconds=1,
        status_interval_seconds=600,
        status_tick_seconds=0.5,
        scaler_backend="sqs",
        scaler_sqs_queue_url=queue_url,
        scaler_sqs_repository="pytorch/pytorch",
        scaler_sqs_installation_id="51323823",
        aws_endpoint_url=aws,
        aws_region=REGION,
        scaler_targets=json.dumps({GPU: {"target": f"lf.{GPU}", "cap": 12}}),
        scale_allowed_users=USER,
        scale_verify_seconds=6,
    )
    async with run_bot(settings) as running:
        await running.send(
            "alertmanager", fixture_json("alertmanager/runner-queue-am-00-firing.json")
        )
        thread = await slack.first_thread()
        await eventually(
            lambda: "busy 8/8" in shown(thread()[0]),
            what="the root with the live reading",
            timeout=30,
        )
        assert (await post_event(running.http, slash(f"scale {GPU} +2"))).status_code == 200
        messages = await eventually(
            lambda: sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages"),
            what="the scale-up messages",
        )
        assert json.loads(messages[0]["Body"])["runnerLabels"] == [f"lf.{GPU}"]
        said = await eventually(
            lambda: next((r for r in replies(slack) if "+2 asked at" in r), None),
            what="the outcome by the deadline",
            timeout=30,
        )
    assert "0 registered after" in said
    assert (
        "the scale-up queue accepted the request, and no instance was started for it since" in said
    )
    assert "2 scale-up messages sent" in said, "edited in the scale-up's own reply"
