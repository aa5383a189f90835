"""AWS: the scale-up queue (SCALER_BACKEND=sqs) read, never written, and each Auto Scaling group
of SCALER_TARGETS (aws-asg) described as the scaler describes it: it exists, and its desired
capacity lies within its minimum and maximum. The sqs scaler needs only `sqs:SendMessage`, which
no dry call can test: a queue this check may not read is a warning, one that is gone a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from bot.backends.errors import BackendError
from bot.backends.scale.asg import AsgScaler
from bot.backends.scale.aws import call, client
from bot.backends.scale.sqs import queue_region
from bot.checks import Finding, fail, ok, warn
from bot.config import Settings
from bot.domain.scaling import ScaleTarget
from bot.factory import build_scaler, scale_targets

SQS, ASG = "sqs", "aws-asg"
FIX_NAME = "name an existing group in SCALER_TARGETS"
CREDENTIALS = (
    "give the bot AWS credentials (the pod's IAM role, or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY) and AWS_REGION"
)


async def probe_sqs(settings: Settings) -> list[Finding]:
    url = settings.scaler_sqs_queue_url or ""
    queue, waiting = url.rstrip("/").rpartition("/")[2], "ApproximateNumberOfMessages"
    try:
        sqs = client("sqs", settings, region=queue_region(url))
        answer = await call("SQS", sqs.get_queue_attributes, QueueUrl=url, AttributeNames=[waiting])
    except BackendError as exc:
        return [_sqs_refused(queue, str(exc))]
    except Exception as exc:  # botocore refusing to build the client: no region, say
        return [fail(SQS, f"{type(exc).__name__}: {exc}", CREDENTIALS)]
    count = (answer.get("Attributes") or {}).get(waiting, "?")
    return [ok(SQS, f"queue {queue}: readable, {count} messages waiting")]


def _sqs_refused(queue: str, said: str) -> Finding:
    if "AccessDenied" in said:
        return warn(
            SQS,
            f"queue {queue} not read: {said}",
            "nothing to do if the bot's role has sqs:SendMessage on it (all it needs); "
            "sqs:GetQueueAttributes lets this check see the queue",
        )
    if any(gone in said for gone in ("NonExistentQueue", "QueueDoesNotExist")):
        return fail(
            SQS,
            f"queue {queue}: {said}",
            "set SCALER_SQS_QUEUE_URL to the scale-up queue's URL (…/<environment>-queued-builds)",
        )
    return fail(SQS, said, CREDENTIALS)


async def probe_asg(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    scaler = build_scaler(settings, environ)
    assert isinstance(scaler, AsgScaler)
    targets = list(scale_targets(settings).values())
    return list(await asyncio.gather(*(_group(scaler, target) for target in targets)))


async def _group(scaler: AsgScaler, target: ScaleTarget) -> Finding:
    shown = f"{target.target} ({target.runner_type})"
    try:
        capacity = await scaler.capacity(target)
    except BackendError as exc:
        named = "no Auto Scaling group" in str(exc)
        return fail(ASG, f"{shown}: {exc}", FIX_NAME if named else CREDENTIALS)
    except Exception as exc:  # botocore refusing to build the client: no region, say
        return fail(ASG, f"{shown}: {type(exc).__name__}: {exc}", CREDENTIALS)
    assert capacity is not None
    desired, low, high = capacity.current, capacity.minimum, capacity.maximum
    sizes = f"desired {desired}, min {low}, max {high}"
    if desired is None or low is None or high is None or not low <= desired <= high:
        return fail(ASG, f"{shown}: {sizes}", "set the group's sizes so min ≤ desired ≤ max")
    return ok(ASG, f"{shown}: {sizes}")
