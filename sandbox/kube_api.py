"""A Kubernetes API server shaped like the real one, for AutoscalingRunnerSets only.

The demo's fleet serves it as the target of the bot's `arc` scaler (`fleet_api`), and the tests
serve it alone (`tests/support/fakes/kube_api.py` adds the recorded fixture set).

It answers GET and PATCH at the real path, requires the bearer token (else 401 with an
Unauthorized `Status`, as the API server's authentication filter answers, before anything else;
`token` may change meanwhile, as a rotated or revoked credential), takes JSON merge patches
and JSON patches (a strategic merge patch, or any other type, on a custom resource gets 415, as
in Kubernetes), honours a `metadata.resourceVersion` in the patch (409 Conflict with a `Status`
body when stale), and bumps the version on every write, status writes included (as etcd
does). As with the CRD's status subresource, a PATCH of the object leaves `status` alone, and
`generation` counts spec changes only. Each write updates `metadata.managedFields` the way the
API server does for an Update: one entry per manager (`?fieldManager=`, else the User-Agent's
product), with the fields it set and the time.
The CRD's schema is enforced on the written object, as a structural schema is: `minRunners` and
`maxRunners` are integers of at least 0 (ARC's `+kubebuilder:validation:Minimum:=0`), else 422.
`write()` is another writer (Helm, a colleague's kubectl, ARC's controller writing status).
ARC's controller (`sandbox.arc_controller`, `arc`) reacts to every spec change, whoever made it,
as the real one does: shortly after, the resourceVersion moves again, the phase goes `Pending`
then `Running`, and the listener is created again.

It also answers a SelfSubjectAccessReview (POST `REVIEWS`) as the API server does for the token's
identity: 201 with the review echoed and its `status` (`allowed`, and RBAC's `reason` when it
allows), a 422 for a spec that names neither or both of resourceAttributes and
nonResourceAttributes. Both are judged as RBAC judges them, from the `rules` of the token's Role
as a Role writes them (by default `get` and `patch` on autoscalingrunnersets of
actions.github.com, every name) less the verbs in `denied_verbs`: a rule allows a request when it
lists its verb, API group and resource (or `*`) and, where it has `resourceNames`, the object's
name; a request that names no object matches no rule with `resourceNames`, and `*` is no name.
A GET or PATCH the rules do not allow is 403 Forbidden, before the object is looked up
(authorization comes before the handler), worded as the API server's authorization filter
words it.

Validating admission, where `admission` is given (a ValidatingAdmissionPolicy and its binding,
as the chart makes them): a PATCH that passed the schema and the resourceVersion precondition
(the generic registry's Update checks both first) is handed to it as a policy is, `request`
(an UPDATE by the token's identity, `user`), `object` (the set as it would be written) and
`oldObject`. A message returned is the policy's denial: 403 Forbidden as apiserver's
validating-policy dispatcher answers it (admission.NewForbidden, the message repeated as the
one cause), and the set stays as it was.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandbox.arc_controller import ArcController

GROUP, RESOURCE = "actions.github.com", "autoscalingrunnersets"
PATH = f"/apis/{GROUP}/v1alpha1/namespaces/{{ns}}/{RESOURCE}/{{name}}"
REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
# The Role the bot's RBAC grants, as a Role's `rules`: every scale set's name unless a rule lists
# `resourceNames` (the chart's does: the scale sets of SCALER_TARGETS).
ROLE_RULES: tuple[dict[str, list[str]], ...] = (
    {"apiGroups": [GROUP], "resources": [RESOURCE], "verbs": ["get", "patch"]},
)
ALLOWED_BY = (
    'RBAC: allowed by RoleBinding "queuepilot/{namespace}" of Role "queuepilot-scaler" to '
    'ServiceAccount "queuepilot/queuepilot"'
)
MERGE_PATCH, JSON_PATCH = "application/merge-patch+json", "application/json-patch+json"
UNKNOWN_FORMAT = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
)


def status(code: int, reason: str, message: str, name: str = "", cause: str = "") -> JSONResponse:
    """A refusal as the API server writes it: a `Status`, its `metadata` always there (empty),
    and for an object that is missing or was changed meanwhile (`name`) the `details` naming it
    by group and resource, as apimachinery's NewNotFound and NewConflict fill them (the
    NotFound example in Kubernetes' API conventions, "Response Status Kind"); an admission
    policy's denial adds its message as the one `cause`."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if name:
        body["details"] = {"name": name, "group": GROUP, "kind": RESOURCE}
        if cause:
            body["details"]["causes"] = [{"message": cause}]
    body["code"] = code
    return JSONResponse(body, status_code=code)


def forbidden(user: str, verb: str, namespace: str, name: str) -> JSONResponse:
    """RBAC's refusal as the API server writes it: apiserver's `responsewriters.Forbidden`, its
    `forbiddenMessage` for a namespaced resource wrapped by apimachinery's `NewForbidden` (RBAC
    gives no reason for a rule that is simply missing, so nothing follows the namespace)."""
    message = (
        f'{RESOURCE}.{GROUP} "{name}" is forbidden: User "{user}" cannot {verb} resource '
        f'"{RESOURCE}" in API group "{GROUP}" in the namespace "{namespace}"'
    )
    return status(403, "Forbidden", message, name)


def denied(said: str, name: str) -> JSONResponse:
    """An admission policy's denial (`said`: "ValidatingAdmissionPolicy '…' with binding '…'
    denied request: …"), as the dispatcher makes it: NewForbidden around it, the validation's
    reason Forbidden making the code 403, the message again as the cause."""
    message = f'{RESOURCE}.{GROUP} "{name}" is forbidden: {said}'
    return status(403, "Forbidden", message, name, cause=said)


@dataclass
class KubeApi:
    token: str = "kube-test-token"
    sets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    patches: list[tuple[str, str, Any]] = field(default_factory=list)  # every PATCH asked
    written: list[tuple[str, Any]] = field(default_factory=list)  # the PATCHes applied
    written_at: list[float] = field(default_factory=list)  # each one's `time.monotonic()`
    get_delay_s: float = 0.0  # a slow API server: each GET answers this late
    unavailable: int = 0  # the next this many PATCHes get 503 (an API server restarting)
    # Another writer's change, made right after the next GET is answered: someone (Helm, a
    # colleague) changes the spec (manager, fields), or any other write (a call: ARC's
    # controller reacting), between a client's read and its patch.
    after_get: tuple[str, dict[str, Any]] | Callable[[], object] | None = None
    # The token's Role's rules, as Kubernetes takes them (a test may give the chart's own).
    rules: list[dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(list(ROLE_RULES)))
    # Verbs the token's Role does not grant after all (a ServiceAccount without patch rights).
    denied_verbs: set[str] = field(default_factory=set)
    user: str = "system:serviceaccount:queuepilot:queuepilot"  # the token's identity
    reviews: list[dict[str, Any]] = field(default_factory=list)
    # The bearer tokens refused with a 401 (None: no bearer token at all), in order.
    refused_tokens: list[str | None] = field(default_factory=list)
    # Validating admission: given what a policy is handed (`request`, `object`, `oldObject`),
    # the API server's message denying the PATCH, or None to admit it (a test gives the chart's
    # own policy, judged in CEL).
    admission: Callable[[dict[str, Any]], str | None] | None = None

    def __post_init__(self) -> None:
        self.route = Route(PATH, self.handle, methods=["GET", "PATCH"])
        self.review_route = Route(REVIEWS, self.review, methods=["POST"])
        self.app = Starlette(routes=[self.route, self.review_route])
        self.arc = ArcController(self)

    def add(self, runner_set: dict[str, Any]) -> dict[str, Any]:
        meta = runner_set["metadata"]
        self.sets[(meta["namespace"], meta["name"])] = runner_set
        self.arc.created((meta["namespace"], meta["name"]))
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

    async def handle(self, request: Request) -> Response:
        if not self._authenticated(request):
            return status(401, "Unauthorized", "Unauthorized")
        self.arc.serving(asyncio.get_running_loop())
        key = (request.path_params["ns"], request.path_params["name"])
        verb = "get" if request.method == "GET" else "patch"
        if not self.allows(verb, GROUP, RESOURCE, key[1]):
            return forbidden(self.user, verb, *key)
        runner_set = self.sets.get(key)
        if runner_set is None:
            message = f'{RESOURCE}.{GROUP} "{key[1]}" not found'
            return status(404, "NotFound", message, key[1])
        if request.method == "GET":
            await asyncio.sleep(self.get_delay_s)
            answer = JSONResponse(runner_set)  # serialised now: the change comes after
            change, self.after_get = self.after_get, None
            if callable(change):
                change()
            elif change is not None:
                manager, spec = change
                self.write(key[1], manager=manager, spec=spec, namespace=key[0])
            return answer
        if self.unavailable > 0:
            self.unavailable -= 1
            return status(
                503, "ServiceUnavailable", "the server is currently unable to handle the request"
            )
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        body = await request.body()
        try:
            # Go's decoder, as the API server's, knows no NaN or Infinity.
            patch = json.loads(body or b"null", parse_constant=_not_json)
        except ValueError:
            patch = None
        self.patches.append((request.url.path, content_type, patch))
        if content_type not in (MERGE_PATCH, JSON_PATCH):
            return status(415, "UnsupportedMediaType", UNKNOWN_FORMAT)
        if content_type == MERGE_PATCH and not isinstance(patch, dict):
            return status(400, "BadRequest", "error decoding patch: invalid JSON object")
        if content_type == JSON_PATCH and not isinstance(patch, list):
            return status(400, "BadRequest", "json: cannot unmarshal object into Go value")
        try:
            patched = (
                merge_patch(copy.deepcopy(runner_set), patch)
                if content_type == MERGE_PATCH
                else _json_patch(copy.deepcopy(runner_set), patch)
            )
        except _PatchFailed as exc:
            return status(422, "Invalid", str(exc))
        moved = _identity_changed(runner_set, patched, key)
        if moved:
            return status(400, "BadRequest", moved)
        invalid = _schema_errors(patched)
        if invalid:
            message = (
                f'AutoscalingRunnerSet.actions.github.com "{key[1]}" is invalid: '
                + ", ".join(invalid)
            )
            return status(422, "Invalid", message)
        # The patched object's resourceVersion is the precondition, as in the API server.
        if patched["metadata"].get("resourceVersion") != runner_set["metadata"]["resourceVersion"]:
            message = (
                f"Operation cannot be fulfilled on autoscalingrunnersets.actions.github.com "
                f'"{key[1]}": the object has been modified; please apply your changes to the '
                "latest version and try again"
            )
            return status(409, "Conflict", message, key[1])
        patched["status"] = runner_set.get("status")  # the status subresource's own
        manager = request.query_params.get("fieldManager") or _agent(request)
        patched = _updated(runner_set, patched, manager, _fields(content_type, patch))
        said = self._denial(runner_set, patched, key)
        if said:
            return denied(said, key[1])
        written = self._stored(runner_set, patched)
        self.written.append((request.url.path, patch))
        self.written_at.append(time.monotonic())
        return JSONResponse(written)

    async def review(self, request: Request) -> Response:
        """A SelfSubjectAccessReview: may this token do that?"""
        if not self._authenticated(request):
            return status(401, "Unauthorized", "Unauthorized")
        try:
            body = json.loads(await request.body() or b"null", parse_constant=_not_json)
        except ValueError as exc:
            return status(400, "BadRequest", f"error decoding body: {exc}")
        if not isinstance(body, dict) or body.get("kind") != "SelfSubjectAccessReview":
            return status(400, "BadRequest", "the body is not a SelfSubjectAccessReview")
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        attributes = spec.get("resourceAttributes")
        if (attributes is None) == (spec.get("nonResourceAttributes") is None):
            return status(
                422,
                "Invalid",
                'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                'spec.resourceAttributes: Invalid value: "null": exactly one of '
                "nonResourceAttributes or resourceAttributes must be specified",
            )
        self.reviews.append(spec)
        allowed = isinstance(attributes, dict) and self.allows(
            str(attributes.get("verb", "")),
            str(attributes.get("group", "")),
            str(attributes.get("resource", "")),
            str(attributes.get("name", "")),
        )
        verdict: dict[str, Any] = {"allowed": allowed}
        if allowed:
            verdict["reason"] = ALLOWED_BY.format(namespace=attributes.get("namespace", ""))
        answer = {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": verdict,
        }
        return JSONResponse(answer, status_code=201)

    def allows(self, verb: str, group: str, resource: str, name: str) -> bool:
        """RBAC's verdict on the token's Role: some rule allows it (`name` "" for a request that
        names no object)."""
        if verb in self.denied_verbs:
            return False
        return any(_rule_allows(rule, verb, group, resource, name) for rule in self.rules)

    def _denial(
        self, before: dict[str, Any], after: dict[str, Any], key: tuple[str, str]
    ) -> str | None:
        """The admission policy's message denying this UPDATE by the token, or None."""
        if self.admission is None:
            return None
        request = {
            "operation": "UPDATE",
            "userInfo": {"username": self.user},
            "namespace": key[0],
            "name": key[1],
            "resource": {"group": GROUP, "resource": RESOURCE},
        }
        given = {"request": request, "object": after, "oldObject": before}
        return self.admission(copy.deepcopy(given))

    def _authenticated(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token == self.token:
            return True
        self.refused_tokens.append(token if scheme.lower() == "bearer" else None)
        return False

    def write(
        self,
        name: str = "mt-l-x86iavx512-8-64",
        *,
        manager: str,
        spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None,
        namespace: str = "arc-runners",
    ) -> dict[str, Any]:
        """Another writer changes the set: Helm or kubectl (`spec`), ARC's controller (`status`)."""
        current = self.sets[(namespace, name)]
        changed = copy.deepcopy(current)
        changed["spec"].update(spec or {})
        changed.setdefault("status", {}).update(status or {})
        fields = {"f:spec": {f"f:{k}": {} for k in spec or {}}} if spec else {}
        if status:
            fields["f:status"] = {f"f:{k}": {} for k in status}
        return self._written(current, changed, manager, fields)

    def annotate(self, key: tuple[str, str], manager: str, annotations: dict[str, str]) -> None:
        """A writer's metadata-only change (ARC's controller recording the spec it took on)."""
        current = self.sets[key]
        changed = copy.deepcopy(current)
        changed["metadata"].setdefault("annotations", {}).update(annotations)
        fields = {"f:metadata": {"f:annotations": {f"f:{k}": {} for k in annotations}}}
        self._written(current, changed, manager, fields)

    def _written(
        self, before: dict[str, Any], after: dict[str, Any], manager: str, fields: dict[str, Any]
    ) -> dict[str, Any]:
        return self._stored(before, _updated(before, after, manager, fields))

    def _stored(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """`after` written over `before`: a new version (as etcd gives it), ARC told of a spec
        change."""
        meta = after["metadata"]
        meta["resourceVersion"] = str(int(before["metadata"]["resourceVersion"]) + 1)
        self.sets[(meta["namespace"], meta["name"])] = after
        if after.get("spec") != before.get("spec"):
            self.arc.spec_changed((meta["namespace"], meta["name"]))
        return after


def _updated(
    before: dict[str, Any], after: dict[str, Any], manager: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """`after` as the API server hands it to admission and storage: `generation` moved by a
    spec change, `managedFields` naming the manager's fields (its version is storage's)."""
    meta = after["metadata"]
    if after.get("spec") != before.get("spec"):
        meta["generation"] = int(before["metadata"].get("generation") or 0) + 1
    entries = [e for e in meta.get("managedFields") or [] if e.get("manager") != manager]
    entries.append(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
            "manager": manager,
            "operation": "Update",
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    meta["managedFields"] = entries
    return after


class _PatchFailed(Exception):
    pass


def _identity_changed(before: dict[str, Any], after: Any, key: tuple[str, str]) -> str:
    """What makes the patched object another object (the API server refuses it), or ""."""
    meta = after.get("metadata") if isinstance(after, dict) else None
    if not isinstance(meta, dict):
        return "Object 'metadata' is missing or is not an object"
    if meta.get("name") != key[1]:
        name = meta.get("name")
        return f"the name of the object ({name}) does not match the name on the URL ({key[1]})"
    if meta.get("namespace") != key[0]:
        return (
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    for part in ("kind", "apiVersion"):
        if after.get(part) != before.get(part):
            return f"Object '{part}' may not change: {before.get(part)} is expected"
    return ""


def _schema_errors(runner_set: dict[str, Any]) -> list[str]:
    """The CRD's OpenAPI schema on the two counts, worded as the API server words it."""
    spec = runner_set.get("spec")
    if not isinstance(spec, dict):
        return [f'spec: Invalid value: "{_kind(spec)}": spec in body must be of type object']
    errors = []
    for name in ("minRunners", "maxRunners"):
        value = spec.get(name)
        if name not in spec:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(
                f'spec.{name}: Invalid value: "{_kind(value)}": spec.{name} in body must be '
                f'of type integer: "{_kind(value)}"'
            )
        elif value < 0:
            errors.append(
                f"spec.{name}: Invalid value: {value}: spec.{name} in body should be greater "
                "than or equal to 0"
            )
    return errors


def _kind(value: Any) -> str:
    """JSON's name for a value's type, as the API server's schema errors say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "unknown")


def _rule_allows(rule: dict[str, Any], verb: str, group: str, resource: str, name: str) -> bool:
    """As RBAC's `RuleAllows`: `*` stands for any verb, group or resource, never for a name; a
    rule without resourceNames allows every name, one with them only a request naming one."""

    def lists(key: str, value: str) -> bool:
        listed = rule.get(key) or []
        return "*" in listed or value in listed

    names = rule.get("resourceNames") or []
    return (
        lists("verbs", verb)
        and lists("apiGroups", group)
        and lists("resources", resource)
        and (not names or name in names)
    )


def _agent(request: Request) -> str:
    """The API server's default field manager: the User-Agent's product (`kubectl`, …)."""
    agent = request.headers.get("user-agent", "")
    return agent.split("/")[0].strip() or "unknown"


def _fields(content_type: str, patch: Any) -> dict[str, Any]:
    """The fields a patch set, in FieldsV1's shape (`{"f:spec": {"f:minRunners": {}}}`)."""
    if content_type == MERGE_PATCH:
        spec = patch.get("spec") if isinstance(patch.get("spec"), dict) else {}
        return {"f:spec": {f"f:{k}": {} for k in spec}} if spec else {}
    names = [
        op.get("path", "").split("/")[2]
        for op in patch
        if isinstance(op, dict) and str(op.get("path", "")).startswith("/spec/")
    ]
    return {"f:spec": {f"f:{n}": {} for n in names}} if names else {}


def _not_json(constant: str) -> Any:
    raise ValueError(f"invalid character {constant[0]!r} looking for beginning of value")


def _json_patch(target: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    """RFC 6902 for object members: add, replace, remove, test (what a scaler would use)."""
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise _PatchFailed("invalid JSON patch operation")
        if not op["path"].startswith("/"):  # "" is the whole object: not a field to set
            raise _PatchFailed(f"doc is missing path: {op['path']!r}")
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node: Any = target
        for part in parents:
            if not isinstance(node, dict) or part not in node:
                raise _PatchFailed(f"doc is missing path: {op['path']}")
            node = node[part]
        if not isinstance(node, dict):
            raise _PatchFailed(f"doc is missing path: {op['path']}")
        kind = op.get("op")
        if kind in ("add", "replace"):
            if kind == "replace" and last not in node:
                raise _PatchFailed(
                    f"replace operation does not apply: doc is missing key: {op['path']}"
                )
            node[last] = op.get("value")
        elif kind == "remove":
            if last not in node:
                raise _PatchFailed(
                    f"remove operation does not apply: doc is missing key: {op['path']}"
                )
            del node[last]
        elif kind == "test":
            if node.get(last) != op.get("value"):
                raise _PatchFailed(f"testing value {op['path']} failed: test failed")
        else:
            raise _PatchFailed(f"Unexpected kind: {kind}")
    return target


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, applied to `target` itself (the admission policy's tests apply
    the scaler's patches with it, as the API server does before admission)."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target
