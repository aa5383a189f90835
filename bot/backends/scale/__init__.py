"""Scaling a runner type up: a real call to the autoscaler, and its capacity before and after.

Every runner type that may be scaled is mapped in configuration to a target (what the backend
acts on) with a cap (the most runners one request may add) and optionally a ceiling (the largest
capacity queuepilot will ever set). Implementations side by side: `webhook.py` (a signed POST),
`arc.py` (an AutoscalingRunnerSet), `sqs.py` (PyTorch's scale-up queue), `asg.py` (an EC2 Auto
Scaling group). Every implementation raises `BackendError` only; a request the backend would
refuse (past its maximum, past the ceiling) is refused with the reason before anything changes.
The target and the capacity are values of the domain (`bot.domain.scaling`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.backends.errors import BackendError
from bot.domain.scaling import Capacity, ScaleTarget


@dataclass(frozen=True)
class ScaleRequest:
    target: ScaleTarget
    delta: int
    incident_id: str
    requested_by: str
    # ARC at its maximum: raise maxRunners instead of minRunners.
    raise_maximum: bool = False
    request_id: str = ""


@dataclass(frozen=True)
class ScaleResult:
    """What the backend did, in words for the thread: e.g. "minRunners 40 → 44 (max 120)"."""

    detail: str
    before: Capacity | None = None
    after: Capacity | None = None


class Scaler(Protocol):
    # How messages name the backend: "ARC", "the scaler webhook", ...
    name: str
    # Whether `raise_maximum` means anything here (ARC only).
    can_raise_maximum: bool

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        """The target's capacity now; None when this backend cannot read it in advance."""
        ...

    async def scale(self, request: ScaleRequest) -> ScaleResult:
        """Add `delta` runners of capacity to the target."""
        ...


def count_of(value: object, *, most: int = 10**9) -> int | None:
    """A runner count from a backend's JSON: a whole number in 0..most, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        return None
    return value


def within_ceiling(target: ScaleTarget, value: int, what: str) -> None:
    """Refuse a new capacity above the target's ceiling, naming both."""
    if target.ceiling is not None and value > target.ceiling:
        raise BackendError(
            f"{what} would become {value}, above the ceiling of {target.ceiling} configured "
            f"for {target.runner_type}",
            retryable=False,
        )
