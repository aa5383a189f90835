"""The upgrade check: `helm upgrade` first runs `queuepilot check` with the new image and the new
settings as a hook, in a pod that reads the secrets, runs as and may reach what the bot's pods
do, whichever way the secrets are given; `helm test` runs the same check once it is done."""

from __future__ import annotations

import base64
from typing import Any

import annotated_types
import helm_python
import pytest

from bot.backends.http import deadline_of
from bot.config import Settings
from tests.deploy.manifests import (
    CASES,
    SECRET,
    chart_env,
    config,
    container,
    extra_env,
    one,
    pod_spec,
    pod_template_labels,
    render,
    render_values,
    selects,
)

ROLE_PENDING = "QUEUEPILOT_ROLE_PENDING"


def check_pod(objects: list[dict[str, Any]], hook: str) -> dict[str, Any]:
    (found,) = [
        o
        for o in objects
        if o["kind"] == "Pod" and o["metadata"]["annotations"]["helm.sh/hook"] == hook
    ]
    return found


def secret_data(objects: list[dict[str, Any]], name: str) -> dict[str, str]:
    (found,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == name]
    return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}


@pytest.mark.parametrize("hook", ["pre-upgrade", "test"])
@pytest.mark.parametrize("case", CASES)
def test_the_check_runs_the_new_image_with_the_new_settings_and_the_bots_secrets(
    case: str, hook: str
) -> None:
    objects = render(case)
    pod, bot = check_pod(objects, hook), container(objects)
    (check,) = pod["spec"]["containers"]

    assert pod["spec"]["restartPolicy"] == "Never", "one run: its exit code is the verdict"
    assert check["args"] == ["check"] and check["image"] == bot["image"]
    # The operator's own variables (a CA bundle's, a key of another Secret) the same in both.
    extra = extra_env(case)
    assert [e for e in check.get("env", []) if e["name"] in extra] == [
        e for e in bot.get("env", []) if e["name"] in extra
    ]
    env = {e["name"]: e["value"] for e in check.get("env", []) if e["name"] not in extra}
    env.pop(ROLE_PENDING, None)
    # The ConfigMap still holds the old settings while a pre-upgrade hook runs: inline here.
    assert {k: v for k, v in env.items() if not k.endswith("_FILE")} == config(objects)
    # Not the memory limit the bot sizes its caches from: the check holds none.
    bot_env = {e["name"]: e["value"] for e in chart_env(objects, case) if "value" in e}
    assert {k: v for k, v in env.items() if k.endswith("_FILE")} == bot_env
    assert check["volumeMounts"] == bot["volumeMounts"]
    for key in (
        "serviceAccountName",
        "securityContext",
        "automountServiceAccountToken",
        "priorityClassName",
    ):
        assert pod["spec"].get(key) == pod_spec(objects).get(key), key
    assert check["securityContext"] == bot["securityContext"]
    # The secrets the bot reads, or, before an upgrade, the new values' of a chart-made Secret.
    extras = CASES[case][0].get("extraEnvFrom", [])
    assert [s for s in check.get("envFrom", []) if s in extras] == extras
    bot_secret = [s["secretRef"]["name"] for s in bot["envFrom"] if "secretRef" in s]
    bot_files = [v["secret"]["secretName"] for v in pod_spec(objects)["volumes"] if "secret" in v]
    read = [s["secretRef"]["name"] for s in check.get("envFrom", []) if s not in extras]
    read += [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
    (ours,) = bot_secret + bot_files
    (theirs,) = read
    if hook == "pre-upgrade" and case == "secrets-in-values":
        assert theirs != ours and secret_data(objects, theirs) == secret_data(objects, ours)
    else:
        assert theirs == ours


def test_before_an_upgrade_the_check_knows_the_role_it_applies_and_helm_test_does_not() -> None:
    """The pre-upgrade check runs before the Role this chart makes is applied: a grant missing
    there is warned, not failed; `helm test`, after the upgrade, holds it to the grant."""
    objects = render("arc-elsewhere")
    pending = {
        e["name"]: e["value"]
        for e in check_pod(objects, "pre-upgrade")["spec"]["containers"][0]["env"]
    }
    assert pending[ROLE_PENDING] == one(objects, "Role")["metadata"]["namespace"]
    after = check_pod(objects, "test")["spec"]["containers"][0]["env"]
    assert ROLE_PENDING not in {e["name"] for e in after}
    unmade = render_values({**SECRET, "rbac": {"create": False}})
    made_by_you = check_pod(unmade, "pre-upgrade")["spec"]["containers"][0]["env"]
    assert ROLE_PENDING not in {e["name"] for e in made_by_you}, "your Role: held to it"


@pytest.mark.parametrize("case", ["defaults", "network-policy"])
def test_the_check_gets_no_requests_but_the_bots_network(case: str) -> None:
    objects = render(case)
    for hook in ("pre-upgrade", "test"):
        labels = check_pod(objects, hook)["metadata"]["labels"]
        assert not selects(one(objects, "Service")["spec"]["selector"], labels)
        pdb = one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
        assert not selects(pdb, labels), "the PDB counts the bot's replicas only"
        if case == "network-policy":
            policy = one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
            assert selects(policy, labels), "it reaches what the bot reaches, no more"
    assert selects(one(objects, "Service")["spec"]["selector"], pod_template_labels(objects))


def delete_policy(obj: dict[str, Any]) -> set[str]:
    return set(obj["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(","))


@pytest.mark.parametrize("hook", ["pre-upgrade", "test"])
def test_a_check_that_passed_is_deleted_and_a_failed_one_kept_until_the_next(hook: str) -> None:
    """Hook pods are no release objects: without a policy they would pile up. A failed one
    stays for `kubectl logs`; the next upgrade or test replaces it."""
    pod = check_pod(render("defaults"), hook)
    assert delete_policy(pod) == {"before-hook-creation", "hook-succeeded"}


def test_the_new_tokens_secret_exists_before_the_check_and_goes_with_it() -> None:
    """Made first (a lower weight: Helm creates hooks in weight order, each before the next),
    and deleted whatever the outcome: no copy of the new tokens outlives the check."""
    objects = render("secrets-in-values")
    pod = check_pod(objects, "pre-upgrade")
    (secret,) = [
        o
        for o in objects
        if o["kind"] == "Secret" and "helm.sh/hook" in o["metadata"].get("annotations", {})
    ]
    assert secret["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    assert [s["secretRef"]["name"] for s in pod["spec"]["containers"][0]["envFrom"]] == [
        secret["metadata"]["name"]
    ]
    weight = {
        o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in (pod, secret)
    }
    assert weight["Secret"] < weight["Pod"]
    assert delete_policy(secret) == {"before-hook-creation", "hook-succeeded", "hook-failed"}


@pytest.mark.parametrize("hook", ["pre-upgrade", "test"])
def test_a_check_that_hangs_is_failed_after_its_probes_and_start_yet_before_helm_gives_up(
    hook: str,
) -> None:
    """The deadline covers the probes' own (the longest timeout the settings allow, 2 s more)
    and the pod's start, and is shorter than `helm upgrade`'s default --timeout of 5 minutes,
    so the check's verdict is what Helm reports."""
    deadline = check_pod(render("defaults"), hook)["spec"]["activeDeadlineSeconds"]
    longest = max(
        bound.le
        for name in ("backend_timeout_seconds", "slack_timeout_seconds")
        for bound in Settings.model_fields[name].metadata
        if isinstance(bound, annotated_types.Le)
    )
    assert deadline_of(longest) + 30 <= deadline < 300
    faster = render_values({**SECRET, "upgradeCheck": {"activeDeadlineSeconds": 60}})
    assert check_pod(faster, hook)["spec"]["activeDeadlineSeconds"] == 60


def test_a_deadline_shorter_than_the_checks_own_is_refused() -> None:
    slow = {**SECRET, "config": {"BACKEND_TIMEOUT_SECONDS": "60"}}
    with pytest.raises(helm_python.HelmError) as caught:
        render_values({**slow, "upgradeCheck": {"activeDeadlineSeconds": 60}})
    assert "upgradeCheck.activeDeadlineSeconds (60) would fail the check" in str(caught.value)
    assert "raise it to at least 92" in str(caught.value)
    render_values({**slow, "upgradeCheck": {"enabled": False, "activeDeadlineSeconds": 60}})
    # A duration as the bot reads one.
    for timeout, least in (("2m", 152), ("1m30s", 122), ("45.5", 78)):
        with pytest.raises(helm_python.HelmError) as caught:
            render_values({**SECRET, "config": {"SLACK_TIMEOUT_SECONDS": timeout}, "upgradeCheck": {
                "activeDeadlineSeconds": least - 1}})  # fmt: skip
        assert f"raise it to at least {least}" in str(caught.value), timeout


def test_turned_off_there_is_no_hook() -> None:
    objects = render_values({**SECRET, "upgradeCheck": {"enabled": False}})
    assert "Pod" not in {o["kind"] for o in objects}
