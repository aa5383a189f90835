"""Who puts a scale set's spec back, from the metadata each tool really leaves on it.

The shapes: ARC's `gha-runner-scale-set` chart (actions-runner-controller
charts/gha-runner-scale-set/templates/_helpers.tpl and autoscalingrunnerset.yaml: `instance`
and `name` labels set to the scale set's name, `managed-by` from `.Release.Service`); what
`helm install` adds (helm pkg/action/validate.go, `setMetadataVisitor`: the `managed-by: Helm`
label and both `meta.helm.sh` annotations); what Argo CD adds by tracking method (argo-cd
docs/user-guide/resource_tracking.md: the label set to the application's name, or the
`<app>:<group>/<kind>:<namespace>/<name>` tracking ID, or both).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from bot.domain.scale.scaling import ManagedBy, managed_by
from tests.support.mutations import json_values

SET, NAMESPACE, APP = "linux-2xlarge", "arc-runners", "arc-runners"
ARGO_SYNC = "an Argo CD sync puts the values from Git back, within seconds when self-heal is on"
HELM_UPGRADE = "the next `helm upgrade` puts the chart's values back"

# What the chart renders, with `helm template` as with `helm install`.
CHART_LABELS = {
    "actions.github.com/scale-set-name": SET,
    "actions.github.com/scale-set-namespace": NAMESPACE,
    "app.kubernetes.io/component": "autoscaling-runner-set",
    "app.kubernetes.io/instance": SET,
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/name": SET,
    "app.kubernetes.io/part-of": "gha-rs",
    "app.kubernetes.io/version": "0.14.2",
    "helm.sh/chart": "gha-rs-0.14.2",
}
CHART_ANNOTATIONS = {
    "actions.github.com/cleanup-manager-role-binding": f"{SET}-gha-rs-manager",
    "actions.github.com/cleanup-manager-role-name": f"{SET}-gha-rs-manager",
    "actions.github.com/values-hash": "c2787030a4df8340368c76caab7db0f55dbeb9a8842af9eb8c8fa7dbaa6",
    "runner-scale-set-id": "27",  # ARC's controller writes it
}
HELM_ANNOTATIONS = {"meta.helm.sh/release-name": SET, "meta.helm.sh/release-namespace": NAMESPACE}
TRACKING_ID = f"{APP}:actions.github.com/AutoscalingRunnerSet:{NAMESPACE}/{SET}"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
BY_TRACKING_ID = (
    f"Argo CD (application {APP}, tracked by its argocd.argoproj.io/tracking-id annotation)"
)


@pytest.mark.parametrize(
    ("labels", "annotations", "described", "undoes"),
    [
        pytest.param(
            {**CHART_LABELS, "app.kubernetes.io/instance": APP},  # Argo CD overwrites it
            CHART_ANNOTATIONS,
            f"Argo CD (application {APP}, tracked by its app.kubernetes.io/instance label)",
            ARGO_SYNC,
            id="argo-cd-2-label-renders-arcs-chart",
        ),
        pytest.param(
            {"app.kubernetes.io/instance": "ci-runners"},
            {LAST_APPLIED: "{}"},
            "Argo CD (application ci-runners, tracked by its app.kubernetes.io/instance label)",
            ARGO_SYNC,
            id="argo-cd-2-label-plain-manifests",
        ),
        pytest.param(
            CHART_LABELS,  # the chart's own instance label stays: the scale set's name
            {**CHART_ANNOTATIONS, "argocd.argoproj.io/tracking-id": TRACKING_ID},
            BY_TRACKING_ID,
            ARGO_SYNC,
            id="argo-cd-3-annotation-renders-arcs-chart",
        ),
        pytest.param(
            {**CHART_LABELS, "app.kubernetes.io/instance": APP},
            {**CHART_ANNOTATIONS, "argocd.argoproj.io/tracking-id": TRACKING_ID},
            BY_TRACKING_ID,
            ARGO_SYNC,
            id="argo-cd-annotation+label",
        ),
        pytest.param(
            {**CHART_LABELS, "argocd.argoproj.io/instance": APP},
            CHART_ANNOTATIONS,
            f"Argo CD (application {APP}, tracked by its argocd.argoproj.io/instance label)",
            ARGO_SYNC,
            id="argo-cd-custom-instance-label",
        ),
        pytest.param(
            {k: v for k, v in CHART_LABELS.items() if k != "app.kubernetes.io/instance"},
            {**CHART_ANNOTATIONS, "argocd.argoproj.io/sync-options": "ServerSideApply=true"},
            "Argo CD (going by its argocd.argoproj.io/sync-options annotation)",
            ARGO_SYNC,
            id="argo-cd-tracking-by-a-label-of-another-name",
        ),
        pytest.param(
            CHART_LABELS,
            {**CHART_ANNOTATIONS, **HELM_ANNOTATIONS},
            f"Helm (release {SET} in {NAMESPACE}, marked by its meta.helm.sh/release-name "
            "annotation)",
            HELM_UPGRADE,
            id="helm-installs-arcs-chart",
        ),
        pytest.param(
            {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/name": "runners"},
            {},
            "whatever applies its rendered Helm chart (marked by its "
            "app.kubernetes.io/managed-by: Helm label, without the annotations `helm install` "
            "writes)",
            "applying the chart again puts its values back",
            id="a-chart-rendered-and-applied-by-something-else",
        ),
        pytest.param(
            {"actions.github.com/scale-set-name": SET, "app.kubernetes.io/part-of": "gha-rs"},
            {LAST_APPLIED: "{}"},
            None,
            None,
            id="kubectl-applied",
        ),
        pytest.param(None, "not a map", None, None, id="no-metadata"),
    ],
)
def test_the_marking_names_the_tool_and_what_it_will_do(
    labels: object, annotations: object, described: str | None, undoes: str | None
) -> None:
    found = managed_by(labels, annotations)
    assert (found.describe() if found else None) == described
    assert (found.undoes if found else None) == undoes


def test_helms_annotations_win_over_the_charts_instance_label() -> None:
    """Only `helm install`/`upgrade` write them; the chart's `instance` label alone is what
    Argo CD rendering the chart leaves, so it must not be read as Argo CD's here."""
    found = managed_by(CHART_LABELS, HELM_ANNOTATIONS)
    assert found is not None and found.tool == "Helm"


def test_argo_cds_own_marks_win_over_helms() -> None:
    """A release taken over by Argo CD keeps Helm's annotations; Argo CD syncs it now."""
    found = managed_by(
        {**CHART_LABELS, "argocd.argoproj.io/instance": APP},
        {**HELM_ANNOTATIONS, "argocd.argoproj.io/tracking-id": TRACKING_ID},
    )
    assert found == ManagedBy(
        "Argo CD",
        f"application {APP}",
        "tracked by its argocd.argoproj.io/tracking-id annotation",
        ARGO_SYNC,
    )


def test_names_are_bounded() -> None:
    found = managed_by({"app.kubernetes.io/instance": "x" * 500}, {})
    assert found is not None and len(found.describe()) < 200


@given(json_values, json_values)
def test_any_metadata_gives_a_tool_or_none(labels: object, annotations: object) -> None:
    found = managed_by(labels, annotations)
    assert found is None or (found.describe() and found.undoes)


def test_a_chart_rendered_and_applied_by_another_tool_is_not_argo_cds() -> None:
    """`helm template | kubectl apply` (or Pulumi's Chart, kustomize's helmCharts): the chart's
    own instance label (the scale set's name) and `managed-by: Helm`, no Helm annotation. Argo
    CD would have written its application's name over the label."""
    found = managed_by(CHART_LABELS, CHART_ANNOTATIONS)
    assert found is not None and found.tool == "whatever applies its rendered Helm chart"
    assert found.undoes == "applying the chart again puts its values back"
