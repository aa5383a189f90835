"""The ValidatingAdmissionPolicy that holds the bot's ServiceAccount to spec.minRunners and
spec.maxRunners: made where it should be, and its own CEL, read from the rendered object, judging
real AutoscalingRunnerSets as the API server would (cel-python; only what Kubernetes' CEL has:
`has()` on fields, `==` on maps and lists, `all()` over a map's keys, `object`, `oldObject` and
`request`, which the API server gives as plain maps)."""

from __future__ import annotations

import copy
import json
from typing import Any

import celpy
import pytest

from sandbox.kube_api import merge_patch
from tests.deploy.manifests import (
    ADMISSION_POLICY_API,
    REPO,
    SECRET,
    one,
    render,
    render_values,
)

ARC_FIXTURE = REPO / "tests" / "fixtures" / "backends" / "arc" / "autoscalingrunnerset.json"
BOT = "system:serviceaccount:queuepilot:queuepilot"
ARC_CONTROLLER = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
CEL = celpy.Environment()


def runner_set() -> dict[str, Any]:
    """A real AutoscalingRunnerSet, as the API server holds it."""
    return json.loads(ARC_FIXTURE.read_text())


def evaluate(expression: str, activation: dict[str, Any]) -> bool | None:
    """A condition's verdict (None for a value that is no bool), or the error the API server
    would meet (which Fail denies on)."""
    program = CEL.program(CEL.compile(expression))
    value = program.evaluate({name: celpy.json_to_cel(v) for name, v in activation.items()})
    return bool(value) if isinstance(value, celpy.celtypes.BoolType) else None


def admission(
    operation: str, old: dict | None, new: dict | None, user: str = BOT
) -> dict[str, Any]:
    """What the API server hands a policy: `request`, `object` (null on DELETE), `oldObject`
    (null on CREATE)."""
    named = new or old or {}
    request = {
        "operation": operation,
        "userInfo": {"username": user},
        "namespace": named["metadata"]["namespace"],
        "name": named["metadata"]["name"],
        "resource": {"group": "actions.github.com", "resource": "autoscalingrunnersets"},
    }
    return {"request": request, "object": new, "oldObject": old}


def denials(policy: dict[str, Any], activation: dict[str, Any]) -> list[str] | None:
    """As the API server's policy plugin: None when a matchCondition is false (not matched);
    else the message of every validation that is false or fails (failurePolicy Fail)."""
    for condition in policy["spec"]["matchConditions"]:
        if evaluate(condition["expression"], activation) is not True:
            return None
    found = []
    for validation in policy["spec"]["validations"]:
        try:
            admitted = evaluate(validation["expression"], activation)
        except celpy.CELEvalError:
            admitted = False
        if admitted is not True:
            found.append(validation["message"])
    return found


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    return one(render("admission-policy"), POLICY)


def update(policy: dict[str, Any], patch: dict[str, Any], user: str = BOT) -> list[str] | None:
    """The policy's verdict on `user` merge-patching the recorded set with `patch`: the object
    as the API server hands it on, its managedFields and generation moved by the write."""
    old = runner_set()
    new = merge_patch(copy.deepcopy(old), patch)
    if isinstance(new.get("metadata"), dict):
        new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        new["metadata"]["managedFields"] = [{"manager": "queuepilot", "operation": "Update"}]
    return denials(policy, admission("UPDATE", old, new, user))


# The scaler's own patches: under the version read, one bound each, `null` to unset one.
ADMITTED = {
    "maxRunners raised": {"spec": {"maxRunners": 200}},
    "minRunners raised": {"spec": {"minRunners": 12}},
    "maxRunners put back to unset": {"spec": {"maxRunners": None}},
    "both, under the version read": {
        "metadata": {"resourceVersion": "318874529"},
        "spec": {"minRunners": 0, "maxRunners": 130},
    },
}


@pytest.mark.parametrize("patch", ADMITTED.values(), ids=ADMITTED)
def test_the_bots_patch_of_its_bounds_is_admitted(policy: dict, patch: dict) -> None:
    assert update(policy, patch) == []


SPEC = "may change only spec.minRunners and spec.maxRunners"
METADATA = "may not change an AutoscalingRunnerSet's labels"
DENIED = {
    "the runner pod template": (
        {"spec": {"template": {"spec": {"containers": [{"name": "runner", "image": "evil"}]}}}},
        SPEC,
    ),
    "a new spec key": ({"spec": {"listenerTemplate": {"spec": {"hostNetwork": True}}}}, SPEC),
    "a spec key removed": ({"spec": {"runnerGroup": None}}, SPEC),
    "the whole spec removed": ({"spec": None}, SPEC),
    "GitHub's URL, beside a bound": (
        {"spec": {"minRunners": 1, "githubConfigUrl": "https://github.com/evil"}},
        SPEC,
    ),
    "a label": ({"metadata": {"labels": {"app.kubernetes.io/part-of": "other"}}}, METADATA),
    "an annotation added": ({"metadata": {"annotations": {"x": "y"}}}, METADATA),
    "the finalizers removed": ({"metadata": {"finalizers": None}}, METADATA),
    "an owner added": (
        {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                                            "uid": "1"}]}},
        METADATA,
    ),
}  # fmt: skip


@pytest.mark.parametrize(("patch", "said"), DENIED.values(), ids=DENIED)
def test_any_other_change_by_the_bot_is_denied(policy: dict, patch: dict, said: str) -> None:
    found = update(policy, patch)
    assert found is not None and len(found) == 1 and said in found[0], found


@pytest.mark.parametrize("operation", ["CREATE", "DELETE"])
def test_the_bot_creates_and_deletes_no_scale_set(policy: dict, operation: str) -> None:
    old, new = (None, runner_set()) if operation == "CREATE" else (runner_set(), None)
    found = denials(policy, admission(operation, old, new))
    assert found is not None and len(found) == 1, found
    assert "creates and deletes no AutoscalingRunnerSet" in found[0]


def test_the_condition_matches_the_bots_service_account_alone(policy: dict) -> None:
    """ARC's controller, Helm, a colleague's kubectl, a namesake in another namespace: not
    matched, so they change what they like."""
    (condition,) = policy["spec"]["matchConditions"]
    template = {"spec": {"template": {"spec": {"containers": []}}}}
    for user in (
        ARC_CONTROLLER,
        "kubernetes-admin",
        "system:serviceaccount:other:queuepilot",
        BOT + "-x",
    ):
        assert (
            evaluate(condition["expression"], admission("UPDATE", runner_set(), {}, user)) is False
        )
        assert update(policy, template, user) is None
    assert evaluate(condition["expression"], admission("UPDATE", runner_set(), {})) is True


def test_it_denies_what_it_cannot_evaluate_and_only_in_arcs_namespace(policy: dict) -> None:
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["actions.github.com"]
    assert rule["resources"] == ["autoscalingrunnersets"]
    assert sorted(rule["operations"]) == ["CREATE", "DELETE", "UPDATE"]
    arc = {"kubernetes.io/metadata.name": "arc-runners"}
    assert spec["matchConstraints"]["namespaceSelector"]["matchLabels"] == arc
    binding = one(render("admission-policy"), BINDING)["spec"]
    assert binding["policyName"] == policy["metadata"]["name"]
    assert binding["validationActions"] == ["Deny"]
    assert binding["matchResources"]["namespaceSelector"]["matchLabels"] == arc
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert "\n" not in validation["message"], "the API server refuses a message of lines"


def test_the_names_carry_the_release_so_two_releases_do_not_collide() -> None:
    values = {**SECRET, "rbac": {"admissionPolicy": True}}
    ours = one(render_values(values), POLICY)
    theirs = one(render_values({**values, "fullnameOverride": "qp"}, "ci-bots"), POLICY)
    assert ours["metadata"]["name"] == "queuepilot.queuepilot-scaler"
    assert theirs["metadata"]["name"] == "ci-bots.qp-scaler"
    (condition,) = theirs["spec"]["matchConditions"]
    assert "'system:serviceaccount:ci-bots:qp'" in condition["expression"]


@pytest.mark.parametrize(
    ("values", "served", "made"),
    [
        ({}, True, True),  # auto, on a cluster that serves the API
        ({}, False, False),  # auto, `helm template` told nothing
        ({"rbac": {"admissionPolicy": True}}, False, True),
        ({"rbac": {"admissionPolicy": False}}, True, False),
        # A Role your admin grants is held all the same.
        ({"rbac": {"create": False, "admissionPolicy": True}}, True, True),
        ({"config": {"SCALER_BACKEND": "none"}, "rbac": {"admissionPolicy": True}}, True, False),
    ],
    ids=["auto-served", "auto-not-served", "true", "false", "no-rbac", "no-arc-scaler"],
)
def test_made_where_the_api_is_served_for_the_arc_scaler(
    values: dict, served: bool, made: bool
) -> None:
    api_versions = (ADMISSION_POLICY_API,) if served else ()
    objects = render_values({**SECRET, **values}, api_versions=api_versions)
    kinds = {o["kind"] for o in objects}
    assert (POLICY in kinds, BINDING in kinds) == (made, made)


def test_an_account_of_yours_is_the_one_the_policy_holds() -> None:
    values = {**SECRET, "rbac": {"admissionPolicy": True}}
    values["serviceAccount"] = {"create": False, "name": "ci-bots"}
    (condition,) = one(render_values(values), POLICY)["spec"]["matchConditions"]
    yours = "system:serviceaccount:queuepilot:ci-bots"
    assert evaluate(condition["expression"], admission("UPDATE", runner_set(), {}, yours)) is True
    assert evaluate(condition["expression"], admission("UPDATE", runner_set(), {})) is False
