"""The AWS scalers against moto's server mode (a local AWS API over HTTP, not a patched boto3):
`sqs` sends PyTorch-style scale-up messages that the test reads back; `aws-asg` raises a real
(local) Auto Scaling group's desired capacity and puts it back only while it is still the value
set; the group's failed scaling activities are read (moto records none: their parsing is tested
on the documented shape)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import given
from prometheus_client.parser import text_string_to_metric_families

from bot.backends.scale import Reverted, ScaleRequest, Undo
from bot.backends.scale.aws import AsgScaler, SqsScaler, activity_since, failed_activities
from bot.config import Settings
from bot.domain.scale.scaling import ScaleTarget
from tests.support.mutations import json_values
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.servers import free_port, moto_server
from tests.support.slack import CHANNEL, USER, Slack, ephemeral_texts, post_event, slash

RUNNER = "linux.g5.4xlarge.nvidia.gpu"
REGION = "us-east-1"


@pytest.fixture(scope="module")
def aws() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def client(service: str, endpoint: str) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint)


async def sqs_calls(running: Any) -> float:
    """The successful calls to SQS this bot's `/metrics` counts."""
    text = (await running.http.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "queuepilot_backend_calls_total" and sample.labels == {
                "backend": "sqs",
                "outcome": "ok",
            }:
                return sample.value
    return 0.0


async def open_incident(running: Any, slack: Slack) -> Any:
    payload = fixture_json("alertmanager/runner-queue-am-00-firing.json")
    assert (await running.send("alertmanager", payload)).status_code == 202
    return (await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root"))[0]


async def test_sqs_sends_one_scale_up_message_per_runner(
    settings_for: Any, slack: Slack, aws: str
) -> None:
    sqs = client("sqs", aws)
    queue_url = sqs.create_queue(QueueName=f"ghci-lf-queued-builds-{free_port()}")["QueueUrl"]
    settings = settings_for(
        scaler_backend="sqs",
        scaler_sqs_queue_url=queue_url,
        scaler_sqs_repository="pytorch/pytorch",
        scaler_sqs_installation_id="51323823",
        aws_endpoint_url=aws,
        aws_region=REGION,
        scaler_targets=json.dumps(
            {RUNNER: {"target": "lf.linux.g5.4xlarge.nvidia.gpu", "cap": 12}}
        ),
        scale_allowed_users=USER,
    )
    async with run_bot(settings) as running:
        before = await sqs_calls(running)
        await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +12"))
        await eventually(
            lambda: any("12 scale-up messages sent" in t for t in ephemeral_texts(slack)),
            what="the answer",
        )
        after = await sqs_calls(running)
    # Two batches of at most ten, each one call, counted as every backend's calls are.
    assert after - before == 2
    bodies = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        if not got.get("Messages"):
            break
        bodies += [json.loads(m["Body"]) for m in got["Messages"]]
    assert len(bodies) == 12, "one message asks for one runner"
    shape = fixture_json("backends/sqs/scale-up-message-manual.json")
    for body in bodies:
        assert set(body) == set(shape), "the fields the scale-up Lambda reads, no more"
        assert body["eventType"] == "workflow_job"
        assert (body["repositoryOwner"], body["repositoryName"]) == ("pytorch", "pytorch")
        assert body["runnerLabels"] == ["lf.linux.g5.4xlarge.nvidia.gpu"]
        assert body["installationId"] == 51323823
    assert len({b["id"] for b in bodies}) == 12


async def test_sqs_refuses_more_than_the_cap(settings_for: Any, slack: Slack, aws: str) -> None:
    sqs = client("sqs", aws)
    queue_url = sqs.create_queue(QueueName=f"capped-{free_port()}")["QueueUrl"]
    settings = settings_for(
        scaler_backend="sqs",
        scaler_sqs_queue_url=queue_url,
        scaler_sqs_repository="pytorch/pytorch",
        aws_endpoint_url=aws,
        scaler_targets=json.dumps({RUNNER: {"target": "lf.x", "cap": 4}}),
        scale_allowed_users=USER,
    )
    async with run_bot(settings) as running:
        await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +5"))
        await eventually(lambda: any("At most +4" in t for t in ephemeral_texts(slack)))
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


def asg(endpoint: str, *, desired: int, maximum: int) -> str:
    autoscaling = client("autoscaling", endpoint)
    name = f"gpu-runners-{free_port()}"
    autoscaling.create_launch_configuration(
        LaunchConfigurationName=name, ImageId="ami-12c6146b", InstanceType="g5.4xlarge"
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchConfigurationName=name,
        MinSize=0,
        MaxSize=maximum,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{REGION}a"],
    )
    return name


def desired_of(endpoint: str, name: str) -> int:
    groups = client("autoscaling", endpoint).describe_auto_scaling_groups(
        AutoScalingGroupNames=[name]
    )
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])


async def test_aws_asg_sets_desired_capacity_and_refuses_past_max_size(
    settings_for: Any, slack: Slack, aws: str
) -> None:
    name = asg(aws, desired=2, maximum=8)
    settings = settings_for(
        scaler_backend="aws-asg",
        aws_endpoint_url=aws,
        aws_region=REGION,
        scaler_targets=json.dumps({RUNNER: {"target": name, "cap": 10}}),
        scale_allowed_users=USER,
        scale_cooldown_seconds=0,
    )
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +4"))
        await eventually(lambda: desired_of(aws, name) == 6, what="desired 2 → 6")
        await eventually(
            lambda: any(
                "desired capacity 2 → 6 (max 8)" in json.dumps(m.blocks, ensure_ascii=False)
                for m in slack.emulator.thread(CHANNEL, root.ts)
            ),
            what="before → after in the thread",
        )
        await post_event(running.http, slash(f"scale {RUNNER} +5"))
        await eventually(
            lambda: any("above the group's MaxSize (8)" in t for t in ephemeral_texts(slack)),
            what="refused past MaxSize",
        )
        assert desired_of(aws, name) == 6


async def test_an_unknown_group_is_a_clear_failure(
    settings_for: Any, slack: Slack, aws: str
) -> None:
    settings = settings_for(
        scaler_backend="aws-asg",
        aws_endpoint_url=aws,
        aws_region=REGION,
        scaler_targets=json.dumps({RUNNER: "no-such-group"}),
        scale_allowed_users=USER,
    )
    async with run_bot(settings) as running:
        await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +1"))
        await eventually(
            lambda: any(
                "no Auto Scaling group named no-such-group" in t for t in ephemeral_texts(slack)
            )
        )


def asg_scaler(endpoint: str) -> AsgScaler:
    return AsgScaler(Settings(aws_region=REGION, aws_endpoint_url=endpoint))


async def test_aws_asg_puts_desired_capacity_back_only_while_it_is_ours(aws: str) -> None:
    name = asg(aws, desired=2, maximum=8)
    target = ScaleTarget(RUNNER, name, cap=10)
    scaler = asg_scaler(aws)
    result = await scaler.scale(ScaleRequest(target, 4, "1", "al"))
    assert result.undo == Undo("desired capacity", 2, 6)
    assert await scaler.revert(target, result.undo) == Reverted(True, "desired capacity 6 → 2")
    assert desired_of(aws, name) == 2

    result = await scaler.scale(ScaleRequest(target, 3, "1", "al"))
    assert result.undo is not None
    # A scaling policy (or a person) sets it meanwhile: left as it is.
    client("autoscaling", aws).set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=7)
    reverted = await scaler.revert(target, result.undo)
    assert reverted == Reverted(False, "desired capacity is 7 now, not the 5 set from Slack")
    assert desired_of(aws, name) == 7


async def test_aws_asg_reads_its_scaling_activities(aws: str) -> None:
    """moto answers DescribeScalingActivities with no activities (it records none): the call
    and its shape are checked here, the failed ones by `failed_activities` below."""
    name = asg(aws, desired=1, maximum=4)
    assert await asg_scaler(aws).failures(ScaleTarget(RUNNER, name, cap=1)) == []


NOW = datetime(2026, 7, 14, 15, 0, tzinfo=UTC)
# DescribeScalingActivities' documented shape (AWS API reference, Activity).
CAPACITY = {
    "ActivityId": "f9f2d65b-f1f2-43e7-b46d-d86756459699",
    "AutoScalingGroupName": "gpu-runners",
    "Description": "Launching a new EC2 instance.  Status Reason: We currently do not have "
    "sufficient g5.4xlarge capacity in the Availability Zone you requested (us-east-1a).",
    "Cause": "At 2026-07-14T14:40:12Z an instance was started in response to a difference "
    "between desired and actual capacity, increasing the capacity from 4 to 10.",
    "StartTime": datetime(2026, 7, 14, 14, 40, 14, tzinfo=UTC),
    "EndTime": datetime(2026, 7, 14, 14, 40, 15, tzinfo=UTC),
    "StatusCode": "Failed",
    "StatusMessage": "We currently do not have sufficient g5.4xlarge capacity in the "
    "Availability Zone you requested (us-east-1a).",
    "Progress": 100,
}


def activity(**changes: Any) -> dict[str, Any]:
    return {**CAPACITY, **changes}


@pytest.mark.parametrize(
    ("activities", "expected"),
    [
        ([], []),
        (
            [activity()],
            [
                "scaling failed at 14:40 UTC: We currently do not have sufficient g5.4xlarge "
                "capacity in the Availability Zone you requested (us-east-1a)."
            ],
        ),
        ([activity(StatusCode="Successful")], []),
        ([activity(StartTime=NOW - timedelta(hours=2))], []),  # older than an hour
        (
            [
                activity(StartTime=NOW - timedelta(minutes=50), StatusMessage="first"),
                activity(
                    StartTime="2026-07-14T14:55:00Z",
                    StatusCode="Cancelled",
                    StatusMessage="You have requested more vCPU capacity than your current "
                    "vCPU limit of 32 allows",
                ),
            ],
            [
                "scaling cancelled at 14:55 UTC: You have requested more vCPU capacity than "
                "your current vCPU limit of 32 allows",
                "scaling failed at 14:10 UTC: first",
            ],
        ),
        (
            [activity(StatusMessage=None)],
            [f"scaling failed at 14:40 UTC: {' '.join(CAPACITY['Description'].split())}"],
        ),
        ([activity(StartTime=NOW - timedelta(minutes=m)) for m in range(8)], 5),
    ],
)
def test_failed_activities(activities: list[dict[str, Any]], expected: list[str] | int) -> None:
    found = failed_activities({"Activities": activities}, NOW)
    if isinstance(expected, int):
        assert len(found) == expected
        assert found[0].startswith("scaling failed at 15:00 UTC"), "newest first"
    else:
        assert found == expected


@given(json_values)
def test_failed_activities_take_any_answer(answer: object) -> None:
    found = failed_activities(answer, NOW)
    assert len(found) <= 5 and all(isinstance(f, str) and len(f) <= 400 for f in found)


async def test_aws_asg_goes_back_only_down_to_a_min_size_raised_since(aws: str) -> None:
    name = asg(aws, desired=2, maximum=8)
    target = ScaleTarget(RUNNER, name, cap=10)
    scaler = asg_scaler(aws)
    result = await scaler.scale(ScaleRequest(target, 4, "1", "al"))
    assert result.undo is not None
    client("autoscaling", aws).update_auto_scaling_group(AutoScalingGroupName=name, MinSize=4)
    reverted = await scaler.revert(target, result.undo)
    assert reverted == Reverted(
        True,
        "desired capacity 6 → 4",
        "desired capacity stays 4, not 2: the group's MinSize is 4 now, and AWS keeps the "
        "desired capacity within its sizes",
    )
    assert desired_of(aws, name) == 4


class Activities:
    """DescribeScalingActivities in its documented paging (newest first, `NextToken`), for a
    group that failed every `every_s` seconds: moto records no activities to page through."""

    def __init__(self, count: int, every_s: int) -> None:
        self.calls: list[dict[str, Any]] = []
        self.all = [
            activity(
                ActivityId=f"a{n}",
                StartTime=datetime.now(UTC) - timedelta(seconds=n * every_s),
                StatusMessage=f"failure {n}",
            )
            for n in range(count)
        ]

    def describe_scaling_activities(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        start = int(request.get("NextToken") or 0)
        end = start + request["MaxRecords"]
        page = {"Activities": self.all[start:end]}
        return page | ({"NextToken": str(end)} if end < len(self.all) else {})


@pytest.mark.parametrize(
    ("count", "every_s", "pages"),
    [(30, 60, 1), (300, 60, 1), (300, 20, 2), (1000, 5, 5)],  # 5: MAX_PAGES
)
async def test_aws_asg_pages_activities_until_the_hour_is_covered(
    count: int, every_s: int, pages: int
) -> None:
    api = Activities(count, every_s)
    scaler = AsgScaler(Settings(aws_region=REGION), autoscaling=api)
    found = await scaler.failures(ScaleTarget(RUNNER, "gpu-runners", cap=1))
    assert found is not None and found[0].endswith("failure 0")
    assert len(api.calls) == pages, "stops once a page reaches past the hour"
    assert all(call["MaxRecords"] == 100 for call in api.calls)


@pytest.mark.parametrize(
    ("activities", "expected"),
    [
        ([], "the group shows no scaling activity since"),
        (
            [activity(StartTime=NOW - timedelta(minutes=30))],
            "the group shows no scaling activity since",
        ),
        (
            [activity(StatusCode="Successful", StartTime="2026-07-14T14:41:00Z"), activity()],
            "the group's last activity (Successful): Launching a new EC2 instance. Status Reason: "
            "We currently do not have sufficient g5.4xlarge capacity in the Availability Zone "
            "you requested (us-east-1a).",
        ),
        (
            [activity(StatusCode="Successful", StartTime="2026-07-14T14:39:00Z"), activity()],
            "the group's last activity failed: We currently do not have sufficient g5.4xlarge "
            "capacity in the Availability Zone you requested (us-east-1a).",
        ),
        (
            [activity(StatusCode="Cancelled", StatusMessage=None, Description=" ")],
            "the group's last activity was cancelled: no reason given",
        ),
    ],
)
def test_a_groups_activity_since_a_scale_up_is_its_cause(
    activities: list[dict[str, Any]], expected: str
) -> None:
    """What a scale-up whose runners did not come is told of its group, from the documented
    shape of DescribeScalingActivities (moto records no activities)."""
    assert activity_since(activities, NOW - timedelta(minutes=21)) == expected


@given(json_values)
def test_activity_since_takes_any_answer(answer: object) -> None:
    assert isinstance(activity_since(answer, NOW), str)


async def test_sqs_says_which_of_the_lambdas_instances_started_since_the_scale_up(
    aws: str,
) -> None:
    """EC2 as both scale-up Lambdas tag their instances: pytorch's test-infra by runner type,
    terraform-aws-github-runner by its deployment's prefix (its queue's name)."""
    sqs, ec2 = client("sqs", aws), client("ec2", aws)
    prefix = f"ghr-{free_port()}"
    queue_url = sqs.create_queue(QueueName=f"{prefix}-queued-builds")["QueueUrl"]
    settings = Settings(scaler_sqs_queue_url=queue_url, aws_endpoint_url=aws, aws_region=REGION)
    scaler, target = SqsScaler(settings), ScaleTarget(RUNNER, f"lf.{prefix}.gpu", cap=4)
    ami = ec2.describe_images()["Images"][0]["ImageId"]

    def launch(**tags: str) -> None:
        spec = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
        ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1, TagSpecifications=spec)

    asked = datetime.now(UTC)
    assert await scaler.since(target, asked) == (
        "the scale-up queue accepted the request, and no instance was started for it since"
    )
    launch(**{"ghr:Application": "github-action-runner", "ghr:environment": prefix})
    launch(Application="github-action-runner", RunnerType=target.target)
    launch(Application="github-action-runner", RunnerType="lf.another.type")
    assert await scaler.since(target, asked) == "2 instances started since (2 running)"
    assert await scaler.since(target, asked + timedelta(hours=1)) == (
        "the scale-up queue accepted the request, and no instance was started for it since"
    )


async def test_sqs_says_not_known_when_ec2_cannot_be_read() -> None:
    settings = Settings(
        scaler_sqs_queue_url="https://sqs.us-east-1.amazonaws.com/1/x-queued-builds",
        aws_endpoint_url=f"http://127.0.0.1:{free_port()}",
        aws_region=REGION,
    )
    said = await SqsScaler(settings).since(ScaleTarget(RUNNER, "lf.x", cap=1), datetime.now(UTC))
    unreachable = "what it started is not known: EC2 is unreachable"
    assert said == f"the scale-up queue accepted the request; {unreachable}"
