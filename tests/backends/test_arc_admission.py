"""The ARC scaler against an API server that runs the chart's own admission policy, with a ceiling
of 40 for the scale set that the bot's settings do not give (so only the API server holds it): a
change past the ceiling is refused in the policy's words, with the fix, never in RBAC's, and not
retried; one within it is made. A put-back the policy denies says so, and is not retried; a
set paused at maxRunners 0 is not raised at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.backends.http import BackendError
from bot.backends.kube import kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.scale.scaling import ScaleTarget
from tests.support.chart_admission import chart_policy
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi

SET = ("arc-runners", RECORDED)
NAMED = f"arc-runners/{RECORDED}"
TARGET = ScaleTarget("linux", NAMED, cap=20)  # no ceiling of the bot's own
POLICY = "queuepilot.queuepilot-scaler"
FIX = (
    "Its ceilings are SCALER_TARGETS' `ceiling`s, as the chart rendered them; the bot's own (the "
    "same entries) should match. To go past one, or change a set no entry names, change "
    "SCALER_TARGETS and `helm upgrade`"
)


def ceiling(value: int) -> dict[str, object]:
    """SCALER_TARGETS as the chart's values give them."""
    return {"linux": {"target": NAMED, "cap": 20, "ceiling": value}}


def denied(said: str) -> str:
    return (
        f"The Kubernetes API answered 403 Forbidden: its admission policy {POLICY} denied the "
        f"change: queuepilot's ServiceAccount {said}. {FIX}"
    )


def scaler(kube: FakeKubeApi, tmp_path: Path) -> ArcScaler:
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    return ArcScaler(Settings(backend_timeout_seconds=10), kube_access(str(path), {}))


@pytest.mark.parametrize(
    ("field", "spec", "raise_maximum", "said"),
    [
        (
            "maxRunners",
            {"minRunners": 0, "maxRunners": 30},
            True,
            f"may set maxRunners of {NAMED} only from 1 to its ceiling, 40, not 45",
        ),
        (
            "minRunners",
            {"minRunners": 30, "maxRunners": 120},
            False,
            f"may set minRunners of {NAMED} only up to its ceiling, 40, not 45",
        ),
    ],
)
async def test_past_the_policys_ceiling_is_refused_in_its_words_and_within_it_is_made(
    kube: FakeKubeApi,
    tmp_path: Path,
    field: str,
    spec: dict[str, int],
    raise_maximum: bool,
    said: str,
) -> None:
    kube.add_from_fixture(**spec)["status"]["currentRunners"] = 30
    kube.admission = chart_policy(ceiling(40))
    arc = scaler(kube, tmp_path)

    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 15, "1", "al", raise_maximum=raise_maximum))

    assert str(caught.value) == denied(said)
    assert not caught.value.retryable and caught.value.status == 403
    assert "Role" not in str(caught.value), "not RBAC's refusal"
    assert kube.sets[SET]["spec"][field] == spec[field] and not kube.written
    patches = len(kube.patches)

    result = await arc.scale(ScaleRequest(TARGET, 10, "1", "al", raise_maximum=raise_maximum))

    assert result.detail.startswith(f"{field} {spec[field]} → 40")
    assert kube.sets[SET]["spec"][field] == 40
    assert len(kube.patches) == patches + 1, "refused once, not asked again"


async def test_a_put_back_under_a_lowered_ceiling_is_made_and_one_of_a_dropped_target_is_not(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """After a scale-up to 35, the chart's ceiling was lowered to 20 (a helm upgrade): putting
    minRunners back to 30 is a step down, which the policy admits. Once the runner type is gone
    from SCALER_TARGETS, its set is not the bot's to change: the put-back is denied, in the
    policy's words, and not retried."""
    kube.add_from_fixture(minRunners=30, maxRunners=120)["status"]["currentRunners"] = 40
    kube.admission = chart_policy(ceiling(40))
    arc = scaler(kube, tmp_path)
    result = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert result.undo is not None and kube.sets[SET]["spec"]["minRunners"] == 35
    kube.admission = chart_policy(ceiling(20))

    back = await arc.revert(TARGET, result.undo)

    assert back.done and kube.sets[SET]["spec"]["minRunners"] == 30
    with pytest.raises(BackendError) as raised:
        await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert str(raised.value) == denied(
        f"may set minRunners of {NAMED} only up to its ceiling, 20, not 35"
    )
    kube.admission = chart_policy(ceiling(40))
    again = await arc.scale(ScaleRequest(TARGET, 5, "1", "al"))
    assert again.undo is not None and kube.sets[SET]["spec"]["minRunners"] == 35
    kube.admission = chart_policy({"other": {"target": "arc-runners/other", "ceiling": 8}})

    with pytest.raises(BackendError) as caught:
        await arc.revert(TARGET, again.undo)

    assert str(caught.value) == denied(
        f"may not change {NAMED}: no SCALER_TARGETS entry with a ceiling names this "
        "AutoscalingRunnerSet"
    )
    assert not caught.value.retryable
    assert kube.sets[SET]["spec"]["minRunners"] == 35


async def test_a_set_its_owner_paused_at_max_runners_0_is_not_raised(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """maxRunners 0 is a pause: a raise from Slack could never be put back (the policy holds
    the token to 1 at least), so the bot refuses it before asking, and says whose it is."""
    kube.add_from_fixture(minRunners=0, maxRunners=0)["status"]["currentRunners"] = 0
    kube.admission = chart_policy(ceiling(40))
    arc = scaler(kube, tmp_path)

    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 5, "1", "al", raise_maximum=True))

    assert str(caught.value).startswith("maxRunners is 0: the scale set's owner has paused it")
    assert not caught.value.retryable
    assert not kube.patches and kube.sets[SET]["spec"]["maxRunners"] == 0
