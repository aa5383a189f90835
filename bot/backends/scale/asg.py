"""The `aws-asg` scaler: raise an EC2 Auto Scaling group's desired capacity.

For EC2 fleets built on Auto Scaling groups: `DescribeAutoScalingGroups` first (desired, minimum,
maximum), then `SetDesiredCapacity` to desired + N, refused when that passes the group's MaxSize
(AWS would refuse it too) or the target's ceiling. IAM: `autoscaling:DescribeAutoScalingGroups`
and `autoscaling:SetDesiredCapacity` on the groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.backends.errors import BackendError
from bot.backends.scale import ScaleRequest, ScaleResult, within_ceiling
from bot.backends.scale.aws import AwsConfig, call, client
from bot.domain.scaling import Capacity, ScaleTarget

SERVICE = "AWS Auto Scaling"


@dataclass(frozen=True)
class AsgScalerConfig:
    aws: AwsConfig = field(default_factory=AwsConfig)


class AsgScaler:
    name = "AWS Auto Scaling"
    can_raise_maximum = False

    def __init__(self, config: AsgScalerConfig, autoscaling: Any | None = None) -> None:
        self._config = config
        self._autoscaling = autoscaling

    @property
    def _client(self) -> Any:
        if self._autoscaling is None:
            self._autoscaling = client("autoscaling", self._config.aws)
        return self._autoscaling

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        desired, minimum, maximum = await self._sizes(target)
        return Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        desired, minimum, maximum = await self._sizes(scale.target)
        before = Capacity(desired, minimum, maximum, at_maximum=desired >= maximum)
        value = desired + scale.delta
        if value > maximum:
            raise BackendError(
                f"desired capacity would become {value}, above the group's MaxSize "
                f"({maximum}): ask for at most +{max(maximum - desired, 0)}",
                retryable=False,
            )
        within_ceiling(scale.target, value, "desired capacity")
        await call(
            SERVICE,
            self._client.set_desired_capacity,
            AutoScalingGroupName=scale.target.target,
            DesiredCapacity=value,
            HonorCooldown=False,
        )
        after = Capacity(value, minimum, maximum, at_maximum=value >= maximum)
        detail = f"desired capacity {desired} → {value} (max {maximum})"
        return ScaleResult(detail, before, after)

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
