"""A put-back followed to the fleet: the scaler's runners read again after a scale-up went back,
until they are within the bound put back or SCALE_VERIFY_SECONDS pass; decided once per bound."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.domain.scale.scaling import Capacity, ScaleTarget


@dataclass(frozen=True)
class Back:
    """`field` of `target` put back to `bound` (None: unset, bounding nothing)."""

    target: ScaleTarget
    field: str
    bound: int | None


def bounding(backs: list[Back], order: tuple[str, ...]) -> list[Back]:
    """Per target, the bound its runners are held within: of the fields put back together, the
    one put back last (ARC: maxRunners after minRunners)."""
    last: dict[str, Back] = {}
    for back in backs:
        kept = last.get(back.target.target)
        rank = order.index(back.field) if back.field in order else -1
        if kept is None or rank >= (order.index(kept.field) if kept.field in order else -1):
            last[back.target.target] = back
    return list(last.values())


@dataclass(frozen=True)
class Landed:
    """`back`: the runners read were within the bound (None: not known, `why` says why)."""

    back: bool | None
    read_at: datetime
    runners: int | None = None
    why: str = ""


def landed(
    back: Back, read: Capacity | str | None, *, scaler: str, now: datetime, due: datetime
) -> Landed | None:
    """`read`: the scaler's capacity, or why it could not be read. Back once its runners are
    within the bound; by `due`, still above it, or not known; None: look again."""
    runners = read.current if isinstance(read, Capacity) else None
    if runners is not None and (back.bound is None or runners <= back.bound):
        return Landed(True, now, runners)
    if now < due:
        return None
    if runners is not None:
        return Landed(False, now, runners)
    if isinstance(read, str):
        return Landed(None, now, why=read)
    why = f"{scaler} reads no runner count" if read is not None else f"{scaler} reads no runners"
    return Landed(None, now, why=why)
