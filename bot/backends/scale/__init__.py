"""Scaling a runner type up. A scale-up the backend would refuse, or that leaves its counts
invalid, is refused before anything changes; a put-back only while the value is the one set."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from bot.backends.http import BackendError
from bot.domain.scale.scaling import Capacity, ScaleTarget

MAX_FAILURES = 5


@dataclass(frozen=True)
class ScaleRequest:
    target: ScaleTarget
    delta: int
    incident_id: str
    requested_by: str
    raise_maximum: bool = False  # ARC at its maximum: raise maxRunners instead of minRunners
    request_id: str = ""


@dataclass(frozen=True)
class Undo:
    """What a scale-up changed (`before` None: unset), and the resource version it produced."""

    field: str
    before: int | None
    after: int
    version: str = ""

    def dump(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, data: object) -> Undo | None:
        """From `dump()`'s shape in Redis; None when it is not that shape."""
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
    detail: str  # for the thread: "minRunners 40 → 44 (maxRunners 120)"
    before: Capacity | None = None
    after: Capacity | None = None
    undo: Undo | None = None  # None when this backend cannot put it back (`cannot_undo`)


@dataclass(frozen=True)
class Reverted:
    done: bool
    detail: str
    left: str = ""  # what was not put back and why


class Scaler(Protocol):
    """The defaults fit a backend that only receives (a webhook, a queue): it cannot be read in
    advance, tell a refusal before the call, put a scale-up back or report failures."""

    name: str  # how messages name the backend: "ARC", "the scaler webhook"
    can_raise_maximum: bool = False  # whether `raise_maximum` means anything (ARC only)
    cannot_undo: str = ""  # why a scale-up cannot be put back ("" when it can)
    # One target's put-backs due at once, in order (ARC: the floor before the ceiling, so a
    # lowered maxRunners never meets a raised minRunners).
    revert_order: tuple[str, ...] = ()
    spares_jobs: str = ""  # why a put-back cut no running job ("" when no source shows it)

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        return None

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        """Why `scale` would refuse adding `delta` ("" when it would not, or cannot tell)."""
        return ""

    async def scale(self, request: ScaleRequest) -> ScaleResult: ...

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        """Put `undo.before` back, only while the value is still `undo.after`."""
        raise BackendError(f"cannot be undone: {self.cannot_undo}", retryable=False)

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        """The autoscaler's recent failures, newest first, at most `MAX_FAILURES`; None: unknown."""
        return None

    async def since(self, target: ScaleTarget, at: datetime) -> str:
        """What the autoscaler shows of a scale-up asked at `at` whose runners did not come ("":
        it cannot tell)."""
        return ""


def refused(check: Any, *args: Any) -> str:
    """What `check(*args)` refuses with; "" when it passes."""
    try:
        check(*args)
    except BackendError as exc:
        return str(exc)
    return ""


def count_of(value: object) -> int | None:
    """A runner count from a backend's JSON: a whole number in 0..10⁹, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
        return None
    return value


def problem(
    minimum: int | None, maximum: int | None, desired: int | None, names: tuple[str, str, str]
) -> str:
    """What breaks minimum ≤ desired ≤ maximum (None: unset), in the backend's `names`."""
    low, high, want = names
    counts = {low: minimum, high: maximum, want: desired}
    if negative := [f"{name} {value}" for name, value in counts.items() if (value or 0) < 0]:
        return f"{', '.join(negative)} below 0"
    floor = minimum or 0
    if maximum is not None and floor > maximum:
        return f"{low} {floor} above {high} {maximum}"
    if desired is not None and desired < floor:
        return f"{want} {desired} below {low} {floor}"
    if desired is not None and maximum is not None and desired > maximum:
        return f"{want} {desired} above {high} {maximum}"
    return ""


def checked(
    target: ScaleTarget,
    counts: tuple[int | None, int | None, int | None],
    names: tuple[str, str, str],
    field: str,
    value: int,
) -> None:
    """Refuse `field` = `value` above the target's ceiling, or leaving `counts` invalid."""
    if target.ceiling is not None and value > target.ceiling:
        said = f"{field} would become {value}, above the ceiling of {target.ceiling} configured "
        raise BackendError(f"{said}for {target.runner_type}", retryable=False)
    if found := problem(*counts, names):
        said = f"{field} {value} would leave {found}, which the autoscaler cannot run with"
        raise BackendError(said + ": nothing was changed", retryable=False)
