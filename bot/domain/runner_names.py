"""Runner types and their ARC scale sets: one mapping, the common case derived.

An alert names a runner type as the jobs' `runs-on` label does (`linux.2xlarge`); ARC names the
scale set that serves it as a Kubernetes object (`linux-2xlarge`): the AutoscalingRunnerSet, the
`name` of its listener metrics (less ARC's runner-set suffix) and so the `arc` scaler's target.
Installs name a scale set as its Helm release, a Kubernetes name: lower case, of `a-z`, `0-9`
and `-` (dots are allowed but shunned: they are not DNS labels), beginning and ending with a
letter or digit, and at most 45 characters (ARC's chart refuses more). So a type's scale set is
derived by lower-casing it and making every other character `-` (`derived_scale_set`), and
`RUNNER_SCALE_SETS` names only the exceptions (`RunnerNames`).

Two names are of one runner type when they derive alike (`runner_key`): an alert's
`linux.2xlarge` is the reading's `linux-2xlarge`, with nothing configured. Two labels that differ
only in case and punctuation are taken as one type; their derived scale sets could not differ.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeVar

T = TypeVar("T")
# ARC's chart refuses a longer scale-set name (its objects' names add suffixes up to 63).
MAX_SCALE_SET_NAME = 45
_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_OUTSIDE = re.compile(r"[^a-z0-9-]")
# An object's name as Kubernetes takes it (RFC 1123 subdomain).
_KUBE_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def derived_scale_set(runner_type: str) -> str:
    """`linux.2xlarge` -> `linux-2xlarge`: ASCII lower-cased, every character outside `a-z`,
    `0-9` and `-` made `-`, and the ends trimmed of `-` (a Kubernetes name begins and ends with
    a letter or digit). "" when nothing of the name is left. A scale set's name derives to
    itself."""
    return _OUTSIDE.sub("-", runner_type.translate(_LOWER)).strip("-")


def runner_key(name: str) -> str:
    """What two names of one runner type have in common, be each an alert's label or a
    reading's scale set: the derived scale set (the name casefolded when none derives)."""
    return derived_scale_set(name) or name.casefold()


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
    """One row of the mapping, as `queuepilot check` shows it."""

    runner_type: str
    scale_set: str
    explicit: bool  # named by RUNNER_SCALE_SETS, not derived


class RunnerNames:
    """Runner type <-> scale set: the `explicit` entries (`RUNNER_SCALE_SETS`: runner type ->
    scale set) first, then the derived name of every runner type the bot knows (`known`: the
    scale targets' types). Types are looked up by `runner_key`, scale sets in derived form."""

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
        """The scale set serving `runner_type`: its explicit one, else the derived."""
        return self._explicit.get(runner_key(runner_type)) or derived_scale_set(runner_type)

    def runner_type(self, scale_set: str) -> str:
        """The known runner type `scale_set` serves (a reading's series name, less ARC's
        suffix): the type naming it explicitly, else a known type deriving to it. A name no
        known type claims stays as it is: the incidents still match it by `runner_key`."""
        return self._by_set.get(derived_scale_set(scale_set), scale_set)

    def renamed(self, types: Mapping[str, T]) -> dict[str, T]:
        """`types` keyed by the runner types they are (`runner_type`): an alert rule that names
        a scale set (ARC's `name` label) speaks of the same types as the readings; of two keys
        that are one type, the first is kept."""
        found: dict[str, T] = {}
        for name, value in types.items():
            found.setdefault(self.runner_type(name), value)
        return found

    def table(self, types: Iterable[str] = ()) -> list[ScaleSetName]:
        """Each known type and each of `types` (say, the alert rules' types), with its scale
        set and whether `RUNNER_SCALE_SETS` names it; in the order given, known ones first."""
        names = dict.fromkeys([*self._types, *types])
        return [ScaleSetName(t, self.scale_set(t), runner_key(t) in self._explicit) for t in names]
