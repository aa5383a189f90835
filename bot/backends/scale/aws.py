"""The AWS scalers and their boto3 client (the optional `aws` extra), run off the event loop.
`sqs`: PyTorch-style scale-up Lambdas (terraform-aws-github-runner) read `workflow_job` "queued"
messages, one runner each, as operators send them by hand; `+N` sends N (the Lambda still honours
each type's `max_available`). `aws-asg`: raise an Auto Scaling group's desired capacity; an ASG has
no resource version, so a put-back's check and set are two calls."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bot.backends.http import BackendError, Counted, uncounted
from bot.backends.scale import (
    MAX_FAILURES,
    Reverted,
    Scaler,
    ScaleRequest,
    ScaleResult,
    Undo,
    checked,
    refused,
)
from bot.config import Settings
from bot.domain.alerting.alerts import time_of
from bot.domain.scale.scaling import Capacity, ScaleTarget

T = TypeVar("T")
THROTTLED = frozenset({"Throttling", "ThrottlingException", "RequestThrottled", "SlowDown"})
BATCH = 10  # SendMessageBatch takes at most ten entries
MAX_BODY = 2048  # the queue's maximum message size in terraform-aws-github-runner
CALLBACK = "MANUAL SCALE EVENT"  # what the manual helper sends; scale-up never reads it
RUNNER_APPLICATION = "github-action-runner"  # the scale-up Lambdas' Application tag
QUEUE_SUFFIX = "-queued-builds"
EC2_PAGE = 1000  # DescribeInstances' largest

ASG_SERVICE = "AWS Auto Scaling"
ASG_DESIRED = "desired capacity"
ASG_FAILED = frozenset({"Failed", "Cancelled"})
ASG_RECENT = timedelta(hours=1)
ASG_NAMES = ("MinSize", "MaxSize", ASG_DESIRED)
ASG_PAGE = 100  # DescribeScalingActivities' largest; five hold more failures than anyone reads
ASG_MAX_PAGES = 5


def client(service: str, config: Settings, *, region: str | None = None) -> Any:
    """A boto3 client in AWS_REGION (else `region`, else AWS's chain), at AWS_ENDPOINT_URL."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        said = "the AWS scalers need boto3: install queuepilot with the `aws` extra"
        raise BackendError(said, retryable=False) from None
    timeout = config.backend_timeout_seconds
    retries = {"max_attempts": 2, "mode": "standard"}
    return boto3.client(
        service,
        region_name=config.aws_region or region,
        endpoint_url=config.aws_endpoint_url,
        config=Config(connect_timeout=timeout, read_timeout=timeout, retries=retries),
    )


async def call(service: str, counted: Counted, fn: Callable[..., T], **kwargs: Any) -> T:
    """`fn(**kwargs)` in a thread (boto3 blocks), its failures as `BackendError`."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    try:
        answer = await asyncio.to_thread(fn, **kwargs)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "error")
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        throttled, failing = code in THROTTLED, status >= 500
        counted(service, "rate_limited" if throttled else "server_error" if failing else "refused")
        said = f"{service} refused: {code}: {error.get('Message') or code}"
        raise BackendError(said, retryable=throttled or failing) from None
    except (ConnectTimeoutError, ReadTimeoutError) as exc:
        counted(service, "timeout")
        said, sent = f"{service} did not answer in time", isinstance(exc, ReadTimeoutError)
        raise BackendError(said, retryable=True, unanswered=sent) from None
    except EndpointConnectionError:
        counted(service, "unreachable")
        raise BackendError(f"{service} is unreachable", retryable=True) from None
    except BotoCoreError as exc:
        counted(service, "error")
        raise BackendError(f"{service}: {type(exc).__name__}", retryable=False) from None
    counted(service, "ok")
    return answer


async def pages(
    service: str,
    counted: Counted,
    fn: Callable[..., Any],
    done: Callable[[list[Any]], bool],
    key: str,
    **kwargs: Any,
) -> list[Any]:
    """The `key` lists of up to `ASG_MAX_PAGES` answers of `fn`, following `NextToken` until a
    page is `done` (it reaches back far enough)."""
    found: list[Any] = []
    token: str | None = None
    for _ in range(ASG_MAX_PAGES):
        answer = await call(
            service, counted, fn, **kwargs, **({"NextToken": token} if token else {})
        )
        answer = answer if isinstance(answer, dict) else {}
        page = answer.get(key)
        page = page if isinstance(page, list) else []
        found += page
        token = answer.get("NextToken")
        if not token or not page or done(page):
            break
    return found


class SqsScaler(Scaler):
    name = "the scale-up queue"
    cannot_undo = (
        "each message asks the scale-up Lambda for one runner, and the Lambda scales idle "
        "runners down on its own"
    )

    def __init__(
        self, config: Settings, sqs: Any | None = None, *, counted: Counted = uncounted
    ) -> None:
        self._counted = counted
        self._url = config.scaler_sqs_queue_url or ""
        self._config = config
        self._sqs = sqs
        self._ec2: Any | None = None

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        sqs = self._sqs = self._sqs or client("sqs", self._config, region=queue_region(self._url))
        bodies = [self._body(scale.target.target) for _ in range(scale.delta)]
        sent, refused = 0, []
        for start in range(0, len(bodies), BATCH):
            batch = bodies[start : start + BATCH]
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(batch)]
            answer = await call(
                "SQS", self._counted, sqs.send_message_batch, QueueUrl=self._url, Entries=entries
            )
            sent += len(answer.get("Successful") or [])
            refused += [str(f.get("Code") or "error") for f in answer.get("Failed") or []]
        if sent == 0:
            raise BackendError(f"SQS refused every message ({', '.join(refused)})", retryable=True)
        queue = self._url.rstrip("/").rpartition("/")[2]
        detail = f"{sent} scale-up message{'s' if sent != 1 else ''} sent to {queue}"
        if refused:
            detail += f"; {len(refused)} refused ({refused[0]})"
        return ScaleResult(detail)

    async def since(self, target: ScaleTarget, at: datetime) -> str:
        """The Lambda accepts a message and may start nothing ("job is not queued", its type's
        maximum): what matters is the instances it started since, as EC2 shows them."""
        accepted = "the scale-up queue accepted the request"
        try:
            started = await self._started(target, at)
        except BackendError as exc:
            return f"{accepted}; what it started is not known: {exc}"
        if not started:
            return f"{accepted}, and no instance was started for it since"
        states = ", ".join(f"{n} {state}" for state, n in Counter(started.values()).most_common())
        return f"{len(started)} instance{'s' if len(started) != 1 else ''} started since ({states})"

    async def _started(self, target: ScaleTarget, at: datetime) -> dict[str, str]:
        """The scale-up Lambda's instances launched at `at` or later, and their state, by the tags
        of pytorch's test-infra (the runner type) or terraform-aws-github-runner (the prefix)."""
        region = queue_region(self._url)
        ec2 = self._ec2 = self._ec2 or client("ec2", self._config, region=region)
        queue = self._url.rstrip("/").rpartition("/")[2].removesuffix(".fifo")
        tagged = [{"Application": RUNNER_APPLICATION, "RunnerType": target.target}]
        if queue.endswith(QUEUE_SUFFIX):
            prefix = queue.removesuffix(QUEUE_SUFFIX)
            tagged.append({"ghr:Application": RUNNER_APPLICATION, "ghr:environment": prefix})
        since = at.replace(microsecond=0)  # EC2's launch times are whole seconds
        found: dict[str, str] = {}
        for tags in tagged:
            filters = [{"Name": f"tag:{key}", "Values": [value]} for key, value in tags.items()]
            for reservation in await pages(
                "EC2", self._counted, ec2.describe_instances, lambda _: False, "Reservations",
                Filters=filters, MaxResults=EC2_PAGE,
            ):  # fmt: skip
                for instance in reservation.get("Instances") or []:
                    launched = time_of(instance.get("LaunchTime"))
                    if launched is not None and launched >= since:
                        state = (instance.get("State") or {}).get("Name") or "state unknown"
                        found[str(instance.get("InstanceId"))] = state
        return found

    def _body(self, label: str) -> str:
        owner, _, repository = self._config.scaler_sqs_repository.partition("/")
        installation: int | str = self._config.scaler_sqs_installation_id
        if isinstance(installation, str) and installation.isdigit():
            installation = int(installation)
        event = {
            "id": str(uuid.uuid4()),
            "eventType": "workflow_job",
            "repositoryName": repository,
            "repositoryOwner": owner,
            "installationId": installation or 0,
            "runnerLabels": [label],
            "callbackUrl": CALLBACK,
        }
        body = json.dumps(event, separators=(",", ":"))
        if len(body.encode()) > MAX_BODY:
            raise BackendError(f"a scale-up message would pass {MAX_BODY} bytes", retryable=False)
        return body


def queue_region(url: str) -> str | None:
    """`https://sqs.us-east-1.amazonaws.com/…` -> us-east-1."""
    host = url.split("//", 1)[-1].split("/", 1)[0]
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "sqs" else None


class AsgScaler(Scaler):
    name = "AWS Auto Scaling"

    def __init__(
        self, config: Settings, autoscaling: Any | None = None, *, counted: Counted = uncounted
    ) -> None:
        self._config = config
        self._counted = counted
        self._autoscaling = autoscaling

    @property
    def _client(self) -> Any:
        self._autoscaling = self._autoscaling or client("autoscaling", self._config)
        return self._autoscaling

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        return _capacity(*await self._sizes(target))

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        sizes = (capacity.current, capacity.minimum, capacity.maximum) if capacity else (None,)
        return "" if None in sizes else refused(_desired, target, delta, *sizes)

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        desired, minimum, maximum = await self._sizes(scale.target)
        value = _desired(scale.target, scale.delta, desired, minimum, maximum)
        await self._set(scale.target, value)
        detail = f"{ASG_DESIRED} {desired} → {value} (max {maximum})"
        before, after = _capacity(desired, minimum, maximum), _capacity(value, minimum, maximum)
        return ScaleResult(detail, before, after, Undo(ASG_DESIRED, desired, value))

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        desired, minimum, maximum = await self._sizes(target)
        before = undo.before or 0
        if desired == before:
            return Reverted(True, f"{ASG_DESIRED} was already back to {before}")
        if desired != undo.after:
            said = f"{ASG_DESIRED} is {desired} now, not the {undo.after} set from Slack"
            return Reverted(False, said)
        # The group's bounds may have moved since: go back only as far as they let.
        value = min(max(before, minimum), maximum)
        if value == undo.after or not minimum <= value <= maximum:
            said = f"{ASG_DESIRED} stays {undo.after}: the group's MinSize is {minimum} and "
            said += f"MaxSize {maximum} now, and AWS keeps the desired capacity between them"
            return Reverted(False, said)
        await self._set(target, value)
        size = "MinSize" if value == minimum else "MaxSize"
        left = f"{ASG_DESIRED} stays {value}, not {before}: the group's {size} is {value} now, "
        left += "and AWS keeps the desired capacity within its sizes"
        done = f"{ASG_DESIRED} {undo.after} → {value}"
        return Reverted(True, done, left if value != before else "")

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        return failed_activities({"Activities": await self._activities(target)}, datetime.now(UTC))

    async def since(self, target: ScaleTarget, at: datetime) -> str:
        return activity_since(await self._activities(target), at)

    async def _activities(self, target: ScaleTarget) -> list[Any]:
        """The group's scaling activities, newest first, paged back to an hour ago at most."""
        hour_ago = datetime.now(UTC) - ASG_RECENT

        def done(page: list[Any]) -> bool:
            oldest = time_of(page[-1].get("StartTime")) if isinstance(page[-1], dict) else None
            return oldest is not None and oldest < hour_ago

        describe = self._client.describe_scaling_activities
        return await pages(
            ASG_SERVICE, self._counted, describe, done, "Activities",
            AutoScalingGroupName=target.target, MaxRecords=ASG_PAGE,
        )  # fmt: skip

    async def _set(self, target: ScaleTarget, value: int) -> None:
        await call(
            ASG_SERVICE, self._counted, self._client.set_desired_capacity,
            AutoScalingGroupName=target.target, DesiredCapacity=value, HonorCooldown=False,
        )  # fmt: skip

    async def _sizes(self, target: ScaleTarget) -> tuple[int, int, int]:
        """The group's (desired, minimum, maximum)."""
        describe, names = self._client.describe_auto_scaling_groups, [target.target]
        answer = await call(ASG_SERVICE, self._counted, describe, AutoScalingGroupNames=names)
        groups = answer.get("AutoScalingGroups") or []
        if not groups:
            raise BackendError(f"no Auto Scaling group named {target.target}", retryable=False)
        group = groups[0]
        return int(group["DesiredCapacity"]), int(group["MinSize"]), int(group["MaxSize"])


def failed_activities(answer: object, now: datetime) -> list[str]:
    """The last hour's failed or cancelled activities, newest first, at most `MAX_FAILURES`: their
    StatusMessage ("We currently do not have sufficient … capacity"), else Description."""
    activities = answer.get("Activities") if isinstance(answer, dict) else None
    found: list[tuple[datetime, str]] = []
    for started, activity in _started(activities, now - ASG_RECENT):
        if started <= now + ASG_RECENT and activity.get("StatusCode") in ASG_FAILED:
            what = "cancelled" if activity.get("StatusCode") == "Cancelled" else "failed"
            said = f"scaling {what} at {started:%H:%M} UTC: {_said(activity)}"
            found.append((started, said))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [text[:400] for _, text in found[:MAX_FAILURES]]


def activity_since(activities: object, at: datetime) -> str:
    """Why a scale-up did not come, from the group's newest activity since `at`: "the group's
    last activity failed: We currently do not have sufficient …", what it did else, or nothing."""
    found = _started(activities, at)
    if not found:
        return "the group shows no scaling activity since"
    activity = max(found, key=lambda pair: pair[0])[1]
    if activity.get("StatusCode") in ASG_FAILED:
        what = "was cancelled" if activity.get("StatusCode") == "Cancelled" else "failed"
        return f"the group's last activity {what}: {_said(activity)}"[:400]
    status = activity.get("StatusCode") or "status unknown"
    return f"the group's last activity ({status}): {_said(activity, 'Description')}"[:400]


def _started(activities: object, after: datetime) -> list[tuple[datetime, dict[str, Any]]]:
    """The activities started at `after` or later, with when (boto3 gives datetimes, JSON text)."""
    found = []
    for activity in activities if isinstance(activities, list) else []:
        started = time_of(activity.get("StartTime")) if isinstance(activity, dict) else None
        if started is not None and started >= after:
            found.append((started, activity))
    return found


def _said(activity: dict[str, Any], *keys: str) -> str:
    for key in keys or ("StatusMessage", "Description"):
        said = activity.get(key)
        if isinstance(said, str) and said.strip():
            return " ".join(said.split())
    return "no reason given"


def _desired(target: ScaleTarget, delta: int, desired: int, minimum: int, maximum: int) -> int:
    value = desired + delta
    if value > maximum:
        said = f"desired capacity would become {value}, above the group's MaxSize ({maximum}): ask "
        raise BackendError(f"{said}for at most +{max(maximum - desired, 0)}", retryable=False)
    checked(target, (minimum, maximum, value), ASG_NAMES, ASG_DESIRED, value)
    return value


def _capacity(desired: int, minimum: int, maximum: int) -> Capacity:
    return Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)
