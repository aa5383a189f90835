"""The ValidatingAdmissionPolicy that holds the bot's ServiceAccount to spec.minRunners and
spec.maxRunners of its targets, each within its ceiling: made wherever the arc scaler is, and its
own CEL, read from the rendered object, judging real AutoscalingRunnerSets in admission requests
shaped as the API server sends them (tests/support/admission.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import helm_python
import pytest

from sandbox.kube_api import _json_patch, merge_patch
from tests.deploy.manifests import (
    ADMISSION_POLICY_API,
    REPO,
    SECRET,
    one,
    render,
    render_values,
)
from tests.support.admission import denials, matched, refusal, request_of

ARC_FIXTURE = REPO / "tests" / "fixtures" / "backends" / "arc" / "autoscalingrunnerset.json"
BOT = "system:serviceaccount:queuepilot:queuepilot"
ARC_CONTROLLER = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
# The "admission-policy" case's ceiling for the recorded set, whose maxRunners is 120 and
# minRunners 0.
CEILING = 150
SET = "arc-runners/mt-l-x86iavx512-8-64"


def runner_set(**spec: Any) -> dict[str, Any]:
    """A real AutoscalingRunnerSet, as the API server holds it (`spec` over the recorded one)."""
    found = json.loads(ARC_FIXTURE.read_text())
    found["spec"].update(spec)
    return found


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    return one(render("admission-policy"), POLICY)


def written(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server hands it on: managedFields and generation moved."""
    if isinstance(new.get("metadata"), dict):
        new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        new["metadata"]["managedFields"] = [{"manager": "queuepilot", "operation": "Update"}]
    return new


def update(
    policy: dict[str, Any], patch: Any, user: str = BOT, old: dict[str, Any] | None = None
) -> list[str] | None:
    """The policy's verdict on `user` patching the set (`old`: the recorded one): a merge patch
    (a dict) or a JSON patch (a list), judged on the patch's result."""
    old = old or runner_set()
    new = (
        merge_patch(copy.deepcopy(old), patch)
        if isinstance(patch, dict)
        else _json_patch(copy.deepcopy(old), patch)
    )
    return denials(policy, request_of("UPDATE", old, written(old, new), user))


# The scaler's own patches, and what a person would ask of it: within the ceiling, up and down.
ADMITTED = {
    "maxRunners raised to the ceiling": {"spec": {"maxRunners": CEILING}},
    "maxRunners lowered to 1": {"spec": {"maxRunners": 1}},
    "minRunners raised": {"spec": {"minRunners": 12}},
    "minRunners raised to maxRunners": {"spec": {"minRunners": 120}},
    "minRunners removed (0)": {"spec": {"minRunners": None}},
    "both, under the version read": {
        "metadata": {"resourceVersion": "318874529"},
        "spec": {"minRunners": 0, "maxRunners": 130},
    },
    "maxRunners by a JSON patch": [{"op": "replace", "path": "/spec/maxRunners", "value": 140}],
    "minRunners by a JSON patch": [{"op": "add", "path": "/spec/minRunners", "value": 3}],
}


@pytest.mark.parametrize("patch", ADMITTED.values(), ids=ADMITTED)
def test_the_bots_patch_within_the_ceiling_is_admitted(policy: dict, patch: Any) -> None:
    assert update(policy, patch) == []


def test_a_bound_the_owner_set_past_the_ceiling_is_theirs_and_the_floor_still_moves(
    policy: dict,
) -> None:
    """Unchanged is not set by the bot: a maxRunners of 500 that Helm keeps stays admitted
    while the bot moves minRunners within the ceiling; the bot may not move it further."""
    owners = runner_set(maxRunners=500)
    assert update(policy, {"spec": {"minRunners": 20}}, old=owners) == []
    (said,) = update(policy, {"spec": {"maxRunners": 510}}, old=owners) or [""]
    assert f"maxRunners of {SET} only from 1 to its ceiling, {CEILING}, not 510" in said


def test_a_bound_past_a_lowered_ceiling_may_come_down_toward_it_not_go_up(policy: dict) -> None:
    """The bot raised minRunners to 160 under a ceiling since lowered to 150: its put-back to
    155 is a step down, admitted; a step up (170) is not. Fewer runners is never a runaway."""
    raised = runner_set(minRunners=160, maxRunners=200)
    assert update(policy, {"spec": {"minRunners": 155}}, old=raised) == []
    assert update(policy, {"spec": {"maxRunners": 180}}, old=raised) == []
    assert update(policy, {"spec": {"minRunners": 170}}, old=raised)
    assert update(policy, {"spec": {"maxRunners": 210}}, old=raised)
    found = update(policy, {"spec": {"maxRunners": 0}}, old=raised)
    assert found and "only from 1 to its ceiling" in found[0]


# What a leaked token would try, each denied with the words that say why.
DENIED = {
    "maxRunners past the ceiling": (
        {"spec": {"maxRunners": CEILING + 1}},
        f"only from 1 to its ceiling, {CEILING}, not {CEILING + 1}",
    ),
    "maxRunners 100000": ({"spec": {"maxRunners": 100000}}, "not 100000"),
    "maxRunners at int32's maximum": ({"spec": {"maxRunners": 2147483647}}, "not 2147483647"),
    "maxRunners removed (unbounded)": (
        {"spec": {"maxRunners": None}},
        f"may not remove maxRunners of {SET}",
    ),
    "maxRunners removed by a JSON patch": (
        [{"op": "remove", "path": "/spec/maxRunners"}],
        "may not remove maxRunners",
    ),
    "maxRunners 0 (every job of the type stops)": (
        {"spec": {"maxRunners": 0}},
        "only from 1 to its ceiling",
    ),
    "minRunners past the ceiling": (
        {"spec": {"minRunners": 100000, "maxRunners": CEILING}},
        f"minRunners of {SET} only up to its ceiling, {CEILING}, not 100000",
    ),
    "minRunners above maxRunners": (
        {"spec": {"minRunners": 130}},
        f"may not leave minRunners of {SET} (130) above its maxRunners (120)",
    ),
    "maxRunners lowered below minRunners": (
        {"spec": {"minRunners": 10, "maxRunners": 5}},
        "(10) above its maxRunners (5)",
    ),
}


@pytest.mark.parametrize(("patch", "said"), DENIED.values(), ids=DENIED)
def test_a_bound_past_the_ceiling_or_out_of_order_is_denied(
    policy: dict, patch: Any, said: str
) -> None:
    found = update(policy, patch)
    assert found, "admitted"
    assert said in found[0], found


SPEC = "may change only spec.minRunners and spec.maxRunners"
METADATA = "may not change an AutoscalingRunnerSet's labels"
OTHER = {
    "the runner pod template": (
        {"spec": {"template": {"spec": {"containers": [{"name": "runner", "image": "evil"}]}}}},
        SPEC,
    ),
    "a new spec key": ({"spec": {"listenerTemplate": {"spec": {"hostNetwork": True}}}}, SPEC),
    "a spec key removed": ({"spec": {"runnerGroup": None}}, SPEC),
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


@pytest.mark.parametrize(("patch", "said"), OTHER.values(), ids=OTHER)
def test_any_other_change_by_the_bot_is_denied(policy: dict, patch: dict, said: str) -> None:
    found = update(policy, patch)
    assert found is not None and len(found) == 1 and said in found[0], found


def test_the_whole_spec_removed_is_denied(policy: dict) -> None:
    found = update(policy, {"spec": None})
    assert found and any(SPEC in said for said in found), found


def test_a_set_no_target_names_is_not_the_bots_even_within_a_ceiling(policy: dict) -> None:
    """A scale set SCALER_TARGETS does not name (as if RBAC granted it all the same)."""
    other = runner_set()
    other["metadata"]["name"] = "gpu-a100"
    found = update(policy, {"spec": {"maxRunners": 121}}, old=other)
    assert found, "admitted"
    assert found[0].endswith(
        "may not change arc-runners/gpu-a100: no SCALER_TARGETS entry with a ceiling names this "
        "AutoscalingRunnerSet"
    )


@pytest.mark.parametrize("operation", ["CREATE", "DELETE"])
def test_the_bot_creates_and_deletes_no_scale_set(policy: dict, operation: str) -> None:
    old, new = (None, runner_set()) if operation == "CREATE" else (runner_set(), None)
    found = denials(policy, request_of(operation, old, new, BOT))
    assert found is not None and len(found) == 1, found
    assert "creates and deletes no AutoscalingRunnerSet" in found[0]


def test_the_api_servers_refusal_names_the_policy_and_says_the_first_denial(
    policy: dict,
) -> None:
    binding = one(render("admission-policy"), BINDING)
    old = runner_set()
    new = written(old, merge_patch(copy.deepcopy(old), {"spec": {"maxRunners": 400}}))
    said = refusal(policy, binding, request_of("UPDATE", old, new, BOT))
    assert said == (
        "ValidatingAdmissionPolicy 'queuepilot.queuepilot-scaler' with binding "
        "'queuepilot.queuepilot-scaler' denied request: queuepilot's ServiceAccount may set "
        f"maxRunners of {SET} only from 1 to its ceiling, {CEILING}, not 400"
    )


def test_the_condition_matches_the_bots_service_account_alone(policy: dict) -> None:
    """ARC's controller, Helm, a colleague's kubectl, a namesake in another namespace: not
    matched, so they change what they like, past the ceiling too."""
    for user in (
        ARC_CONTROLLER,
        "kubernetes-admin",
        "system:serviceaccount:other:queuepilot",
        BOT + "-x",
    ):
        assert update(policy, {"spec": {"maxRunners": 100000}}, user) is None
        assert update(policy, {"spec": {"template": {"spec": {"containers": []}}}}, user) is None
    assert update(policy, {"spec": {"maxRunners": 100000}}) is not None


def test_it_denies_what_it_cannot_evaluate_in_every_namespace(policy: dict) -> None:
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["actions.github.com"]
    assert rule["resources"] == ["autoscalingrunnersets"]
    assert sorted(rule["operations"]) == ["CREATE", "DELETE", "UPDATE"]
    assert "namespaceSelector" not in spec["matchConstraints"]
    binding = one(render("admission-policy"), BINDING)["spec"]
    assert binding["policyName"] == policy["metadata"]["name"]
    assert binding["validationActions"] == ["Deny"]
    assert "matchResources" not in binding
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert "\n" not in validation["message"], "the API server refuses a message of lines"


def test_a_target_in_a_second_namespace_is_held_to_its_own_ceiling() -> None:
    """With a Role the admin grants (rbac.create false), targets may live in two namespaces:
    each is held to its ceiling, and its namesake in the other namespace is not the bot's."""
    targets = {
        "linux.8xlarge": {"target": "arc-runners/mt-l-x86iavx512-8-64", "cap": 10, "ceiling": 150},
        "linux.gpu": {"target": "gpu-runners/mt-l-x86iavx512-8-64", "cap": 2, "ceiling": 8},
    }
    values = {
        **SECRET,
        "rbac": {"create": False},
        "arc": {"namespace": "arc-runners"},
        "config": {"SCALER_TARGETS": json.dumps(targets)},
    }
    policy = one(render_values(values), POLICY)
    gpu = runner_set(maxRunners=4)
    gpu["metadata"]["namespace"] = "gpu-runners"
    assert update(policy, {"spec": {"maxRunners": 8}}, old=gpu) == []
    found = update(policy, {"spec": {"maxRunners": 9}}, old=gpu)
    assert found and "gpu-runners/mt-l-x86iavx512-8-64 only from 1 to its ceiling, 8" in found[0]
    assert update(policy, {"spec": {"maxRunners": 150}}) == []
    elsewhere = runner_set()
    elsewhere["metadata"]["namespace"] = "team-b"
    assert matched(policy, request_of("UPDATE", elsewhere, elsewhere, BOT))
    assert update(policy, {"spec": {"maxRunners": 121}}, old=elsewhere), "admitted"


def test_the_names_carry_the_release_so_two_releases_do_not_collide() -> None:
    ours = one(render("admission-policy"), POLICY)
    values = {**SECRET, "fullnameOverride": "qp"}
    theirs = one(render_values(values, "ci-bots"), POLICY)
    assert ours["metadata"]["name"] == "queuepilot.queuepilot-scaler"
    assert theirs["metadata"]["name"] == "ci-bots.qp-scaler"
    (condition,) = theirs["spec"]["matchConditions"]
    assert "'system:serviceaccount:ci-bots:qp'" in condition["expression"]


@pytest.mark.parametrize(
    ("values", "made"),
    [
        ({}, True),
        ({"rbac": {"admissionPolicy": True}}, True),
        ({"rbac": {"admissionPolicy": False}}, False),
        # A Role your admin grants is held all the same.
        ({"rbac": {"create": False}}, True),
        ({"config": {"SCALER_BACKEND": "none"}}, False),
    ],
    ids=["default", "true", "false", "no-rbac", "no-arc-scaler"],
)
@pytest.mark.parametrize("served", [True, False], ids=["install", "template"])
def test_made_for_the_arc_scaler_whatever_the_cluster_was_asked(
    values: dict, made: bool, served: bool
) -> None:
    """`helm install` (the cluster's API versions known) and `helm template` or Kustomize (none
    asked) render the same: the policy never drops out by itself."""
    api_versions = (ADMISSION_POLICY_API,) if served else ()
    objects = render_values({**SECRET, **values}, api_versions=api_versions)
    kinds = {o["kind"] for o in objects}
    assert (POLICY in kinds, BINDING in kinds) == (made, made)


@pytest.mark.parametrize("given", ["auto", "yes", ""])
def test_anything_but_true_or_false_is_refused_naming_both(given: str) -> None:
    with pytest.raises(helm_python.HelmError) as refused:
        render_values({**SECRET, "rbac": {"admissionPolicy": given}})
    said = str(refused.value)
    assert f'rbac.admissionPolicy is "{given}"' in said
    assert "true (the default" in said and "or false" in said


REFUSED_TARGETS = {
    "no ceiling": (
        {"linux.2xlarge": {"cap": 10}},
        'config.SCALER_TARGETS["linux.2xlarge"] has no ceiling',
    ),
    "a bare target": (
        {"linux.2xlarge": "arc-runners/linux-2xlarge"},
        'config.SCALER_TARGETS["linux.2xlarge"] has no ceiling',
    ),
    "a ceiling of 0": (
        {"linux.2xlarge": {"cap": 10, "ceiling": 0}},
        "its ceiling 0 is no whole number from 1 to 1000000",
    ),
    "a fractional ceiling": (
        {"linux.2xlarge": {"cap": 10, "ceiling": 40.5}},
        "its ceiling 40.5 is no whole number from 1",
    ),
    "a ceiling the bot would refuse": (
        {"linux.2xlarge": {"cap": 10, "ceiling": 2000000}},
        "its ceiling 2000000 is no whole number from 1 to 1000000",
    ),
    "one set, two ceilings": (
        {
            "linux.2xlarge": {"cap": 10, "ceiling": 40},
            "linux-2xlarge": {"cap": 10, "ceiling": 60},
        },
        "both scale arc-runners/linux-2xlarge, with the ceilings",
    ),
    "a name that is no Kubernetes name": (
        {"x": {"target": "arc-runners/it's", "cap": 1, "ceiling": 4}},
        "arc-runners/it's is no AutoscalingRunnerSet's namespace/name",
    ),
}


@pytest.mark.parametrize(("targets", "said"), REFUSED_TARGETS.values(), ids=REFUSED_TARGETS)
def test_a_target_the_policy_cannot_bound_is_refused_with_the_fix(targets: dict, said: str) -> None:
    values = {
        **SECRET,
        "arc": {"namespace": "arc-runners"},
        "config": {"SCALER_TARGETS": json.dumps(targets)},
    }
    with pytest.raises(helm_python.HelmError) as refused:
        render_values(values)
    assert said in str(refused.value)
    # Without the policy, the bot's own ceiling is the only one, and optional.
    if "has no ceiling" in said:
        render_values({**values, "rbac": {"admissionPolicy": False}})


@pytest.mark.parametrize("given", [1000000, 1500, "40"])
def test_a_ceiling_the_bot_takes_is_rendered_as_it_reads_it(given: int | str) -> None:
    targets = {"linux.2xlarge": {"cap": 10, "ceiling": given}}
    values = {**SECRET, "config": {"SCALER_TARGETS": json.dumps(targets)}}
    variables = one(render_values(values), POLICY)["spec"]["variables"]
    (ceilings,) = [v["expression"] for v in variables if v["name"] == "ceilings"]
    assert ceilings == f"{{'queuepilot/linux-2xlarge': {int(given)}}}"


def test_an_account_of_yours_is_the_one_the_policy_holds() -> None:
    values = {**SECRET, "serviceAccount": {"create": False, "name": "ci-bots"}}
    policy = one(render_values(values), POLICY)
    old = runner_set()
    old["metadata"]["name"] = "linux-2xlarge"
    yours = "system:serviceaccount:queuepilot:ci-bots"
    assert matched(policy, request_of("UPDATE", old, old, yours))
    assert not matched(policy, request_of("UPDATE", old, old, BOT))
