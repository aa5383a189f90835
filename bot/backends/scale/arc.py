"""The `arc` scaler: raise an AutoscalingRunnerSet's floor (or ceiling) through the Kubernetes API.

ARC runs `min(minRunners + assigned jobs, maxRunners)` runners, so raising `minRunners` adds
runners only below the maximum; on a set at its maximum it changes nothing, and raising
`maxRunners` is what helps (within the target's ceiling). The patch is a JSON merge patch (custom
resources take no strategic merge) carrying the resourceVersion read, so a concurrent change makes
it fail (409) and it is recomputed rather than overwriting. RBAC: `get` and `patch` on
`autoscalingrunnersets` in the scale sets' namespace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import json_object, request
from bot.backends.kube import KubeAccess
from bot.backends.scale import ScaleRequest, ScaleResult, count_of, within_ceiling
from bot.domain.scaling import Capacity, ScaleTarget

API = "/apis/actions.github.com/v1alpha1"
SERVICE = "The Kubernetes API"
CONFLICT_RETRIES = 3


@dataclass(frozen=True)
class ArcScalerConfig:
    access: KubeAccess
    namespace: str = "arc-runners"
    timeout_s: float = 10.0


class ArcScaler:
    name = "ARC"
    can_raise_maximum = True

    def __init__(self, config: ArcScalerConfig, client: httpx.AsyncClient | None = None) -> None:
        self._config = config
        self._client = client or config.access.client(config.timeout_s)

    async def capacity(self, target: ScaleTarget) -> Capacity | None:
        return _capacity(await self._get(target))

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        for _ in range(CONFLICT_RETRIES):
            runner_set = await self._get(scale.target)
            before = _capacity(runner_set)
            field, value = _new_value(scale, before)
            patch = {"metadata": {"resourceVersion": _version(runner_set)}, "spec": {field: value}}
            try:
                await self._call("PATCH", _path(self._config.namespace, scale.target), patch)
            except BackendError as exc:
                if exc.status == 409:
                    continue  # changed since read: recompute from the new state
                raise
            after = _with(before, field, value)
            shown = before.minimum if field == "minRunners" else before.maximum
            bounds = f" (maxRunners {before.maximum})" if field == "minRunners" else ""
            detail = f"{field} {shown if shown is not None else 'unset'} → {value}{bounds}"
            return ScaleResult(detail, before, after)
        raise BackendError("the scale set kept changing while being patched", retryable=True)

    async def _get(self, target: ScaleTarget) -> dict[str, Any]:
        path = _path(self._config.namespace, target)
        response = await request(
            self._client, SERVICE, "GET", path, headers=self._config.access.headers()
        )
        return json_object(response, SERVICE)

    async def _call(self, method: str, path: str, body: dict[str, Any]) -> None:
        await request(
            self._client,
            SERVICE,
            method,
            path,
            content=json.dumps(body).encode(),
            headers={
                **self._config.access.headers(),
                "Content-Type": "application/merge-patch+json",
            },
        )


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
    return Capacity(current=current, minimum=minimum, maximum=maximum, at_maximum=at_max)


def _new_value(scale: ScaleRequest, before: Capacity) -> tuple[str, int]:
    minimum, maximum = before.minimum or 0, before.maximum
    if scale.raise_maximum:
        if maximum is None:
            raise BackendError(
                "maxRunners is not set (unbounded): nothing to raise", retryable=False
            )
        within_ceiling(scale.target, maximum + scale.delta, "maxRunners")
        return "maxRunners", maximum + scale.delta
    if before.at_maximum:
        raise BackendError(
            f"the scale set is at its maximum ({maximum} runners): raising minRunners changes "
            "nothing. Raise maxRunners instead",
            retryable=False,
        )
    value = minimum + scale.delta
    if maximum is not None and value > maximum:
        raise BackendError(
            f"minRunners would become {value}, above maxRunners ({maximum}): ask for at most "
            f"+{max(maximum - minimum, 0)}, or raise maxRunners",
            retryable=False,
        )
    within_ceiling(scale.target, value, "minRunners")
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
