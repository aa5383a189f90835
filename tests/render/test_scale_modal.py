"""The scale modal's warning that the scale set's own tool will put it back: which tool, by which
marking, and what it will do, in both steps; valid Block Kit and inert whatever the metadata
says."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.domain.scale.scaling import Capacity, ScaleOwner, ScalePreview, ScaleTarget, managed_by
from bot.render.scale_modal import ScaleForm, render_scale_confirm, render_scale_form
from tests.render.test_messages import EVIL, assert_inert, texts_of

FORM = ScaleForm(ref="12", channel="C1", runner_type="linux.2xlarge", delta=5)
TARGET = ScaleTarget("linux.2xlarge", "arc-runners/linux-2xlarge", cap=10)
HELM = {"meta.helm.sh/release-name": "linux-2xlarge", "meta.helm.sh/release-namespace": "arc"}
TRACKING_ID = "arc-runners:actions.github.com/AutoscalingRunnerSet:arc/linux-2xlarge"
CHART = {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "linux-2xlarge"}


def preview(labels: object, annotations: object) -> ScalePreview:
    capacity = Capacity(40, 0, 120, managed_by=managed_by(labels, annotations))
    return ScalePreview(TARGET, capacity, "", None, can_raise_maximum=True, revert_after_s=3600)


def both_steps(shown: ScalePreview) -> list[dict[str, Any]]:
    form = render_scale_form(FORM, ScaleOwner(("linux.2xlarge",)), shown)
    confirm = render_scale_confirm(FORM, shown, "ARC", about="Recorded in the thread.")
    return [form, confirm]


@pytest.mark.parametrize(
    ("labels", "annotations", "warning"),
    [
        (
            {**CHART, "app.kubernetes.io/instance": "arc-runners"},
            {},
            "⚠️ This scale set is managed by Argo CD (application arc-runners, tracked by its "
            "app.kubernetes.io/instance label): an Argo CD sync puts the values from Git back, "
            "within seconds when self-heal is on, undoing this scale-up whatever is chosen here.",
        ),
        (
            CHART,
            {"argocd.argoproj.io/tracking-id": TRACKING_ID},
            "⚠️ This scale set is managed by Argo CD (application arc-runners, tracked by its "
            "argocd.argoproj.io/tracking-id annotation): an Argo CD sync puts the values from Git "
            "back, within seconds when self-heal is on, undoing this scale-up whatever is chosen "
            "here.",
        ),
        (
            CHART,
            HELM,
            "⚠️ This scale set is managed by Helm (release linux-2xlarge in arc, marked by its "
            "meta.helm.sh/release-name annotation): the next `helm upgrade` puts the chart's "
            "values back, undoing this scale-up whatever is chosen here.",
        ),
    ],
    ids=["argo-cd-label", "argo-cd-annotation", "helm"],
)
def test_both_steps_say_who_puts_it_back_and_how(
    labels: dict[str, str], annotations: dict[str, str], warning: str
) -> None:
    for view in both_steps(preview(labels, annotations)):
        contexts = [
            e["text"] for b in view["blocks"] if b["type"] == "context" for e in b["elements"]
        ]
        assert warning in contexts


def test_a_set_nobody_manages_has_no_warning() -> None:
    for view in both_steps(preview({"app.kubernetes.io/part-of": "gha-rs"}, {})):
        assert "managed by" not in json.dumps(view["blocks"], ensure_ascii=False)


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({"argocd.argoproj.io/instance": EVIL * 20}, {}),
        ({}, {"argocd.argoproj.io/tracking-id": f"{EVIL * 20}:x/y:z/w"}),
        ({}, {"meta.helm.sh/release-name": EVIL, "meta.helm.sh/release-namespace": EVIL * 20}),
        ({}, {f"argocd.argoproj.io/{EVIL * 20}": "x"}),
    ],
)
def test_hostile_metadata_stays_inert_and_within_limits(
    labels: dict[str, str], annotations: dict[str, str]
) -> None:
    for view in both_steps(preview(labels, annotations)):
        for block in view["blocks"]:
            parsed = Block.parse(block)
            assert parsed is not None
            parsed.validate_json()
        for text in texts_of(view["blocks"]):
            assert_inert(text)
            assert len(text) <= 3000


@pytest.mark.parametrize(
    ("capacity", "can_raise_maximum", "raise_maximum", "after"),
    [
        # ARC raises the floor: the reply will say "minRunners 16 → 21 (maxRunners 20)".
        (Capacity(16, 16, 20), True, False, "After the scale-up: minRunners 16 → 21."),
        # ARC at its ceiling, raising it instead.
        (
            Capacity(20, 16, 20, at_maximum=True),
            True,
            True,
            "After the scale-up: maxRunners 20 → 25.",
        ),
        # A backend that knows only how many run (an Auto Scaling group's desired capacity).
        (Capacity(16, 0, 40), False, False, "After the scale-up: 16 → 21 runners."),
    ],
    ids=["min-runners", "max-runners", "runners"],
)
def test_the_confirmation_names_the_value_that_changes_once(
    capacity: Capacity, can_raise_maximum: bool, raise_maximum: bool, after: str
) -> None:
    shown = ScalePreview(TARGET, capacity, "", None, can_raise_maximum=can_raise_maximum)
    form = replace(FORM, raise_maximum=raise_maximum)
    confirm = render_scale_confirm(form, shown, "ARC", about="Recorded in the thread.")
    lines = confirm["blocks"][0]["text"]["text"].splitlines()
    assert lines[1] == f"Now: {capacity.describe()}."
    assert lines[2] == after
