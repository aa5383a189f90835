"""No scale-up or put-back leaves a scale set as ARC cannot run it: `maxRunners < minRunners`
stops ARC's listener (its config check refuses to start), so every write checks the bounds.
The sequences run against the strict Kubernetes API stand-in, with other writers (kubectl,
Helm) between our writes, and the put-backs in either order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.kube import kube_access
from bot.backends.scale import Reverted, ScaleRequest, Undo, problem
from bot.backends.scale.arc import NAMES, ArcScaler
from bot.config import Settings
from bot.domain.scale.scaling import ScaleTarget
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi

TARGET = ScaleTarget("linux", "arc-runners/mt-l-x86iavx512-8-64", cap=50)
SET = ("arc-runners", "mt-l-x86iavx512-8-64")


def scaler(kube: FakeKubeApi, tmp_path: Path) -> ArcScaler:
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    return ArcScaler(Settings(backend_timeout_seconds=10), kube_access(str(path), {}))


def spec(kube: FakeKubeApi) -> tuple[int | None, int | None]:
    values = kube.sets[SET]["spec"]
    return values.get("minRunners"), values.get("maxRunners")


def add(kube: FakeKubeApi, minimum: int, maximum: int) -> None:
    """The recorded scale set with these bounds, running its floor."""
    kube.add_from_fixture(minRunners=minimum, maxRunners=maximum)
    kube.write(manager="manager", status={"currentRunners": minimum})


def at_maximum(kube: FakeKubeApi) -> None:
    """ARC's controller reports every runner it may run busy: raising the floor adds none."""
    kube.write(manager="manager", status={"currentRunners": kube.sets[SET]["spec"]["maxRunners"]})


async def test_the_issue_sequence_puts_maxrunners_back_only_down_to_the_kept_minrunners(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """maxRunners 10 → 15, then minRunners 5 → 12 (kept: a colleague sets it by hand to the same
    number, so it is no longer ours), then maxRunners goes back: to 12, not 10."""
    add(kube, 5, 10)
    arc = scaler(kube, tmp_path)
    at_maximum(kube)
    raised = await arc.scale(ScaleRequest(TARGET, 5, "1", "al", raise_maximum=True))
    assert spec(kube) == (5, 15)
    floor = await arc.scale(ScaleRequest(TARGET, 7, "1", "al"))
    assert spec(kube) == (12, 15) and floor.undo is not None and raised.undo is not None

    reverted = await arc.revert(TARGET, raised.undo)
    assert reverted == Reverted(
        True,
        "maxRunners 15 → 12",
        "maxRunners stays 12, not 10: minRunners is 12 now, and ARC's listener does not run "
        "with maxRunners below minRunners",
    )
    assert spec(kube) == (12, 12)


@pytest.mark.parametrize("first", ["minRunners", "maxRunners"])
async def test_two_scale_ups_go_back_whole_floor_first(
    kube: FakeKubeApi, tmp_path: Path, first: str
) -> None:
    """Made in either order, put back floor first (ARC's `revert_order`): both go back whole."""
    add(kube, 5, 10)
    arc = scaler(kube, tmp_path)
    undos: dict[str, Undo] = {}
    for field in (first, *({"minRunners", "maxRunners"} - {first})):
        raise_max = field == "maxRunners"
        delta = 5 if raise_max else 3
        result = await arc.scale(ScaleRequest(TARGET, delta, "1", "al", raise_maximum=raise_max))
        assert result.undo is not None
        undos[field] = result.undo
    assert spec(kube) == (8, 15)
    assert arc.revert_order == ("minRunners", "maxRunners")
    for field in arc.revert_order:
        assert (await arc.revert(TARGET, undos[field])).left == ""
    assert spec(kube) == (5, 10)


async def test_a_floor_goes_back_only_where_it_was_when_someone_lowered_the_ceiling_below_it(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    add(kube, 5, 20)
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 7, "1", "al"))
    assert result.undo is not None
    kube.write(manager="kubectl", spec={"maxRunners": 3})  # invalid, by hand
    reverted = await arc.revert(TARGET, result.undo)
    assert not reverted.done
    assert reverted.detail == (
        "minRunners stays 12: maxRunners is 3 now, below the 5 it would go back to, and ARC's "
        "listener does not run with maxRunners below minRunners"
    )
    assert spec(kube) == (12, 3), "not ours to fix, and not made any different"


async def test_a_scale_up_on_a_set_left_invalid_is_refused_when_it_would_stay_invalid(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    add(kube, 12, 10)
    arc = scaler(kube, tmp_path)
    patches = len(kube.patches)
    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 1, "1", "al", raise_maximum=True))
    assert str(caught.value) == (
        "maxRunners 11 would leave minRunners 12 above maxRunners 11, which the autoscaler "
        "cannot run with: nothing was changed"
    )
    assert len(kube.patches) == patches
    # Raised far enough, it makes the set valid again: allowed.
    await arc.scale(ScaleRequest(TARGET, 2, "1", "al", raise_maximum=True))
    assert spec(kube) == (12, 12)


async def test_a_floor_raised_between_the_read_and_the_put_back_is_read_again(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """A concurrent change: kubectl raises minRunners between our read and our patch; the
    patch's resourceVersion makes it a 409, and the put-back is worked out again."""
    add(kube, 5, 10)
    kube.arc.after_s = None  # kubectl's is the one write meanwhile (ARC's: test_scalers.py)
    arc = scaler(kube, tmp_path)
    at_maximum(kube)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al", raise_maximum=True))
    assert result.undo is not None
    kube.after_get = ("kubectl", {"minRunners": 13})
    reverted = await arc.revert(TARGET, result.undo)
    assert reverted.done and reverted.detail == "maxRunners 15 → 13"
    assert "minRunners is 13 now" in reverted.left
    assert spec(kube) == (13, 13)


async def test_a_ceiling_that_cannot_come_down_at_all_is_left_and_said(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    add(kube, 5, 10)
    arc = scaler(kube, tmp_path)
    at_maximum(kube)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al", raise_maximum=True))
    assert result.undo is not None
    kube.write(manager="kubectl", spec={"minRunners": 15})
    patches = len(kube.patches)
    reverted = await arc.revert(TARGET, result.undo)
    assert reverted == Reverted(
        False,
        "maxRunners stays 15: minRunners is 15 now, and ARC's listener does not run with "
        "maxRunners below minRunners",
    )
    assert len(kube.patches) == patches and spec(kube) == (15, 15)


# -- any sequence ------------------------------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("scale"), st.sampled_from(["minRunners", "maxRunners"]), st.integers(1, 6)),
    st.tuples(st.just("revert"), st.integers(0, 5), st.just(0)),
    st.tuples(
        st.just("kubectl"), st.sampled_from(["minRunners", "maxRunners"]), st.integers(0, 30)
    ),
)


def valid(bounds: tuple[int | None, int | None]) -> bool:
    return not problem(bounds[0], bounds[1], None, NAMES)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(steps=[("scale", "maxRunners", 3), ("scale", "minRunners", 4), ("revert", 0, 0)])
@given(steps=st.lists(STEP, min_size=1, max_size=12))
async def test_no_sequence_of_ours_makes_a_valid_set_invalid(
    kube: FakeKubeApi, tmp_path: Path, steps: list[tuple[str, Any, int]]
) -> None:
    kube.sets.clear()
    add(kube, 5, 8)
    arc = scaler(kube, tmp_path)
    undos: list[Undo] = []
    for kind, what, amount in steps:
        before = spec(kube)
        if kind == "kubectl":
            kube.write(manager="kubectl", spec={what: amount})
            continue
        if kind == "scale":
            at_maximum(kube) if what == "maxRunners" else None
            try:
                result = await arc.scale(
                    ScaleRequest(TARGET, amount, "1", "al", raise_maximum=what == "maxRunners")
                )
            except BackendError:
                assert spec(kube) == before, "a refused scale-up changes nothing"
                continue
            assert result.undo is not None
            undos.append(result.undo)
        elif undos:
            undo = undos.pop(what % len(undos))
            try:
                reverted = await arc.revert(TARGET, undo)
            except BackendError as exc:  # ARC's writes met every try: tried again later
                assert exc.retryable and spec(kube) == before, "nothing written"
                continue
            now = kube.sets[SET]["spec"].get(undo.field)
            if not reverted.done:
                assert spec(kube) == before, "left alone means nothing written"
            elif reverted.left:
                assert now not in (undo.before, undo.after), "partly: neither end"
            else:
                assert now == undo.before, f"{reverted.detail} says it went back"
        if valid(before):
            assert valid(spec(kube)), f"{kind} {what} {amount}: {before} -> {spec(kube)}"


# -- the check a form makes before it offers an amount -----------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(minimum=16, maximum=20, current=16, delta=20, raise_maximum=False, ceiling=150)
@given(
    minimum=st.integers(0, 30),
    maximum=st.integers(0, 30),
    current=st.integers(0, 30),
    delta=st.integers(1, 25),
    raise_maximum=st.booleans(),
    ceiling=st.integers(0, 60) | st.none(),
)
async def test_what_the_form_is_told_arc_refuses_is_what_a_scale_up_is_refused(
    kube: FakeKubeApi,
    tmp_path: Path,
    minimum: int,
    maximum: int,
    current: int,
    delta: int,
    raise_maximum: bool,
    ceiling: int | None,
) -> None:
    """`refusal` at the capacity read is the scale-up's own check: "" exactly when the patch
    goes through, else the words the scale-up is refused with, nothing patched."""
    kube.sets.clear()
    kube.add_from_fixture(minRunners=minimum, maxRunners=maximum)
    # ARC's controller takes the new set on now, not between the read and the patch: its
    # reconcile zeroes the counts while Pending, which would change what each is told.
    kube.arc.reconcile(("arc-runners", RECORDED))
    kube.write(manager="manager", status={"currentRunners": current})
    arc = scaler(kube, tmp_path)
    target = ScaleTarget("linux", TARGET.target, cap=50, ceiling=ceiling)
    told = arc.refusal(target, await arc.capacity(target), delta, raise_maximum=raise_maximum)
    patches, written = len(kube.patches), len(kube.written)
    request = ScaleRequest(target, delta, "1", "al", raise_maximum=raise_maximum)
    if not told:
        await arc.scale(request)
        # Written once: ARC's controller still reacting to an earlier example's change may move
        # the version between the read and the patch (a 409, read again and patched again).
        assert len(kube.written) == written + 1
        return
    with pytest.raises(BackendError) as refused:
        await arc.scale(request)
    assert str(refused.value) == told
    assert len(kube.patches) == patches
