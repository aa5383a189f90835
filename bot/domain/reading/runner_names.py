"""Runner types (`linux.2xlarge`, as `runs-on` names them) and their ARC scale sets
(`linux-2xlarge`): derived, `RUNNER_SCALE_SETS` naming only the exceptions; two names that
derive alike are one runner type (`runner_key`)."""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple, TypeVar

T = TypeVar("T")
# ARC's chart refuses a longer scale-set name (its objects' names add suffixes up to 63).
MAX_SCALE_SET_NAME = 45
_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_OUTSIDE = re.compile(r"[^a-z0-9-]")
# An object's name as Kubernetes takes it (RFC 1123 subdomain).
_KUBE_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def derived_scale_set(runner_type: str) -> str:
    """`linux.2xlarge` -> `linux-2xlarge`; a scale set's name derives to itself."""
    return _OUTSIDE.sub("-", runner_type.translate(_LOWER)).strip("-")


def runner_key(name: str) -> str:
    """What two names of one runner type have in common, an alert's label or a scale set."""
    return derived_scale_set(name) or name.casefold()


def same_type(name: str, runner_type: str) -> bool:
    """Whether two names are of one runner type (an alert's label, a reading's scale set)."""
    return name == runner_type or runner_key(name) == runner_key(runner_type)


def type_named(names: Collection[str], runner_type: str) -> str | None:
    """The one of `names` that is `runner_type`, named as a reading or an alert names it."""
    if runner_type in names:
        return runner_type
    key = runner_key(runner_type)
    return next((name for name in names if runner_key(name) == key), None)


def scale_set_problem(name: str) -> str:
    """Why ARC could not have a scale set of this name ("" when it could)."""
    if not _KUBE_NAME.fullmatch(name):
        return (
            f"{name!r} is not a Kubernetes name: lower-case letters, digits, - and ., "
            "beginning and ending with a letter or digit"
        )
    if len(name) > MAX_SCALE_SET_NAME:
        return f"{name!r} is longer than the {MAX_SCALE_SET_NAME} characters ARC allows"
    return ""


class ScaleSetName(NamedTuple):
    runner_type: str
    scale_set: str
    explicit: bool  # named by RUNNER_SCALE_SETS, not derived


class RunnerNames:
    """`RUNNER_SCALE_SETS` first, then the derived name of every type the bot knows."""

    def __init__(
        self, explicit: Mapping[str, str] | None = None, known: Iterable[str] = ()
    ) -> None:
        explicit = dict(explicit or {})
        self._explicit = {runner_key(t): scale_set for t, scale_set in explicit.items()}
        self._types = tuple(dict.fromkeys([*explicit, *known]))
        by_set: dict[str, str] = {}
        for runner_type, scale_set in explicit.items():
            by_set.setdefault(derived_scale_set(scale_set), runner_type)
        # Sorted: two known types that derive alike always give the same one.
        for runner_type in sorted(self._types):
            if runner_key(runner_type) not in self._explicit:
                by_set.setdefault(derived_scale_set(runner_type), runner_type)
        by_set.pop("", None)  # a name with nothing to derive names no scale set
        self._by_set = by_set

    def scale_set(self, runner_type: str) -> str:
        return self._explicit.get(runner_key(runner_type)) or derived_scale_set(runner_type)

    def runner_type(self, scale_set: str) -> str:
        """A name no known type claims stays as it is (matched by `runner_key`)."""
        return self._by_set.get(derived_scale_set(scale_set), scale_set)

    def renamed(self, types: Mapping[str, T]) -> dict[str, T]:
        """`types` keyed by the runner types they are; of two keys that are one type, the first."""
        found: dict[str, T] = {}
        for name, value in types.items():
            found.setdefault(self.runner_type(name), value)
        return found

    def table(self, types: Iterable[str] = ()) -> list[ScaleSetName]:
        """Each known type and each of `types`, with its scale set, as `queuepilot check` shows."""
        names = dict.fromkeys([*self._types, *types])
        return [ScaleSetName(t, self.scale_set(t), runner_key(t) in self._explicit) for t in names]
