"""The `aws-asg` scaler: raise an EC2 Auto Scaling group's desired capacity.

For EC2 fleets built on Auto Scaling groups: `DescribeAutoScalingGroups` first (desired, minimum,
maximum), then `SetDesiredCapacity` to desired + N, refused when that passes the group's MaxSize
(AWS would refuse it too) or the target's ceiling. IAM: `autoscaling:DescribeAutoScalingGroups`
and `autoscaling:SetDesiredCapacity` on the groups (and `autoscaling:DescribeScalingActivities`
for the group's own failures in diagnostics).

A scale-up is put back by setting the old desired capacity, only while the group's desired
capacity is still the value set from Slack: an ASG has no resource version, and a scaling
policy, a scheduled action or a person may have set it since. The check and the set are two
calls, so a change between them is possible; its window is one round trip. AWS refuses a
desired capacity outside [MinSize, MaxSize]: a put-back below a MinSize raised since stops at
it, and says so.

Diagnostics read the group's failed scaling activities of the last hour, following `NextToken`
until the pages reach past the hour (newest first, as the API lists them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.backends.errors import BackendError
from bot.backends.scale import (
    MAX_FAILURES,
    Bounds,
    Reverted,
    ScaleRequest,
    ScaleResult,
    Undo,
    bounded,
    within_ceiling,
)
from bot.backends.scale.aws import call, client
from bot.config import Settings
from bot.domain.scaling import Capacity, ScaleTarget

SERVICE = "AWS Auto Scaling"
DESIRED = "desired capacity"
FAILED = frozenset({"Failed", "Cancelled"})
RECENT = timedelta(hours=1)
NAMES = ("MinSize", "MaxSize", DESIRED)
# DescribeScalingActivities' largest page; a group that failed more often than this many pages
# hold in an hour has said enough.
PAGE = 100
MAX_PAGES = 5


class AsgScaler:
    name = "AWS Auto Scaling"
    can_raise_maximum = False
    revert_order: tuple[str, ...] = ()
    cannot_undo = ""

    def __init__(self, config: Settings, autoscaling: Any | None = None) -> None:
        self._config = config
        self._autoscaling = autoscaling

    @property
    def _client(self) -> Any:
        if self._autoscaling is None:
            self._autoscaling = client("autoscaling", self._config)
        return self._autoscaling

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        desired, minimum, maximum = await self._sizes(target)
        return Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        if capacity is None:
            return ""
        desired, minimum, maximum = capacity.current, capacity.minimum, capacity.maximum
        if desired is None or minimum is None or maximum is None:
            return ""
        try:
            _desired(target, delta, desired, minimum, maximum)
        except BackendError as exc:
            return str(exc)
        return ""

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        desired, minimum, maximum = await self._sizes(scale.target)
        before = Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)
        value = _desired(scale.target, scale.delta, desired, minimum, maximum)
        await self._set(scale.target, value)
        after = Capacity(value, minimum, maximum, at_maximum=value >= maximum)
        detail = f"{DESIRED} {desired} → {value} (max {maximum})"
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
        # The group's bounds may have moved since the scale-up: go back only as far as they let.
        value = min(max(before, minimum), maximum)
        if value == undo.after or not minimum <= value <= maximum:
            return Reverted(
                False,
                f"{DESIRED} stays {undo.after}: the group's MinSize is {minimum} and MaxSize "
                f"{maximum} now, and AWS keeps the desired capacity between them",
            )
        await self._set(target, value)
        left = ""
        if value != before:
            size = "MinSize" if value == minimum else "MaxSize"
            left = (
                f"{DESIRED} stays {value}, not {before}: the group's {size} is {value} now, "
                "and AWS keeps the desired capacity within its sizes"
            )
        return Reverted(True, f"{DESIRED} {undo.after} → {value}", left)

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        now = datetime.now(UTC)
        activities: list[Any] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            answer = await call(
                SERVICE,
                self._client.describe_scaling_activities,
                AutoScalingGroupName=target.target,
                MaxRecords=PAGE,
                **({"NextToken": token} if token else {}),
            )
            page = answer.get("Activities") if isinstance(answer, dict) else None
            page = page if isinstance(page, list) else []
            activities += page
            token = answer.get("NextToken") if isinstance(answer, dict) else None
            oldest = (
                _time(page[-1].get("StartTime")) if page and isinstance(page[-1], dict) else None
            )
            if not token or not page or (oldest is not None and oldest < now - RECENT):
                break
        return failed_activities({"Activities": activities}, now)

    async def _set(self, target: ScaleTarget, value: int) -> None:
        await call(
            SERVICE,
            self._client.set_desired_capacity,
            AutoScalingGroupName=target.target,
            DesiredCapacity=value,
            HonorCooldown=False,
        )

    async def _sizes(self, target: ScaleTarget) -> tuple[int, int, int]:
        """The group's (desired, minimum, maximum)."""
        answer = await call(
            SERVICE,
            self._client.describe_auto_scaling_groups,
            AutoScalingGroupNames=[target.target],
        )
        groups = answer.get("AutoScalingGroups") or []
        if not groups:
            raise BackendError(f"no Auto Scaling group named {target.target}", retryable=False)
        group = groups[0]
        return int(group["DesiredCapacity"]), int(group["MinSize"]), int(group["MaxSize"])


def failed_activities(answer: object, now: datetime) -> list[str]:
    """`DescribeScalingActivities`' failed or cancelled activities of the last hour, newest
    first, at most `MAX_FAILURES`: their StatusMessage (e.g. "We currently do not have sufficient
    g5.4xlarge capacity…", a vCPU limit), else their Description."""
    activities = answer.get("Activities") if isinstance(answer, dict) else None
    found: list[tuple[datetime, str]] = []
    for activity in activities if isinstance(activities, list) else []:
        if not isinstance(activity, dict) or activity.get("StatusCode") not in FAILED:
            continue
        started = _time(activity.get("StartTime"))
        if started is None or not now - RECENT <= started <= now + RECENT:
            continue
        said = activity.get("StatusMessage") or activity.get("Description")
        text = " ".join(said.split()) if isinstance(said, str) and said.strip() else ""
        what = "cancelled" if activity["StatusCode"] == "Cancelled" else "failed"
        text = text or "no reason given"
        found.append((started, f"scaling {what} at {started:%H:%M} UTC: {text}"))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [text[:400] for _, text in found[:MAX_FAILURES]]


def _time(value: object) -> datetime | None:
    """boto3 gives datetimes; the API's JSON shape has ISO 8601 text."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        return None
    return value.astimezone(UTC)


def _desired(target: ScaleTarget, delta: int, desired: int, minimum: int, maximum: int) -> int:
    """The desired capacity `delta` more asks for, or the refusal: the one check of a scale-up,
    made before the call and by a form before it offers one."""
    value = desired + delta
    if value > maximum:
        raise BackendError(
            f"desired capacity would become {value}, above the group's MaxSize "
            f"({maximum}): ask for at most +{max(maximum - desired, 0)}",
            retryable=False,
        )
    within_ceiling(target, value, "desired capacity")
    bounded(Bounds(minimum, maximum, value), NAMES, f"{DESIRED} {value}")
    return value
