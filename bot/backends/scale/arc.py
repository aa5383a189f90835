"""The `arc` scaler: raise an AutoscalingRunnerSet's floor (or ceiling) through the Kubernetes API.

ARC runs `min(minRunners + assigned jobs, maxRunners)` runners, so raising `minRunners` adds
runners only below the maximum; on a set at its maximum it changes nothing, and raising
`maxRunners` is what helps (within the target's ceiling). The patch is a JSON merge patch (custom
resources take no strategic merge) carrying the resourceVersion read, so a concurrent change makes
it fail (409) and it is recomputed rather than overwriting. RBAC: `get` and `patch` on
`autoscalingrunnersets` in the scale sets' namespace.

Putting a scale-up back reads the set first: while the field still holds the value set from
Slack, the old value goes back under the version read (a 409 means a write came between, often
just ARC's controller updating the status: read again); once it holds anything else, it is left
alone, and the managedFields entry that last wrote it says who (Helm, Argo CD, kubectl) and when.

ARC's listener refuses to start with `maxRunners < minRunners` (its config validation), so no
write here leaves the set that way: a scale-up that would is refused, and a put-back of
maxRunners below a minRunners raised since (from Slack or by hand) stops at that minRunners and
says so. Two scale-ups of one set are put back floor first (`revert_order`: a maxRunners
put-back waits for a minRunners one of ours still to go, in `bot.actions.scale_reverts`), so
each goes back whole.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import json_object, request
from bot.backends.kube import KubeAccess
from bot.backends.scale import (
    Bounds,
    Reverted,
    ScaleRequest,
    ScaleResult,
    Undo,
    bounded,
    count_of,
    within_ceiling,
)
from bot.config import Settings
from bot.domain.scaling import Capacity, ScaleTarget, managed_by

API = "/apis/actions.github.com/v1alpha1"
SERVICE = "The Kubernetes API"
CONFLICT_RETRIES = 3
# How the API server's managedFields name our writes (`?fieldManager=`).
FIELD_MANAGER = "queuepilot"
# The counts as ARC's listener checks them (it also has no desired count of its own to check).
NAMES = ("minRunners", "maxRunners", "runners")


class ArcScaler:
    name = "ARC"
    can_raise_maximum = True
    revert_order: tuple[str, ...] = ("minRunners", "maxRunners")
    cannot_undo = ""

    def __init__(
        self, config: Settings, access: KubeAccess, client: httpx.AsyncClient | None = None
    ) -> None:
        self._namespace = config.scaler_arc_namespace
        self._access = access
        self._client = client or access.client(config.backend_timeout_seconds)

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        return _capacity(await self._get(target))

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        if capacity is None:
            return ""
        try:
            _planned(target, delta, raise_maximum, capacity)
        except BackendError as exc:
            return str(exc)
        return ""

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        for _ in range(CONFLICT_RETRIES):
            runner_set = await self._get(scale.target)
            before = _capacity(runner_set)
            field, value, after = _planned(scale.target, scale.delta, scale.raise_maximum, before)
            patch = {"metadata": {"resourceVersion": _version(runner_set)}, "spec": {field: value}}
            try:
                answer = await self._patch(scale.target, patch)
            except BackendError as exc:
                if exc.status == 409:
                    continue  # changed since read: recompute from the new state
                raise
            shown = before.minimum if field == "minRunners" else before.maximum
            bounds = f" (maxRunners {before.maximum})" if field == "minRunners" else ""
            detail = f"{field} {shown if shown is not None else 'unset'} → {value}{bounds}"
            # The answer's version is what our write produced: the revert's precondition.
            undo = Undo(field, _spec_value(runner_set, field), value, _version(answer))
            return ScaleResult(detail, before, after, undo)
        raise BackendError("the scale set kept changing while being patched", retryable=True)

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        field = undo.field
        for _ in range(CONFLICT_RETRIES):
            runner_set = await self._get(target)
            now = _spec_value(runner_set, field)
            if now == undo.before:
                return Reverted(True, f"{field} was already back to {_shown(undo.before)}")
            if now != undo.after:
                who = changed_by(runner_set, field)
                return Reverted(
                    False,
                    f"{field} is {_shown(now)} now, not the {undo.after} set from Slack"
                    + (f"; changed by {who}" if who else ""),
                )
            value, left = _way_back(runner_set, undo)
            if value == undo.after:
                return Reverted(False, left)
            patch = {"metadata": {"resourceVersion": _version(runner_set)}, "spec": {field: value}}
            try:
                await self._patch(target, patch)
            except BackendError as exc:
                if exc.status == 409:
                    continue  # written since it was read: read again
                raise
            return Reverted(True, f"{field} {undo.after} → {_shown(value)}", left)
        raise BackendError("the scale set kept changing while being put back", retryable=True)

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        return ephemeral_failures(await self._get(target))

    async def _get(self, target: ScaleTarget) -> dict[str, Any]:
        path = _path(self._namespace, target)
        response = await request(self._client, SERVICE, "GET", path, headers=self._access.headers())
        return json_object(response, SERVICE)

    async def _patch(self, target: ScaleTarget, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch; the API server answers with the object as written."""
        response = await request(
            self._client,
            SERVICE,
            "PATCH",
            _path(self._namespace, target),
            content=json.dumps(body).encode(),
            headers={
                **self._access.headers(),
                "Content-Type": "application/merge-patch+json",
            },
            params={"fieldManager": FIELD_MANAGER},
        )
        return json_object(response, SERVICE)


def _path(namespace: str, target: ScaleTarget) -> str:
    """`namespace/name`, or a bare name in the configured namespace."""
    space, _, name = target.target.rpartition("/")
    space = space or namespace
    return f"{API}/namespaces/{quote(space, safe='')}/autoscalingrunnersets/{quote(name, safe='')}"


def _capacity(runner_set: dict[str, Any]) -> Capacity:
    spec = runner_set.get("spec") if isinstance(runner_set.get("spec"), dict) else {}
    status = runner_set.get("status") if isinstance(runner_set.get("status"), dict) else {}
    minimum = count_of(spec.get("minRunners")) or 0  # absent: 0
    maximum = count_of(spec.get("maxRunners"))  # absent: unbounded
    current = count_of(status.get("currentRunners"))
    at_max = maximum is not None and current is not None and current >= maximum
    metadata = runner_set.get("metadata") if isinstance(runner_set.get("metadata"), dict) else {}
    return Capacity(
        current=current,
        minimum=minimum,
        maximum=maximum,
        at_maximum=at_max,
        managed_by=managed_by(metadata.get("labels"), metadata.get("annotations")),
    )


def _spec_value(runner_set: dict[str, Any], field: str) -> int | None:
    """The field as the spec has it: None when absent (or not a count)."""
    spec = runner_set.get("spec")
    return count_of(spec.get(field)) if isinstance(spec, dict) else None


def _shown(value: int | None) -> str:
    return "unset" if value is None else str(value)


def changed_by(runner_set: dict[str, Any], field: str) -> str:
    """Who last wrote `spec.<field>`, from `metadata.managedFields`: "helm at 2026-07-14 09:12
    UTC"; the latest entry when none names the field; "" when the API server sent none."""
    metadata = runner_set.get("metadata")
    entries = metadata.get("managedFields") if isinstance(metadata, dict) else None
    if not isinstance(entries, list):
        return ""
    valid = [e for e in entries if isinstance(e, dict) and isinstance(e.get("manager"), str)]
    if not valid:
        return ""
    touching = [e for e in valid if _touches(e.get("fieldsV1"), field)] or valid
    # RFC 3339 times in UTC sort as text; an entry without one counts as oldest.
    latest = max(enumerate(touching), key=lambda pair: (str(pair[1].get("time") or ""), pair[0]))[1]
    manager = str(latest["manager"])[:100] or "an unnamed manager"
    when = _when(latest.get("time"))
    return f"{manager} at {when}" if when else manager


def _touches(fields: object, field: str) -> bool:
    spec = fields.get("f:spec") if isinstance(fields, dict) else None
    return isinstance(spec, dict) and f"f:{field}" in spec


def _when(value: object) -> str:
    if not isinstance(value, str):
        return ""
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if at.tzinfo is None:
        return ""
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def ephemeral_failures(runner_set: dict[str, Any]) -> list[str]:
    """ARC's own count of ephemeral runners that failed to start, with the set's phase."""
    status = runner_set.get("status")
    status = status if isinstance(status, dict) else {}
    failed = count_of(status.get("failedEphemeralRunners"))
    if not failed:
        return []
    phase = status.get("phase")
    tail = f" (phase {phase[:40]})" if isinstance(phase, str) and phase else ""
    runners = "runner" if failed == 1 else "runners"
    return [f"{failed} ephemeral {runners} failed to start{tail}"]


def _way_back(runner_set: dict[str, Any], undo: Undo) -> tuple[int | None, str]:
    """How far `undo.field` can go back toward `undo.before` with the set's other bound as it
    is now, and what was left and why ("" when all the way). `undo.after` when not at all."""
    minimum = _spec_value(runner_set, "minRunners")
    maximum = _spec_value(runner_set, "maxRunners")
    listener = "ARC's listener does not run with maxRunners below minRunners"
    if undo.field == "maxRunners":
        floor = minimum or 0
        if undo.before is None or undo.before >= floor:
            return undo.before, ""
        if floor >= undo.after:
            return undo.after, (
                f"maxRunners stays {undo.after}: minRunners is {floor} now, and {listener}"
            )
        return (
            floor,
            f"maxRunners stays {floor}, not {undo.before}: minRunners is {floor} now, "
            f"and {listener}",
        )
    if maximum is not None and (undo.before or 0) > maximum:
        # Someone set maxRunners below the old floor: lowering the floor to it cannot make the
        # set valid, and going below the old value is not putting back.
        return undo.after, (
            f"{undo.field} stays {undo.after}: maxRunners is {maximum} now, below the "
            f"{_shown(undo.before)} it would go back to, and {listener}"
        )
    return undo.before, ""


def _planned(
    target: ScaleTarget, delta: int, raise_maximum: bool, before: Capacity
) -> tuple[str, int, Capacity]:
    """The field to patch, its new value and the capacity after, or the refusal: the one check
    of a scale-up, made before the patch and by a form before it offers one."""
    field, value = _new_value(target, delta, raise_maximum, before)
    after = _with(before, field, value)
    bounded(Bounds(after.minimum, after.maximum), NAMES, f"{field} {value}")
    return field, value, after


def _new_value(
    target: ScaleTarget, delta: int, raise_maximum: bool, before: Capacity
) -> tuple[str, int]:
    minimum, maximum = before.minimum or 0, before.maximum
    if raise_maximum:
        if maximum is None:
            raise BackendError(
                "maxRunners is not set (unbounded): nothing to raise", retryable=False
            )
        within_ceiling(target, maximum + delta, "maxRunners")
        return "maxRunners", maximum + delta
    if before.at_maximum:
        raise BackendError(
            f"the scale set is at its maximum ({maximum} runners): raising minRunners changes "
            "nothing. Raise maxRunners instead",
            retryable=False,
        )
    value = minimum + delta
    if maximum is not None and value > maximum:
        raise BackendError(
            f"minRunners would become {value}, above maxRunners ({maximum}): ask for at most "
            f"+{max(maximum - minimum, 0)}, or raise maxRunners",
            retryable=False,
        )
    within_ceiling(target, value, "minRunners")
    return "minRunners", value


def _with(before: Capacity, field: str, value: int) -> Capacity:
    if field == "minRunners":
        return Capacity(before.current, value, before.maximum)
    return Capacity(before.current, before.minimum, value)


def _version(runner_set: dict[str, Any]) -> str:
    metadata = runner_set.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    if not isinstance(version, str) or not version:
        raise BackendError("the scale set came without a resourceVersion", retryable=True)
    return version
