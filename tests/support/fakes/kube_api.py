"""A Kubernetes API server shaped like the real one, for AutoscalingRunnerSets only.

It answers GET and PATCH at the real path, requires the bearer token, takes only JSON merge
patches (a strategic merge patch on a custom resource gets 415, as in Kubernetes), honours a
`metadata.resourceVersion` in the patch (409 when stale), and bumps the version on each change.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "backends" / "arc"
PATH = "/apis/actions.github.com/v1alpha1/namespaces/{ns}/autoscalingrunnersets/{name}"


def status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


@dataclass
class FakeKubeApi:
    token: str = "kube-test-token"
    sets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    patches: list[tuple[str, str, Any]] = field(default_factory=list)
    get_delay_s: float = 0.0  # a slow API server: each GET answers this late

    def __post_init__(self) -> None:
        self.app = Starlette(routes=[Route(PATH, self._one, methods=["GET", "PATCH"])])

    def add_from_fixture(self, **spec: Any) -> dict[str, Any]:
        runner_set = json.loads((FIXTURE / "autoscalingrunnerset.json").read_text())
        runner_set["spec"].update(spec)
        meta = runner_set["metadata"]
        self.sets[(meta["namespace"], meta["name"])] = runner_set
        return runner_set

    def kubeconfig(self, directory: Path, url: str) -> Path:
        path = directory / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: c\n  cluster:\n    server: {url}\n"
            f"users:\n- name: u\n  user:\n    token: {self.token}\n"
            "contexts:\n- name: test\n  context:\n    cluster: c\n    user: u\n"
        )
        return path

    async def _one(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return status(401, "Unauthorized", "Unauthorized")
        key = (request.path_params["ns"], request.path_params["name"])
        runner_set = self.sets.get(key)
        if runner_set is None:
            message = f'autoscalingrunnersets.actions.github.com "{key[1]}" not found'
            return status(404, "NotFound", message)
        if request.method == "GET":
            await asyncio.sleep(self.get_delay_s)
            return JSONResponse(runner_set)
        content_type = request.headers.get("content-type", "")
        body = await request.body()
        self.patches.append((request.url.path, content_type, json.loads(body or b"null")))
        if content_type != "application/merge-patch+json":
            return status(
                415, "UnsupportedMediaType", f"the media type {content_type!r} is not supported"
            )
        patch = json.loads(body)
        version = (patch.get("metadata") or {}).get("resourceVersion")
        if version is not None and version != runner_set["metadata"]["resourceVersion"]:
            return status(409, "Conflict", "the object has been modified")
        merged = _merge(copy.deepcopy(runner_set), patch)
        merged["metadata"]["resourceVersion"] = str(
            int(runner_set["metadata"]["resourceVersion"]) + 1
        )
        self.sets[key] = merged
        return JSONResponse(merged)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target
