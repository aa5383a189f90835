"""What the Kubernetes API stand-in takes that the bot's `arc` scaler (a merge patch) never sends:
a JSON patch, guarded by a `test` of the resourceVersion, writing a new version and generation;
another writer's status update moves the version but not the generation. What it refuses is
test_kube_refusals.py; the merge patch, its conflicts and managedFields are tested through the bot
(tests/backends/test_scalers.py)."""

from __future__ import annotations

import json

import httpx

from tests.support.fakes.kube_api import RECORDED, FakeKubeApi

SETS = "/apis/actions.github.com/v1alpha1/namespaces/arc-runners/autoscalingrunnersets"


def test_a_json_patch_is_taken_and_every_write_moves_the_version(kube: FakeKubeApi) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    key = ("arc-runners", RECORDED)
    version = kube.sets[key]["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/spec/minRunners", "value": 3},
    ]
    done = httpx.patch(
        f"{kube.url}{SETS}/{RECORDED}",  # type: ignore[attr-defined]
        content=json.dumps(ops),
        headers={
            "Authorization": f"Bearer {kube.token}",
            "Content-Type": "application/json-patch+json",
        },
    )

    assert done.status_code == 200 and done.json()["spec"]["minRunners"] == 3
    assert int(done.json()["metadata"]["resourceVersion"]) == int(version) + 1
    assert done.json()["metadata"]["generation"] == 5
    kube.write(manager="manager", status={"currentRunners": 3})
    assert int(kube.sets[key]["metadata"]["resourceVersion"]) == int(version) + 2
    assert kube.sets[key]["metadata"]["generation"] == 5, "a status write is no spec change"
