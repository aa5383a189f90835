"""What the Kubernetes API server refuses on an AutoscalingRunnerSet, as its stand-in
(`sandbox.kube_api`, served alone and by the demo's fleet) must: one table.

Every refusal is a `Status` (Kubernetes' API conventions, "Response Status Kind"): `metadata`
empty, `status: Failure`, the `reason` and `code`, and for an object that is missing or changed
meanwhile `details` naming it by group and resource (apimachinery's NewNotFound, NewConflict).
The words are the API server's: its patch handler (415 and the media types it takes, a test
operation that fails), its checks that a patch leaves the object itself, the CRD's structural
schema (`minRunners` and `maxRunners` integers of at least 0), and the SelfSubjectAccessReview's
validation. A second table: what the chart's own admission policy, judged in CEL, makes of a
PATCH, after the schema and the precondition. A refused request changes no scale set.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sandbox.kube_api import REVIEWS
from tests.support.chart_admission import chart_policy
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi
from tests.support.refusals import Answer, Like, assert_answered

TOKEN = "kube-test-token"
SET = f"/apis/actions.github.com/v1alpha1/namespaces/arc-runners/autoscalingrunnersets/{RECORDED}"
MERGE, JSON_PATCH = "application/merge-patch+json", "application/json-patch+json"


@pytest.fixture
async def kube() -> AsyncIterator[tuple[FakeKubeApi, httpx.AsyncClient]]:
    api = FakeKubeApi(token=TOKEN)
    api.add_from_fixture(minRunners=0, maxRunners=120)
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://kube.test") as http:
        yield api, http


def status(code: int, reason: str, message: str | Like, name: str = "") -> Answer:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if name:
        body["details"] = {
            "name": name,
            "group": "actions.github.com",
            "kind": "autoscalingrunnersets",
        }
    return Answer(code, body | {"code": code})


def invalid(*causes: str) -> Answer:
    """The CRD's schema refused the object written."""
    message = f'AutoscalingRunnerSet.actions.github.com "{RECORDED}" is invalid: ' + ", ".join(
        causes
    )
    return status(422, "Invalid", message)


def forbidden(verb: str, name: str = RECORDED) -> Answer:
    """RBAC refused the token's identity (apiserver's forbiddenMessage within NewForbidden)."""
    return status(
        403,
        "Forbidden",
        f'autoscalingrunnersets.actions.github.com "{name}" is forbidden: User '
        f'"system:serviceaccount:queuepilot:queuepilot" cannot {verb} resource '
        '"autoscalingrunnersets" in API group "actions.github.com" in the namespace "arc-runners"',
        name,
    )


def patch(kind: str, body: object) -> dict[str, Any]:
    return {"method": "PATCH", "content": json.dumps(body).encode(), "type": kind}


def raw(method: str, content: bytes, kind: str) -> dict[str, Any]:
    return {"method": method, "content": content, "type": kind}


GET: dict[str, Any] = {"method": "GET"}
UNAUTHORIZED = status(401, "Unauthorized", "Unauthorized")
BAD = "BadRequest"
IDENTITY = "the name of the object ({}) does not match the name on the URL (" + RECORDED + ")"
REVIEW = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
EXACTLY_ONE = (
    'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
    'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be '
    "specified"
)
ARC = {"group": "actions.github.com", "resource": "autoscalingrunnersets", "namespace": "a"}
# (what a row asks: where, with which token, the request), Kubernetes' answer
ROWS: list[tuple[str, str, str | None, dict[str, Any], Answer]] = [
    ("no token", SET, None, GET, UNAUTHORIZED),
    ("a token the cluster does not know", SET, "other", GET, UNAUTHORIZED),
    ("a patch with no token", SET, None, patch(MERGE, {"spec": {"minRunners": 1}}), UNAUTHORIZED),
    ("a set that is not there", SET.replace(RECORDED, "gone"), TOKEN, GET, status(
        404, "NotFound", 'autoscalingrunnersets.actions.github.com "gone" not found', "gone")),
    ("a patch written on an older version", SET, TOKEN,
     patch(MERGE, {"metadata": {"resourceVersion": "1"}}), status(
         409, "Conflict", "Operation cannot be fulfilled on autoscalingrunnersets.actions."
         f'github.com "{RECORDED}": the object has been modified; please apply your changes to '
         "the latest version and try again", RECORDED)),
    *((f"a {kind} on a custom resource", SET, TOKEN, patch(kind, {"spec": {"minRunners": 1}}),
       status(415, "UnsupportedMediaType",
              "the body of the request was in an unknown format - accepted media types include: "
              "application/json-patch+json, application/merge-patch+json, "
              "application/apply-patch+yaml"))
      for kind in ("application/strategic-merge-patch+json", "application/json")),
    ("a merge patch that is no object", SET, TOKEN, patch(MERGE, [1]),
     status(400, BAD, Like(".+"))),
    ("a merge patch with NaN", SET, TOKEN, raw("PATCH", b'{"spec": {"minRunners": NaN}}', MERGE),
     status(400, BAD, Like(".+"))),
    ("a JSON patch that is no list", SET, TOKEN, patch(JSON_PATCH, {"op": "add"}),
     status(400, BAD, Like(".+"))),
    ("a JSON patch whose test fails", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "test", "path": "/spec/minRunners", "value": 9}]),
     status(422, "Invalid", "testing value /spec/minRunners failed: test failed")),
    ("a JSON patch replacing what is not there", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "replace", "path": "/spec/nothing", "value": 1}]),
     status(422, "Invalid", Like(".*doc is missing key: /spec/nothing"))),
    ("a JSON patch removing what is not there", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "remove", "path": "/spec/nothing"}]),
     status(422, "Invalid", Like(".*doc is missing key: /spec/nothing"))),
    ("a JSON patch under a path that is not there", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "add", "path": "/nothing/here", "value": 1}]),
     status(422, "Invalid", Like(".*doc is missing path: /nothing/here"))),
    ("a JSON patch of no known op", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "move", "path": "/spec/minRunners"}]),
     status(422, "Invalid", Like(".*move.*"))),
    ("a JSON patch of the whole object", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "replace", "path": "", "value": {}}]),
     status(422, "Invalid", Like(".+"))),
    ("a JSON patch op that is no object", SET, TOKEN, patch(JSON_PATCH, [1]),
     status(422, "Invalid", Like(".+"))),
    # A patch may not make the set another object (the API server's checks on an update).
    ("metadata taken out", SET, TOKEN, patch(MERGE, {"metadata": None}),
     status(400, BAD, "Object 'metadata' is missing or is not an object")),
    ("another name", SET, TOKEN, patch(MERGE, {"metadata": {"name": "linux-4xlarge"}}),
     status(400, BAD, IDENTITY.format("linux-4xlarge"))),
    ("another namespace", SET, TOKEN, patch(MERGE, {"metadata": {"namespace": "default"}}),
     status(400, BAD, "the namespace of the provided object does not match the namespace sent "
            "on the request")),
    ("another kind", SET, TOKEN, patch(MERGE, {"kind": "Pod"}),
     status(400, BAD, Like("Object 'kind' may not change.*"))),
    ("another name by a JSON patch", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "replace", "path": "/metadata/name", "value": "x"}]),
     status(400, BAD, IDENTITY.format("x"))),
    ("metadata removed by a JSON patch", SET, TOKEN,
     patch(JSON_PATCH, [{"op": "remove", "path": "/metadata"}]),
     status(400, BAD, "Object 'metadata' is missing or is not an object")),
    # The CRD's structural schema, on the object the patch would write.
    ("maxRunners a string", SET, TOKEN, patch(MERGE, {"spec": {"maxRunners": "30"}}), invalid(
        'spec.maxRunners: Invalid value: "string": spec.maxRunners in body must be of type '
        'integer: "string"')),
    ("minRunners below 0", SET, TOKEN, patch(MERGE, {"spec": {"minRunners": -1}}), invalid(
        "spec.minRunners: Invalid value: -1: spec.minRunners in body should be greater than or "
        "equal to 0")),
    ("minRunners a fraction", SET, TOKEN, patch(MERGE, {"spec": {"minRunners": 2.5}}), invalid(
        'spec.minRunners: Invalid value: "number": spec.minRunners in body must be of type '
        'integer: "number"')),
    ("spec no object", SET, TOKEN, patch(MERGE, {"spec": 1}), invalid(
        'spec: Invalid value: "number": spec in body must be of type object')),
    # A SelfSubjectAccessReview names resource or non-resource attributes, one of them.
    ("a review with no token", REVIEWS, None, raw("POST", b"{}", "application/json"), UNAUTHORIZED),
    ("a review of neither", REVIEWS, TOKEN, patch("application/json", {**REVIEW, "spec": {}}) | {
        "method": "POST"}, status(422, "Invalid", EXACTLY_ONE)),
    ("a review of both", REVIEWS, TOKEN, patch("application/json", {**REVIEW, "spec": {
        "resourceAttributes": {"verb": "get", **ARC}, "nonResourceAttributes": {
            "path": "/healthz", "verb": "get"}}}) | {"method": "POST"},
     status(422, "Invalid", EXACTLY_ONE)),
    ("a review that is no JSON", REVIEWS, TOKEN, raw("POST", b"{", "application/json"),
     status(400, BAD, Like("error decoding body: .+"))),
    ("a review of another kind", REVIEWS, TOKEN, patch("application/json", {"kind": "Pod"}) | {
        "method": "POST"}, status(400, BAD, Like(".+"))),
    # RBAC (the stand-in's `denied_verbs`): the authorization filter answers before the handler,
    # so a denied verb is 403 even for a set that is not there.
    ("a GET the Role does not grant", SET, TOKEN, GET | {"denied": "get"}, forbidden("get")),
    ("a PATCH the Role does not grant", SET, TOKEN, patch(MERGE, {"spec": {"minRunners": 1}}) | {
        "denied": "patch"}, forbidden("patch")),
    ("a denied GET of a set that is not there", SET.replace(RECORDED, "gone"), TOKEN,
     GET | {"denied": "get"}, forbidden("get", "gone")),
    # A Role that lists resourceNames (the chart's) allows those sets alone.
    ("a GET of a set the Role does not name", SET, TOKEN, GET | {"names": ["other"]},
     forbidden("get")),
    ("a PATCH of a set the Role does not name", SET, TOKEN, patch(MERGE, {"spec": {
        "minRunners": 1}}) | {"names": ["other"]}, forbidden("patch")),
    # The stand-in's switch: the next PATCH meets an API server that is restarting.
    ("a patch while the API server restarts", SET, TOKEN, patch(MERGE, {"spec": {
        "minRunners": 1}}) | {"unavailable": 1}, status(
        503, "ServiceUnavailable", "the server is currently unable to handle the request")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "token", "request_", "expected"),
    [pytest.param(p, t, r, e, id=name) for name, p, t, r, e in ROWS],
)
async def test_the_api_server_refuses_it_so(
    kube: tuple[FakeKubeApi, httpx.AsyncClient],
    path: str,
    token: str | None,
    request_: dict[str, Any],
    expected: Answer,
) -> None:
    api, http = kube
    api.unavailable = request_.get("unavailable", 0)
    api.denied_verbs = {request_["denied"]} if "denied" in request_ else set()
    if "names" in request_:
        api.rules = [{**rule, "resourceNames": request_["names"]} for rule in api.rules]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if "type" in request_:
        headers["Content-Type"] = request_["type"]
    before = copy.deepcopy(api.sets)

    answer = await http.request(
        request_["method"], path, content=request_.get("content"), headers=headers
    )

    assert_answered(Answer.of(answer), expected)
    assert api.sets == before, "a refused request changes nothing"


@pytest.mark.parametrize(
    ("names", "asked", "allowed"),
    [
        (None, RECORDED, True),
        (None, "", True),  # a rule without resourceNames allows every name, and none
        ([RECORDED], RECORDED, True),
        ([RECORDED], "other", False),
        ([RECORDED], "", False),  # a request that names no object: no rule with names matches
        (["*"], RECORDED, False),  # `*` is no name
    ],
)
async def test_a_review_is_answered_as_rbac_reads_resource_names(
    kube: tuple[FakeKubeApi, httpx.AsyncClient], names: list[str] | None, asked: str, allowed: bool
) -> None:
    api, http = kube
    if names is not None:
        api.rules = [{**rule, "resourceNames": names} for rule in api.rules]
    attributes = {"verb": "patch", **ARC} | ({"name": asked} if asked else {})
    review = {**REVIEW, "spec": {"resourceAttributes": attributes}}

    answer = await http.post(REVIEWS, json=review, headers={"Authorization": f"Bearer {TOKEN}"})

    assert answer.status_code == 201
    assert answer.json()["status"]["allowed"] is allowed


# The chart's admission policy, for the recorded set with a ceiling of 40 (its maxRunners 120 is
# its owner's, above it: only a change is held to the ceiling).
CEILING_40 = {"linux": {"target": f"arc-runners/{RECORDED}", "cap": 10, "ceiling": 40}}
POLICY = "queuepilot.queuepilot-scaler"  # the policy's and its binding's name, as the chart's
DENIED = (
    f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: queuepilot's "
    f"ServiceAccount may set maxRunners of arc-runners/{RECORDED} only from 1 to its ceiling, "
    "40, not 130"
)
# What the API server answers each PATCH: the policy comes after the schema (422) and the
# resourceVersion precondition (409), as in the generic registry's Update.
ADMISSION_ROWS: list[tuple[str, dict[str, Any], Answer]] = [
    ("maxRunners past the ceiling", {"spec": {"maxRunners": 130}}, Answer(403, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'autoscalingrunnersets.actions.github.com "{RECORDED}" is forbidden: {DENIED}',
        "reason": "Forbidden",
        "details": {
            "name": RECORDED,
            "group": "actions.github.com",
            "kind": "autoscalingrunnersets",
            "causes": [{"message": DENIED}],
        },
        "code": 403,
    })),
    ("past the ceiling on an older version", {
        "metadata": {"resourceVersion": "1"}, "spec": {"maxRunners": 130}}, status(
            409, "Conflict", Like("Operation cannot be fulfilled on .*"), RECORDED)),
    ("past the ceiling and no integer", {"spec": {"maxRunners": 130, "minRunners": "x"}},
     invalid('spec.minRunners: Invalid value: "string": spec.minRunners in body must be of type '
             'integer: "string"')),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"), [pytest.param(b, e, id=name) for name, b, e in ADMISSION_ROWS]
)
async def test_a_patch_the_admission_policy_denies_is_refused_and_changes_nothing(
    kube: tuple[FakeKubeApi, httpx.AsyncClient], body: dict[str, Any], expected: Answer
) -> None:
    api, http = kube
    api.admission = chart_policy(CEILING_40)
    before = copy.deepcopy(api.sets)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": MERGE}

    answer = await http.patch(SET, content=json.dumps(body).encode(), headers=headers)

    assert_answered(Answer.of(answer), expected)
    assert api.sets == before and not api.written, "a denied patch changes nothing"


async def test_a_patch_the_admission_policy_admits_is_written(
    kube: tuple[FakeKubeApi, httpx.AsyncClient],
) -> None:
    api, http = kube
    api.arc.after_s = None  # ARC's reaction to the spec change: tests/sandbox/test_kube_api.py
    api.admission = chart_policy(CEILING_40)
    version = api.sets[("arc-runners", RECORDED)]["metadata"]["resourceVersion"]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": MERGE}
    body = {"metadata": {"resourceVersion": version}, "spec": {"maxRunners": 40}}

    answer = await http.patch(SET, content=json.dumps(body).encode(), headers=headers)

    assert answer.status_code == 200, answer.text
    assert api.sets[("arc-runners", RECORDED)]["spec"]["maxRunners"] == 40
    assert int(answer.json()["metadata"]["resourceVersion"]) == int(version) + 1
