"""The `arc` scaler: raise an AutoscalingRunnerSet's floor (or, at its maximum, its ceiling: ARC
runs `min(minRunners + assigned jobs, maxRunners)` runners), each write a JSON merge patch under
the resourceVersion read, so a helm or kubectl write meanwhile is a 409, not overwritten."""

from __future__ import annotations

import re
from typing import Any

from lightkube import AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

from bot.backends.http import BackendError, Counted, shortened, uncounted
from bot.backends.kube import SERVICE, KubeAccess, Refusal, call
from bot.backends.scale import (
    Reverted,
    Scaler,
    ScaleRequest,
    ScaleResult,
    Undo,
    checked,
    count_of,
    refused,
)
from bot.config import Settings
from bot.domain.alerting.alerts import time_of
from bot.domain.scale.scaling import Capacity, ScaleTarget, managed_by

RUNNER_SETS = create_namespaced_resource(
    "actions.github.com", "v1alpha1", "AutoscalingRunnerSet", "autoscalingrunnersets"
)
CONFLICT_RETRIES = 3
FIELD_MANAGER = "queuepilot"  # how managedFields name our writes
NAMES = ("minRunners", "maxRunners", "runners")  # as ARC's listener checks them
LISTENER = "ARC's listener does not run with maxRunners below minRunners"
# Who the API server says asked, in its Forbidden message (`User "system:serviceaccount:…"`).
ASKER = re.compile(r'User "([^"]{1,200})"')
# A validating admission policy's denial, as apiserver's policy dispatcher words it: the policy,
# its binding, and the first failed validation's message.
DENIED = re.compile(
    r"ValidatingAdmissionPolicy '([^']{1,253})'(?: with binding '[^']{1,253}')? "
    r"denied request: (.+)",
    re.DOTALL,
)
DENIED_SAID = 240  # of the policy's own message, in a reply
# A namespace's and a set's names as Kubernetes allows them (lightkube puts them in the path).
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


class ArcScaler(Scaler):
    name = "ARC"
    can_raise_maximum = True
    revert_order = ("minRunners", "maxRunners")
    # ARC deletes only runners without a job; the Actions service refuses to remove a busy one
    # (actions-runner-controller adrs/2022-12-27-pick-the-right-runner-to-scale-down.md).
    spares_jobs = "ARC removes only runners without a job, so no running job was cut"

    def __init__(
        self,
        config: Settings,
        access: KubeAccess,
        client: AsyncClient | None = None,
        *,
        counted: Counted = uncounted,
    ) -> None:
        self._counted = counted
        self._namespace = config.scaler_arc_namespace
        self._server = access.server
        self._timeout = config.backend_timeout_seconds
        self._client = client or access.client(self._timeout)

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        return _capacity(await self._call(target))

    def refusal(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, *, raise_maximum: bool
    ) -> str:
        return "" if capacity is None else refused(_planned, target, delta, raise_maximum, capacity)

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        for _ in range(CONFLICT_RETRIES):
            runner_set = await self._call(scale.target)
            before = _capacity(runner_set)
            field, value, after = _planned(scale.target, scale.delta, scale.raise_maximum, before)
            answer = await self._patch(scale.target, runner_set, field, value)
            if answer is None:
                continue
            shown = before.minimum if field == "minRunners" else before.maximum
            bounds = f" (maxRunners {before.maximum})" if field == "minRunners" else ""
            detail = f"{field} {_shown(shown)} → {value}{bounds}"
            # The answer's version is what our write produced: the revert's precondition.
            undo = Undo(field, _spec_value(runner_set, field), value, _version(answer))
            return ScaleResult(detail, before, after, undo)
        raise BackendError("the scale set kept changing while being patched", retryable=True)

    async def revert(self, target: ScaleTarget, undo: Undo) -> Reverted:
        field = undo.field
        for _ in range(CONFLICT_RETRIES):
            runner_set = await self._call(target)
            now = _spec_value(runner_set, field)
            if now == undo.before:
                return Reverted(True, f"{field} was already back to {_shown(undo.before)}")
            if now != undo.after:
                who = changed_by(runner_set, field)
                said = f"{field} is {_shown(now)} now, not the {undo.after} set from Slack"
                return Reverted(False, said + (f"; changed by {who}" if who else ""))
            value, left = _way_back(runner_set, undo)
            if value == undo.after:
                return Reverted(False, left)
            if await self._patch(target, runner_set, field, value) is not None:
                return Reverted(True, f"{field} {undo.after} → {_shown(value)}", left)
        raise BackendError("the scale set kept changing while being put back", retryable=True)

    async def failures(self, target: ScaleTarget) -> list[str] | None:
        return ephemeral_failures(await self._call(target))

    async def _patch(
        self, target: ScaleTarget, read: dict[str, Any], field: str, value: int | None
    ) -> dict[str, Any] | None:
        """The set as written under the version read, or None when it was written since."""
        patch = {"metadata": {"resourceVersion": _version(read)}, "spec": {field: value}}
        try:
            return await self._call(target, patch)
        except BackendError as exc:
            if exc.status == 409:
                return None
            raise

    async def _call(
        self, target: ScaleTarget, patch: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The set as read, or as written by the merge `patch`."""
        space, _, name = target.target.rpartition("/")  # `namespace/name`, or a bare name
        space = space or self._namespace
        if not (LABEL.fullmatch(space) and SUBDOMAIN.fullmatch(name)):
            said = f"{target.target} is not `namespace/name` of an AutoscalingRunnerSet"
            raise BackendError(said, retryable=False)
        request = (
            self._client.get(RUNNER_SETS, name, namespace=space) if patch is None
            else self._client.patch(
                RUNNER_SETS, name, patch, namespace=space, patch_type=PatchType.MERGE,
                field_manager=FIELD_MANAGER,
            )
        )  # fmt: skip
        try:
            found = await call(request, self._counted, timeout_s=self._timeout, server=self._server)
        except BackendError as exc:
            if exc.status == 403:
                raise forbidden(exc, "patch" if patch is not None else "get", space, name) from None
            raise
        return found.to_dict()


def forbidden(exc: BackendError, verb: str, namespace: str, name: str) -> BackendError:
    """A 403 said whole, with its fix (the API server's message runs past what a reply shows):
    an admission policy's denial in its own words, else RBAC's. Never retried: a binding does
    not appear alone, and a policy's verdict stands until someone changes the chart's values."""
    whole = exc.whole if isinstance(exc, Refusal) else str(exc)
    policy = DENIED.search(whole)
    if policy:
        said = f"{SERVICE} answered 403 Forbidden: its admission policy {policy.group(1)[:100]} "
        said += f"denied the change: {shortened(policy.group(2), DENIED_SAID)}. Its ceilings are "
        said += "SCALER_TARGETS' `ceiling`s, as the chart rendered them; the bot's own (the same "
        said += "entries) should match. To go past one, or change a set no entry names, change "
        return BackendError(said + "SCALER_TARGETS and `helm upgrade`", retryable=False, status=403)
    asker = ASKER.search(whole)
    who = asker.group(1) if asker else "the bot's service account"
    said = f"{SERVICE} answered 403 Forbidden: {who} may not {verb} the AutoscalingRunnerSet "
    said += f"{namespace}/{name}. Its Role in {namespace} must allow get and patch on "
    said += "autoscalingrunnersets (apiGroup actions.github.com)"
    return BackendError(said, retryable=False, status=403)


def _part(data: dict[str, Any], key: str) -> dict[str, Any]:
    found = data.get(key)
    return found if isinstance(found, dict) else {}


def _capacity(runner_set: dict[str, Any]) -> Capacity:
    spec, metadata = _part(runner_set, "spec"), _part(runner_set, "metadata")
    maximum = count_of(spec.get("maxRunners"))  # absent: unbounded
    status = _part(runner_set, "status")
    # While ARC takes a spec change on (phase Pending), its status reads 0 runners whatever runs.
    pending = status.get("phase") == "Pending"
    current = None if pending else count_of(status.get("currentRunners"))
    return Capacity(
        current=current,
        minimum=count_of(spec.get("minRunners")) or 0,
        maximum=maximum,
        at_maximum=maximum is not None and current is not None and current >= maximum,
        managed_by=managed_by(metadata.get("labels"), metadata.get("annotations")),
    )


def _spec_value(runner_set: dict[str, Any], field: str) -> int | None:
    return count_of(_part(runner_set, "spec").get(field))


def _shown(value: int | None) -> str:
    return "unset" if value is None else str(value)


def changed_by(runner_set: dict[str, Any], field: str) -> str:
    """Who last wrote `spec.<field>` ("helm at 2026-07-14 09:12 UTC"), from `managedFields`: the
    latest entry when none names the field; "" for none."""
    entries = _part(runner_set, "metadata").get("managedFields")
    entries = entries if isinstance(entries, list) else []
    valid = [e for e in entries if isinstance(e, dict) and isinstance(e.get("manager"), str)]
    if not valid:
        return ""
    fields = [_part(_part(e, "fieldsV1"), "f:spec") for e in valid]
    touching = [e for e, spec in zip(valid, fields, strict=True) if f"f:{field}" in spec] or valid
    # RFC 3339 times in UTC sort as text; an entry without one counts as oldest.
    latest = max(enumerate(touching), key=lambda pair: (str(pair[1].get("time") or ""), pair[0]))[1]
    manager = str(latest["manager"])[:100] or "an unnamed manager"
    at = time_of(latest.get("time"))
    return f"{manager} at {at:%Y-%m-%d %H:%M} UTC" if at else manager


def ephemeral_failures(runner_set: dict[str, Any]) -> list[str]:
    """ARC's count of ephemeral runners that failed to start, with the set's phase."""
    status = _part(runner_set, "status")
    failed = count_of(status.get("failedEphemeralRunners"))
    if not failed:
        return []
    phase = status.get("phase")
    tail = f" (phase {phase[:40]})" if isinstance(phase, str) and phase else ""
    return [f"{failed} ephemeral runner{'s' if failed != 1 else ''} failed to start{tail}"]


def _way_back(runner_set: dict[str, Any], undo: Undo) -> tuple[int | None, str]:
    """How far back `undo.field` can go within the other bound now, and what was left and why."""
    if undo.field == "maxRunners":
        floor = _spec_value(runner_set, "minRunners") or 0
        if undo.before is None or undo.before >= floor:
            return undo.before, ""
        if floor >= undo.after:
            return undo.after, (
                f"maxRunners stays {undo.after}: minRunners is {floor} now, and {LISTENER}"
            )
        said = f"maxRunners stays {floor}, not {undo.before}: minRunners is {floor} now, and "
        return floor, said + LISTENER
    maximum = _spec_value(runner_set, "maxRunners")
    if maximum is not None and (undo.before or 0) > maximum:
        # Below that maxRunners no floor makes the set valid that is a put-back.
        return undo.after, (
            f"{undo.field} stays {undo.after}: maxRunners is {maximum} now, below the "
            f"{_shown(undo.before)} it would go back to, and {LISTENER}"
        )
    return undo.before, ""


def _planned(
    target: ScaleTarget, delta: int, raise_maximum: bool, before: Capacity
) -> tuple[str, int, Capacity]:
    """The field to patch, its value and the capacity after, or the refusal."""
    minimum, maximum = before.minimum or 0, before.maximum
    if raise_maximum:
        if maximum is None:
            said = "maxRunners is not set (unbounded): nothing to raise"
            raise BackendError(said, retryable=False)
        # 0 is its owner's pause: raised from Slack it could never be put back, since the
        # admission policy holds the bot's token to a maxRunners of at least 1.
        if maximum == 0:
            said = "maxRunners is 0: the scale set's owner has paused it. Raise it where they "
            said += "manage it (its chart or kubectl); queuepilot does not undo a pause"
            raise BackendError(said, retryable=False)
        value = maximum + delta
        checked(target, (before.minimum, value, None), NAMES, "maxRunners", value)
        return "maxRunners", value, Capacity(before.current, before.minimum, value)
    if before.at_maximum:
        said = f"the scale set is at its maximum ({maximum} runners): raising minRunners changes "
        raise BackendError(said + "nothing. Raise maxRunners instead", retryable=False)
    value = minimum + delta
    if maximum is not None and value > maximum:
        said = f"minRunners would become {value}, above maxRunners ({maximum}): ask for at most "
        said += f"+{max(maximum - minimum, 0)}, or raise maxRunners"
        raise BackendError(said, retryable=False)
    checked(target, (value, maximum, None), NAMES, "minRunners", value)
    return "minRunners", value, Capacity(before.current, value, maximum)


def _version(runner_set: dict[str, Any]) -> str:
    version = _part(runner_set, "metadata").get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise BackendError("the scale set came without a resourceVersion", retryable=True)
    return version
