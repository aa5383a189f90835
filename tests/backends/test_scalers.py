"""The ARC scaler alone against the Kubernetes-shaped API: every way the call can fail is told,
a concurrent change of the scale set is recomputed, never overwritten; a scale-up is put back
only while the field is still the value set, and otherwise who changed it is said; Helm and
Argo CD are recognised; ARC's own failures are read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.kube import kube_access
from bot.backends.scale import Reverted, ScaleRequest, Undo
from bot.backends.scale.arc import ArcScaler, changed_by, ephemeral_failures
from bot.config import Settings, load_settings
from bot.domain.scale.scaling import ScaleTarget
from bot.factory import scale_targets
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.mutations import json_values
from tests.support.running import eventually

TARGET = ScaleTarget("linux", "arc-runners/mt-l-x86iavx512-8-64", cap=10)


def scaler(kube: FakeKubeApi, tmp_path: Path, *, url: str | None = None) -> ArcScaler:
    path = kube.kubeconfig(tmp_path, url or kube.url)  # type: ignore[attr-defined]
    return ArcScaler(Settings(backend_timeout_seconds=10), kube_access(str(path), {}))


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            "missing",
            "The Kubernetes API answered 404: autoscalingrunnersets.actions.github.com "
            '"mt-l-x86iavx512-8-64" not found',
        ),
        ("token", "The Kubernetes API answered 401: Unauthorized"),
        ("unreachable", "The Kubernetes API is unreachable at http://127.0.0.1:9"),
        # RBAC: the API server's whole message would be cut; the reply names who, what and the fix.
        *(
            (
                f"denied {verb}",
                "The Kubernetes API answered 403 Forbidden: system:serviceaccount:queuepilot:"
                f"queuepilot may not {verb} the AutoscalingRunnerSet arc-runners/"
                "mt-l-x86iavx512-8-64. Its Role in arc-runners must allow get and patch on "
                "autoscalingrunnersets (apiGroup actions.github.com)",
            )
            for verb in ("get", "patch")
        ),
    ],
)
async def test_arc_failures_are_told(
    kube: FakeKubeApi, tmp_path: Path, fault: str, expected: str
) -> None:
    if fault != "missing":
        kube.add_from_fixture(minRunners=0, maxRunners=200)
    url = "http://127.0.0.1:9" if fault == "unreachable" else None
    arc = scaler(kube, tmp_path, url=url)
    if fault == "token":
        kube.token = "rotated"  # the bot's token is no longer valid
    if fault.startswith("denied "):
        kube.denied_verbs = {fault.removeprefix("denied ")}
    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    assert str(caught.value) == expected
    assert caught.value.retryable is (fault == "unreachable")
    assert not [p for p in kube.patches if p[1] == "application/merge-patch+json"]


async def test_a_scale_set_changed_meanwhile_is_read_again_not_overwritten(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    runner_set = kube.add_from_fixture(minRunners=3, maxRunners=200)
    runner_set["status"]["currentRunners"] = 10
    arc = scaler(kube, tmp_path)
    # Someone (Helm, Argo, a colleague) raises minRunners between our read and patch; ARC's
    # reaction to it, another write meanwhile, has its own tests below.
    kube.arc.after_s = None
    kube.after_get = ("kubectl", {"minRunners": 8})
    result = await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    assert result.detail == "minRunners 8 → 10 (maxRunners 200)"
    assert kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]["spec"]["minRunners"] == 10
    assert len(kube.patches) == 2, "the first patch was refused (409), the second took"


SET = ("arc-runners", "mt-l-x86iavx512-8-64")


def arc_targets(**values: str) -> dict[str, ScaleTarget]:
    """SCALER_TARGETS as the bot takes them (every setting the targets read given here)."""
    values = {"scaler_arc_namespace": "arc-runners", "runner_scale_sets": "{}", **values}
    return scale_targets(load_settings(_env_file=None, scaler_backend="arc", **values))


async def test_a_runner_type_with_no_target_scales_its_derived_scale_set(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """ARC's scale set for `linux.2xlarge` is `linux-2xlarge`: SCALER_TARGETS need not say so."""
    kube.add_from_fixture("linux-2xlarge", minRunners=2, maxRunners=200)
    target = arc_targets(scaler_targets='{"linux.2xlarge": {"cap": 10}}')["linux.2xlarge"]
    assert target.target == "arc-runners/linux-2xlarge"
    result = await scaler(kube, tmp_path).scale(ScaleRequest(target, 3, "1", "al"))
    assert result.detail == "minRunners 2 → 5 (maxRunners 200)"
    assert kube.sets[("arc-runners", "linux-2xlarge")]["spec"]["minRunners"] == 5
    assert kube.patches[0][0].endswith("/arc-runners/autoscalingrunnersets/linux-2xlarge")


async def test_a_scale_set_named_in_runner_scale_sets_wins(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture("linux-g5-4xlarge-nvidia-gpu", minRunners=0, maxRunners=200)
    kube.add_from_fixture("gpu-a10g", minRunners=1, maxRunners=200)
    targets = arc_targets(
        scaler_targets='{"linux.g5.4xlarge.nvidia.gpu": {"cap": 5}}',
        runner_scale_sets='{"linux.g5.4xlarge.nvidia.gpu": "gpu-a10g"}',
    )
    gpu = targets["linux.g5.4xlarge.nvidia.gpu"]
    assert gpu.target == "arc-runners/gpu-a10g" and gpu.cap == 5
    await scaler(kube, tmp_path).scale(ScaleRequest(gpu, 2, "1", "al"))
    assert kube.sets[("arc-runners", "gpu-a10g")]["spec"]["minRunners"] == 3
    assert kube.sets[("arc-runners", "linux-g5-4xlarge-nvidia-gpu")]["spec"]["minRunners"] == 0


async def test_a_scale_up_records_what_it_changed_and_is_put_back(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    read = int(kube.sets[SET]["metadata"]["resourceVersion"])
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    written = str(read + 1)  # ARC's controller moves it on from there soon after
    assert result.undo == Undo("minRunners", 0, 5, written), "the version our patch produced"
    # ARC's controller writes the status as runners start: the version moves, the field not.
    kube.write(manager="manager", status={"currentRunners": 45})
    reverted = await arc.revert(TARGET, result.undo)
    assert reverted == Reverted(True, "minRunners 5 → 0")
    assert kube.sets[SET]["spec"]["minRunners"] == 0
    _, content_type, body = kube.patches[-1]
    assert content_type == "application/merge-patch+json"
    assert body["spec"] == {"minRunners": 0}
    managers = [e["manager"] for e in kube.sets[SET]["metadata"]["managedFields"]]
    assert "queuepilot" in managers, "our writes are named in managedFields"


async def test_a_put_back_after_arc_took_the_scale_up_on_goes_back(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """ARC's controller reacts to our patch and moves the version three times; the put-back reads
    the set again, finds its value and goes back, and ARC takes that on in turn."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert result.undo is not None
    await eventually(kube.reacted, what="ARC took the scale-up on")
    assert int(kube.sets[SET]["metadata"]["resourceVersion"]) > int(result.undo.version)

    assert await arc.revert(TARGET, result.undo) == Reverted(True, "minRunners 5 → 0")

    assert kube.sets[SET]["spec"]["minRunners"] == 0
    await eventually(lambda: kube.reacted(times=2), what="ARC took the put-back on")


async def test_a_put_back_that_meets_arcs_reaction_reads_again_and_goes_back(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """ARC's writes land between the put-back's read and its patch: a 409, then a fresh read."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    kube.arc.after_s = None  # it reacts where the test puts it
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert result.undo is not None
    kube.after_get = lambda: kube.arc.reconcile(SET)
    patches = len(kube.patches)

    assert await arc.revert(TARGET, result.undo) == Reverted(True, "minRunners 5 → 0")

    assert len(kube.patches) == patches + 2, "the first refused (409), the second taken"
    assert kube.sets[SET]["spec"]["minRunners"] == 0


async def test_a_max_runners_put_back_after_arc_reacted_still_keeps_the_floor(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """Raised maxRunners, then someone raised minRunners; ARC took both on. The put-back goes
    only as far as the new floor: ARC's listener does not run with maxRunners below it."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 120
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 10, "1", "al", raise_maximum=True))
    assert result.undo is not None
    assert (result.undo.field, result.undo.before, result.undo.after) == ("maxRunners", 120, 130)
    await eventually(kube.reacted, what="ARC took the scale-up on")
    kube.write(manager="kubectl", spec={"minRunners": 125})
    await eventually(lambda: kube.reacted(times=2), what="ARC took the new floor on")

    reverted = await arc.revert(TARGET, result.undo)

    assert reverted == Reverted(
        True,
        "maxRunners 130 → 125",
        "maxRunners stays 125, not 120: minRunners is 125 now, and ARC's listener does not run "
        "with maxRunners below minRunners",
    )
    spec = kube.sets[SET]["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (125, 125)


async def test_capacity_while_arc_takes_a_change_on_is_unknown_not_zero(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """ARC 0.14 writes 0 runners with phase Pending until its listener is back."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    kube.arc.after_s = None
    kube.write(manager="manager", status={"phase": "Pending", "currentRunners": 0})

    capacity = await scaler(kube, tmp_path).capacity(TARGET)

    assert capacity is not None and capacity.current is None and not capacity.at_maximum
    assert (capacity.minimum, capacity.maximum) == (0, 120)


async def test_a_field_changed_since_is_left_and_who_changed_it_is_said(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert result.undo is not None
    kube.write(manager="helm", spec={"minRunners": 8})
    kube.write(manager="manager", status={"currentRunners": 48})  # a later status write
    patches = len(kube.patches)
    reverted = await arc.revert(TARGET, result.undo)
    assert not reverted.done
    assert reverted.detail.startswith(
        "minRunners is 8 now, not the 5 set from Slack; changed by helm at "
    )
    assert reverted.detail.endswith(" UTC")
    assert kube.sets[SET]["spec"]["minRunners"] == 8, "left as it is"
    assert len(kube.patches) == patches, "read, and left without a write"


async def test_a_value_already_back_is_not_patched_again(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.add_from_fixture(minRunners=2, maxRunners=120)["status"]["currentRunners"] = 40
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 3, "1", "al"))
    assert result.undo is not None
    kube.write(manager="kubectl", spec={"minRunners": 2})
    assert await arc.revert(TARGET, result.undo) == Reverted(
        True, "minRunners was already back to 2"
    )


async def test_a_deleted_scale_set_is_a_permanent_failure(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert result.undo is not None
    del kube.sets[SET]
    with pytest.raises(BackendError) as caught:
        await arc.revert(TARGET, result.undo)
    assert caught.value.status == 404 and not caught.value.retryable


async def test_capacity_says_the_set_is_managed_by_helm_or_argo_cd(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    runner_set = kube.add_from_fixture(minRunners=0, maxRunners=120)
    arc = scaler(kube, tmp_path)
    capacity = await arc.capacity(TARGET)
    manager = capacity.managed_by if capacity else None
    assert manager is not None and manager.describe() == (
        "Helm (release mt-l-x86iavx512-8-64 in arc-runners, marked by its "
        "meta.helm.sh/release-name annotation)"
    ), "what `helm install` writes"
    runner_set["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] = (
        "arc-runners:actions.github.com/AutoscalingRunnerSet:arc-runners/mt-l-x86iavx512-8-64"
    )
    capacity = await arc.capacity(TARGET)
    manager = capacity.managed_by if capacity else None
    assert manager is not None and manager.describe() == (
        "Argo CD (application arc-runners, tracked by its argocd.argoproj.io/tracking-id "
        "annotation)"
    )


async def test_arc_failures_are_its_failed_ephemeral_runners(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    arc = scaler(kube, tmp_path)
    assert await arc.failures(TARGET) == []
    kube.write(manager="manager", status={"failedEphemeralRunners": 7, "phase": "Running"})
    assert await arc.failures(TARGET) == ["7 ephemeral runners failed to start (phase Running)"]


@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_changed_by_and_failures_take_any_object(data: dict[str, Any]) -> None:
    for shape in (data, {"metadata": {"managedFields": data.get("x", [data])}}, {"status": data}):
        assert isinstance(changed_by(shape, "minRunners"), str)
        assert isinstance(ephemeral_failures(shape), list)


@given(json_values)
def test_an_undo_is_read_back_only_in_its_shape(data: object) -> None:
    undo = Undo.load(data)
    assert undo is None or Undo.load(undo.dump()) == undo
    assert Undo.load(Undo("minRunners", None, 5, "12").dump()) == Undo("minRunners", None, 5, "12")
