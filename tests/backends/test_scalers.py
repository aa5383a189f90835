"""The ARC scaler alone against the Kubernetes-shaped API: every way the call can fail is told,
and a concurrent change of the scale set is recomputed, never overwritten."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.backends.errors import BackendError
from bot.backends.kube import from_kubeconfig
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler, ArcScalerConfig
from bot.domain.scaling import ScaleTarget
from sandbox.serve import serve_in_thread
from tests.support.fakes.kube_api import FakeKubeApi

TARGET = ScaleTarget("linux", "arc-runners/mt-l-x86iavx512-8-64", cap=10)


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    fake = FakeKubeApi()
    server = serve_in_thread(fake.app)
    fake.url = server.url  # type: ignore[attr-defined]
    yield fake
    server.stop()


def scaler(kube: FakeKubeApi, tmp_path: Path, *, url: str | None = None) -> ArcScaler:
    path = kube.kubeconfig(tmp_path, url or kube.url)  # type: ignore[attr-defined]
    return ArcScaler(ArcScalerConfig(from_kubeconfig(path), timeout_s=1))


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
    original_get = arc._get

    async def get_then_someone_patches(target: ScaleTarget) -> dict:  # type: ignore[type-arg]
        seen = await original_get(target)
        if len(kube.patches) == 0 and seen["spec"]["minRunners"] == 3:
            # Someone (Helm, Argo, a colleague) raises minRunners between our read and patch.
            current = kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]
            current["spec"]["minRunners"] = 8
            current["metadata"]["resourceVersion"] = "999"
        return seen

    arc._get = get_then_someone_patches  # type: ignore[method-assign]
    result = await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    assert result.detail == "minRunners 8 → 10 (maxRunners 200)"
    assert kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]["spec"]["minRunners"] == 10
