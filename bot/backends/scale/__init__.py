"""Scaling a runner type up: a real call to the autoscaler, and its capacity before and after.

Every runner type that may be scaled is mapped in configuration to a target (what the backend
acts on) with a cap (the most runners one request may add) and optionally a ceiling (the largest
capacity queuepilot will ever set). Implementations side by side: `webhook.py` (a signed POST),
`arc.py` (an AutoscalingRunnerSet), `sqs.py` (PyTorch's scale-up queue), `asg.py` (an EC2 Auto
Scaling group). Every implementation raises `BackendError` only; a request the backend would
refuse (past its maximum, past the ceiling) is refused with the reason before anything changes.
The target and the capacity are values of the domain (`bot.domain.scaling`).

A scale-up that can be put back says what it changed (`Undo`); `revert` puts it back only while
the value is still the one set, and otherwise says what it is now and, where the API tells, who
changed it. `failures` reads the autoscaler's own recent errors, for diagnostics.

No write leaves a target invalid (`bounded`): a scale-up that would is refused, and a put-back
that would goes back only as far as the target's other bounds allow and says what it left.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

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
class Undo:
    """What a scale-up changed, enough to put it back.

    `field` as messages name it ("minRunners", "desired capacity"); `before` None when the field
    was unset (ARC: an absent minRunners is 0, and unset again on revert). `version` is the
    resource version the change produced (ARC's `metadata.resourceVersion`), "" where the
    backend has none (an ASG: the precondition is that the value is still `after`).
    """

    field: str
    before: int | None
    after: int
    version: str = ""

    def dump(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, data: object) -> Undo | None:
        """From `dump()`'s shape as stored in Redis; None when it is not that shape."""
        if not isinstance(data, dict):
            return None
        field, before, after = data.get("field"), data.get("before"), data.get("after")
        version = data.get("version", "")
        if not isinstance(field, str) or not field or not isinstance(version, str):
            return None
        if count_of(after) is None or (before is not None and count_of(before) is None):
            return None
        return cls(field, before, after, version)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ScaleResult:
    """What the backend did, in words for the thread: e.g. "minRunners 40 → 44 (max 120)"."""

    detail: str
    before: Capacity | None = None
    after: Capacity | None = None
    # How to put it back; None when this backend cannot (its `cannot_undo` says why).
    undo: Undo | None = None


@dataclass(frozen=True)
class Reverted:
    """What `revert` did: put back (`done`), or left alone with the reason, in words. `left`
    says what was not put back and why, when the target's other bounds allowed only part of
    the way back ("maxRunners stays 12, not 10: minRunners is 12 now")."""

    done: bool
    detail: str
    left: str = ""


class Scaler(Protocol):
    # How messages name the backend: "ARC", "the scaler webhook", ...
    name: str
    # Whether `raise_maximum` means anything here (ARC only).
    can_raise_maximum: bool
    # Why a scale-up through this backend cannot be put back ("" when it can).
    cannot_undo: str
    # Fields in the order their put-backs go when several of one target are due at once (ARC:
    # the floor before the ceiling, so a lowered maxRunners never meets a raised minRunners).
    revert_order: tuple[str, ...]

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        """The target's capacity now; None when this backend cannot read it in advance."""
        ...

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        """Why `scale` would refuse adding `delta` (to the maximum, with `raise_maximum`) to the
        target at `capacity`, in the words it would refuse with; "" when it would not, or this
        backend cannot tell in advance. The check `scale` itself makes, so a form can offer
        only what the target accepts."""
        ...

    async def scale(self, request: ScaleRequest) -> ScaleResult:
        """Add `delta` runners of capacity to the target."""
        ...

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        """Put `undo.before` back, only while the value is still `undo.after`."""
        ...

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        """The autoscaler's recent failures for the target in words, newest first, at most
        `MAX_FAILURES`; None when this backend cannot read them."""
        ...


MAX_FAILURES = 5


def count_of(value: object, *, most: int = 10**9) -> int | None:
    """A runner count from a backend's JSON: a whole number in 0..most, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        return None
    return value


@dataclass(frozen=True)
class Bounds:
    """A target's counts that must hold together, as its autoscaler reads them: ARC's
    `minRunners ≤ maxRunners` (its listener refuses to start otherwise), an ASG's
    `MinSize ≤ desired ≤ MaxSize`. None: unset (no floor, or unbounded)."""

    minimum: int | None
    maximum: int | None
    desired: int | None = None

    def problem(self, names: tuple[str, str, str]) -> str:
        """What is wrong with these counts, in the backend's `names` for (minimum, maximum,
        desired); "" when they hold."""
        low, high, want = names
        counts = {low: self.minimum, high: self.maximum, want: self.desired}
        negative = [f"{name} {value}" for name, value in counts.items() if (value or 0) < 0]
        if negative:
            return f"{', '.join(negative)} below 0"
        floor, ceiling = self.minimum or 0, self.maximum
        if ceiling is not None and floor > ceiling:
            return f"{low} {floor} above {high} {ceiling}"
        if self.desired is not None and self.desired < floor:
            return f"{want} {self.desired} below {low} {floor}"
        if self.desired is not None and ceiling is not None and self.desired > ceiling:
            return f"{want} {self.desired} above {high} {ceiling}"
        return ""


def bounded(bounds: Bounds, names: tuple[str, str, str], what: str) -> None:
    """Refuse a write that would leave the target's counts invalid, saying which and why."""
    problem = bounds.problem(names)
    if problem:
        raise BackendError(
            f"{what} would leave {problem}, which the autoscaler cannot run with: nothing "
            "was changed",
            retryable=False,
        )


def within_ceiling(target: ScaleTarget, value: int, what: str) -> None:
    """Refuse a new capacity above the target's ceiling, naming both."""
    if target.ceiling is not None and value > target.ceiling:
        raise BackendError(
            f"{what} would become {value}, above the ceiling of {target.ceiling} configured "
            f"for {target.runner_type}",
            retryable=False,
        )
