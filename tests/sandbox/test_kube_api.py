"""What the Kubernetes API stand-in takes that the bot's `arc` scaler (a merge patch) never sends:
a JSON patch, guarded by a `test` of the resourceVersion, writing a new version and generation;
another writer's status update moves the version but not the generation. What it refuses is
test_kube_refusals.py; the merge patch, its conflicts and managedFields are tested through the bot
(tests/backends/test_scalers.py). ARC's controller reacts to a spec change, whoever made it."""

from __future__ import annotations

import json

import httpx

from tests.support.fakes.kube_api import RECORDED, FakeKubeApi
from tests.support.running import eventually

SETS = "/apis/actions.github.com/v1alpha1/namespaces/arc-runners/autoscalingrunnersets"


def test_a_json_patch_is_taken_and_every_write_moves_the_version(kube: FakeKubeApi) -> None:
    kube.arc.after_s = None  # ARC's reaction to the spec change: its own test below
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


async def test_arc_takes_a_spec_change_on_soon_after_and_the_version_moves_again(
    kube: FakeKubeApi,
) -> None:
    """ARC 0.14's reconcile of a changed spec, as the set shows it: the change hash recorded, the
    phase Pending (its counts read 0) then Running with the counts back, the listener created
    again; the version moves with each of those writes, the generation only with the spec."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    key = ("arc-runners", RECORDED)
    async with httpx.AsyncClient(base_url=kube.url) as http:  # type: ignore[attr-defined]
        done = await http.patch(
            f"{SETS}/{RECORDED}",
            content=json.dumps({"spec": {"minRunners": 4}}),
            headers={
                "Authorization": f"Bearer {kube.token}",
                "Content-Type": "application/merge-patch+json",
            },
        )
    assert done.status_code == 200, "answered before ARC reacts"
    assert done.json()["status"]["phase"] == "Running"
    patched = int(done.json()["metadata"]["resourceVersion"])
    generation = done.json()["metadata"]["generation"]

    await eventually(kube.reacted, what="ARC's reaction")

    runner_set = kube.sets[key]
    meta = runner_set["metadata"]
    assert int(meta["resourceVersion"]) == patched + 3, "hash, Pending, Running"
    assert meta["generation"] == generation, "no spec write of its own"
    assert meta["annotations"]["actions.github.com/change-hash"] != "6f57b9485c"
    assert runner_set["status"] == {
        "currentRunners": 120,
        "failedEphemeralRunners": 0,
        "pendingEphemeralRunners": 0,
        "phase": "Running",
        "runningEphemeralRunners": 120,
    }
    assert runner_set["spec"]["minRunners"] == 4
    assert any(e["manager"] == "manager" for e in meta["managedFields"]), "ARC's writes named"


async def test_arc_takes_a_change_by_another_writer_on_too(kube: FakeKubeApi) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    key = ("arc-runners", RECORDED)
    async with httpx.AsyncClient(base_url=kube.url) as http:  # type: ignore[attr-defined]
        # The API has served a request: ARC's controller watches the sets from then on.
        headers = {"Authorization": f"Bearer {kube.token}"}
        assert (await http.get(f"{SETS}/{RECORDED}", headers=headers)).status_code == 200
    before = int(kube.sets[key]["metadata"]["resourceVersion"])

    kube.write(manager="helm", spec={"maxRunners": 90})

    await eventually(kube.reacted, what="ARC's reaction")
    assert int(kube.sets[key]["metadata"]["resourceVersion"]) == before + 4
