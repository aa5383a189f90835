"""A silence API shaped like Grafana's (Alertmanager API v2 under Grafana's prefix), for the tests,
the benchmarks and the sandbox.

It checks what Grafana would, in Grafana's order: the service-account bearer token (401), the
route's permissions (403, `Permissions needed: …`, before the body is read), then the body of a
new silence (400: "bad request data" for one that is not JSON, "silence failed validation" for
one without matchers, RFC 3339 times, createdBy or comment), and answers 202 `{"silenceID"}` as
Grafana does. The routes' permissions are Grafana 11's (its ngalert `api/authorization.go`):
reading needs alert.instances:read or alert.silences:read; creating that and one of
alert.instances:create/write or alert.silences:create/write; expiring that and one of
alert.instances:write or alert.silences:write. The token holds `permissions` (an Editor's by
default). A silence reads back as Grafana's gettableSilence (`id`, `status.state`, `updatedAt`, the
posted fields); one it does not know is a 404 `{"message": "silence not found"}`. Tests can make
the next calls (of one method, or any) fail with a status, or hang until released.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

PREFIX = "/api/alertmanager/grafana/api/v2"
READ = ("alert.instances:read", "alert.silences:read")
CREATE = (
    "alert.instances:create",
    "alert.instances:write",
    "alert.silences:create",
    "alert.silences:write",
)
WRITE = ("alert.instances:write", "alert.silences:write")
EDITOR = frozenset({*READ, *CREATE})
# Each route's evaluator: all of these, each "any of" its permissions.
NEEDED = {"GET": (READ,), "POST": (READ, CREATE), "DELETE": (READ, WRITE)}


@dataclass
class FakeSilenceApi:
    token: str = "glsa_test-token"
    prefix: str = PREFIX
    created_status: int = 202
    silences: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # status, message, method
    hanging: threading.Event | None = None
    in_flight: int = 0
    # What the token's service account may do (Grafana's RBAC actions).
    permissions: frozenset[str] = EDITOR

    def __post_init__(self) -> None:
        self.app = Starlette(
            routes=[
                Route(f"{self.prefix}/silences", self._create, methods=["POST"]),
                Route(f"{self.prefix}/silences", self._list, methods=["GET"]),
                Route(f"{self.prefix}/silence/{{sid}}", self._one, methods=["GET", "DELETE"]),
            ]
        )

    def fail_next(
        self, status: int, message: str = "refused", *, times: int = 1, method: str = ""
    ) -> None:
        self.failures += [(status, message, method)] * times

    def hang(self) -> threading.Event:
        """Calls wait until the returned event is set."""
        self.hanging = threading.Event()
        return self.hanging

    def expire_behind_the_bots_back(self, silence_id: str) -> None:
        self.silences[silence_id]["status"] = {"state": "expired"}
        self.silences[silence_id]["endsAt"] = _now()

    def run_out(self, silence_id: str) -> None:
        """The silence reached its planned end."""
        self.silences[silence_id]["status"] = {"state": "expired"}

    async def _gate(self, request: Request) -> Response | None:
        body = await request.body()
        self.requests.append((request.method, request.url.path, body))
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse({"message": "invalid API key"}, status_code=401)
        needed = NEEDED[request.method]
        if not all(self.permissions & set(any_of) for any_of in needed):
            return JSONResponse(_access_denied(needed), status_code=403)
        if self.hanging is not None:
            self.in_flight += 1
            try:
                # Released from the test's thread, so a thread event, waited for off the loop.
                await asyncio.to_thread(self.hanging.wait, 30)
            finally:
                self.in_flight -= 1
        failure = next((f for f in self.failures if f[2] in ("", request.method)), None)
        if failure is not None:
            self.failures.remove(failure)
            return JSONResponse({"message": failure[1]}, status_code=failure[0])
        return None

    async def _create(self, request: Request) -> Response:
        refusal = await self._gate(request)
        if refusal is not None:
            return refusal
        try:
            data = await request.json()
        except ValueError:
            return JSONResponse({"message": "bad request data"}, status_code=400)
        problem = silence_problem(data)
        if problem:
            message = f"silence failed validation: {problem}"
            return JSONResponse({"message": message}, status_code=400)
        silence_id = str(uuid.uuid4())
        stored = {"id": silence_id, "status": {"state": "active"}, "updatedAt": _now()}
        self.silences[silence_id] = {**data, **stored}
        return JSONResponse({"silenceID": silence_id}, status_code=self.created_status)

    async def _list(self, request: Request) -> Response:
        refusal = await self._gate(request)
        if refusal is not None:
            return refusal
        return JSONResponse(list(self.silences.values()))

    async def _one(self, request: Request) -> Response:
        refusal = await self._gate(request)
        if refusal is not None:
            return refusal
        silence = self.silences.get(request.path_params["sid"])
        if silence is None:
            return JSONResponse({"message": "silence not found"}, status_code=404)
        if request.method == "DELETE":
            self.expire_behind_the_bots_back(silence["id"])
            # Grafana's RouteDeleteSilence (ngalert api_alertmanager_silences.go).
            return JSONResponse({"message": "silence deleted"})
        return JSONResponse(silence)


def _access_denied(needed: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """Grafana's refusal by its access-control middleware, the evaluator spelt as Grafana does."""
    parts = [f"any of {', '.join(any_of)}" for any_of in needed]
    wanted = parts[0] if len(parts) == 1 else f"all of {', '.join(parts)}"
    return {
        "title": "Access denied",
        "message": f"You'll need additional permissions to perform this action. Permissions "
        f"needed: {wanted}",
        "accessErrorId": "ACE0000000001",
    }


def silence_problem(data: Any) -> str:
    """Why Alertmanager's API v2 (and Grafana's, the same) refuses a new silence; "" if it is
    well-formed. The simulated fleet's Alertmanager API checks silences with this too."""
    if not isinstance(data, dict):
        return "body must be an object"
    for key in ("matchers", "startsAt", "endsAt", "createdBy", "comment"):
        if key not in data:
            return f"{key} is required"
    matchers = data["matchers"]
    if (
        not isinstance(matchers, list)
        or not matchers
        or not all(
            isinstance(m, dict) and {"name", "value", "isRegex", "isEqual"} <= set(m)
            for m in matchers
        )
    ):
        return "matchers must be a non-empty list of {name, value, isRegex, isEqual}"
    try:
        starts, ends = rfc3339(data["startsAt"]), rfc3339(data["endsAt"])
    except ValueError:
        return "startsAt and endsAt must be RFC 3339"
    if ends <= starts:
        return "endsAt must be after startsAt"
    return ""


def rfc3339(value: object) -> datetime:
    """An RFC 3339 time, with its offset (a time without one is not RFC 3339), in UTC."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError("no offset")
    return parsed.astimezone(UTC)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
