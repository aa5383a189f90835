"""The upgrade check: `helm upgrade` first runs `queuepilot check` with the new image and the new
settings as a hook, in a pod that reads the secrets, runs as and may reach what the bot's pods
do, whichever way the secrets are given; `helm test` runs the same pod."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import (
    CASES,
    SECRET,
    config,
    container,
    one,
    pod_spec,
    pod_template_labels,
    render,
    render_values,
    selects,
)


def check_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "Pod")


@pytest.mark.parametrize("case", CASES)
def test_the_check_runs_the_new_image_with_the_new_settings_and_the_bots_secrets(
    case: str,
) -> None:
    objects = render(case)
    pod, bot = check_pod(objects), container(objects)
    (check,) = pod["spec"]["containers"]

    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade,test"
    assert pod["spec"]["restartPolicy"] == "Never", "one run: its exit code is the verdict"
    assert check["args"] == ["check"] and check["image"] == bot["image"]
    env = {e["name"]: e["value"] for e in check.get("env", [])}
    # The ConfigMap still holds the old settings while a pre-upgrade hook runs: inline here.
    assert {k: v for k, v in env.items() if not k.endswith("_FILE")} == config(objects)
    bot_env = {e["name"]: e["value"] for e in bot.get("env", [])}
    assert {k: v for k, v in env.items() if k.endswith("_FILE")} == bot_env
    secret_refs = [s for s in bot["envFrom"] if "secretRef" in s]
    assert check.get("envFrom", []) == secret_refs
    assert check["volumeMounts"] == bot["volumeMounts"]
    assert pod["spec"]["volumes"] == pod_spec(objects)["volumes"]
    for key in ("serviceAccountName", "securityContext", "automountServiceAccountToken"):
        assert pod["spec"][key] == pod_spec(objects)[key], key
    assert check["securityContext"] == bot["securityContext"]


@pytest.mark.parametrize("case", ["defaults", "network-policy"])
def test_the_check_gets_no_requests_but_the_bots_network(case: str) -> None:
    objects = render(case)
    labels = check_pod(objects)["metadata"]["labels"]

    assert not selects(one(objects, "Service")["spec"]["selector"], labels)
    pdb = one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    assert not selects(pdb, labels), "the PDB counts the bot's replicas only"
    assert selects(one(objects, "Service")["spec"]["selector"], pod_template_labels(objects))
    if case == "network-policy":
        policy = one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
        assert selects(policy, labels), "it reaches what the bot reaches, no more"


def test_turned_off_there_is_no_hook() -> None:
    objects = render_values({**SECRET, "upgradeCheck": {"enabled": False}})
    assert "Pod" not in {o["kind"] for o in objects}
