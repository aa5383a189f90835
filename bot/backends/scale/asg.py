"""The `aws-asg` scaler: raise an EC2 Auto Scaling group's desired capacity. An ASG has no
resource version: a put-back's check and set are two calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.backends.errors import BackendError
from bot.backends.http import Counted, time_of, uncounted
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
from bot.backends.scale.aws import call, client
from bot.config import Settings
from bot.domain.scaling import Capacity, ScaleTarget

SERVICE = "AWS Auto Scaling"
DESIRED = "desired capacity"
FAILED = frozenset({"Failed", "Cancelled"})
RECENT = timedelta(hours=1)
NAMES = ("MinSize", "MaxSize", DESIRED)
PAGE = 100  # DescribeScalingActivities' largest; five hold more failures than anyone reads
MAX_PAGES = 5


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
        detail = f"{DESIRED} {desired} → {value} (max {maximum})"
        before, after = _capacity(desired, minimum, maximum), _capacity(value, minimum, maximum)
        return ScaleResult(detail, before, after, Undo(DESIRED, desired, value))

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        desired, minimum, maximum = await self._sizes(target)
        before = undo.before or 0
        if desired == before:
            return Reverted(True, f"{DESIRED} was already back to {before}")
        if desired != undo.after:
            return Reverted(
                False, f"{DESIRED} is {desired} now, not the {undo.after} set from Slack"
            )
        # The group's bounds may have moved since: go back only as far as they let.
        value = min(max(before, minimum), maximum)
        if value == undo.after or not minimum <= value <= maximum:
            return Reverted(
                False,
                f"{DESIRED} stays {undo.after}: the group's MinSize is {minimum} and MaxSize "
                f"{maximum} now, and AWS keeps the desired capacity between them",
            )
        await self._set(target, value)
        size = "MinSize" if value == minimum else "MaxSize"
        left = (
            f"{DESIRED} stays {value}, not {before}: the group's {size} is {value} now, and AWS "
            "keeps the desired capacity within its sizes"
        )
        return Reverted(True, f"{DESIRED} {undo.after} → {value}", left if value != before else "")

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        now = datetime.now(UTC)
        activities: list[Any] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            answer = await call(
                SERVICE, self._counted, self._client.describe_scaling_activities,
                AutoScalingGroupName=target.target, MaxRecords=PAGE,
                **({"NextToken": token} if token else {}),
            )  # fmt: skip
            answer = answer if isinstance(answer, dict) else {}
            page = answer.get("Activities")
            page = page if isinstance(page, list) else []
            activities += page
            token = answer.get("NextToken")
            last = page[-1] if page and isinstance(page[-1], dict) else {}
            oldest = time_of(last.get("StartTime"))
            if not token or not page or (oldest is not None and oldest < now - RECENT):
                break
        return failed_activities({"Activities": activities}, now)

    async def _set(self, target: ScaleTarget, value: int) -> None:
        await call(
            SERVICE, self._counted, self._client.set_desired_capacity,
            AutoScalingGroupName=target.target, DesiredCapacity=value, HonorCooldown=False,
        )  # fmt: skip

    async def _sizes(self, target: ScaleTarget) -> tuple[int, int, int]:
        """The group's (desired, minimum, maximum)."""
        describe = self._client.describe_auto_scaling_groups
        answer = await call(SERVICE, self._counted, describe, AutoScalingGroupNames=[target.target])
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
    for activity in activities if isinstance(activities, list) else []:
        if not isinstance(activity, dict) or activity.get("StatusCode") not in FAILED:
            continue
        started = time_of(activity.get("StartTime"))  # boto3 gives datetimes, JSON text
        if started is None or not now - RECENT <= started <= now + RECENT:
            continue
        said = activity.get("StatusMessage") or activity.get("Description")
        text = " ".join(said.split()) if isinstance(said, str) and said.strip() else ""
        what = "cancelled" if activity["StatusCode"] == "Cancelled" else "failed"
        found.append(
            (started, f"scaling {what} at {started:%H:%M} UTC: {text or 'no reason given'}")
        )
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [text[:400] for _, text in found[:MAX_FAILURES]]


def _desired(target: ScaleTarget, delta: int, desired: int, minimum: int, maximum: int) -> int:
    """The desired capacity `delta` more asks for, or the refusal."""
    value = desired + delta
    if value > maximum:
        raise BackendError(
            f"desired capacity would become {value}, above the group's MaxSize "
            f"({maximum}): ask for at most +{max(maximum - desired, 0)}",
            retryable=False,
        )
    checked(target, (minimum, maximum, value), NAMES, DESIRED, value)
    return value


def _capacity(desired: int, minimum: int, maximum: int) -> Capacity:
    return Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)
