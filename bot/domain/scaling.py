"""What scaling a runner type is about, as values: its target (what the backend acts on, with a
cap per request and an optional ceiling), the capacity a backend reports, and what the scale
modal shows before anyone confirms. The calls themselves are `bot.backends.scale`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.forecast import Recommendation


@dataclass(frozen=True)
class ScaleTarget:
    runner_type: str
    target: str  # arc: "namespace/name"; aws-asg: the group's name; sqs: the runner label
    cap: int
    ceiling: int | None = None


@dataclass(frozen=True)
class Capacity:
    """What a target has now, as far as its backend can say (None: not known)."""

    current: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    # Raising the floor would change nothing: ARC runs min(minRunners + assigned, maxRunners).
    at_maximum: bool = False
    # The tool that re-applies the target's spec ("Helm (release x)"), when its metadata says.
    managed_by: str | None = None

    def describe(self) -> str:
        """ "40 runners (min 0, max 120)", with what is known."""
        runners = f"{self.current} runners" if self.current is not None else "runners unknown"
        bounds = [
            f"{name} {value}"
            for name, value in (("min", self.minimum), ("max", self.maximum))
            if value is not None
        ]
        return runners + (f" ({', '.join(bounds)})" if bounds else "")


@dataclass(frozen=True)
class ScalePreview:
    """What the scale modal shows for one runner type before anyone confirms."""

    target: ScaleTarget
    capacity: Capacity | None
    capacity_note: str  # why capacity is unknown, when it is
    recommended: Recommendation | None
    can_raise_maximum: bool
    # Why a scale-up cannot be put back by queuepilot ("" when it can).
    cannot_undo: str = ""
    # Put back when the incident resolves and after this long (0: only when it resolves);
    # None: scale-ups are not put back (no revert sweep runs).
    revert_after_s: int | None = None
    until: str = "the incident resolves"  # what puts it back, besides the time


HELM_RELEASE = "meta.helm.sh/release-name"
ARGO_PREFIX = "argocd.argoproj.io/"
ARGO_TRACKING = "argocd.argoproj.io/tracking-id"


def managed_by(labels: object, annotations: object) -> str | None:
    """Which tool re-applies this object's spec, from its metadata: "Argo CD (application x)",
    "Helm (release y)", or None. A sync or an upgrade puts its own values back, so a patch made
    from Slack is undone by it anyway.

    Argo CD first: it often renders a Helm chart, whose `managed-by: Helm` label stays on the
    object. `app.kubernetes.io/instance` alone tells nothing (Helm charts set it too); only
    Argo CD's own annotations (the tracking ID, sync options) name it.
    """
    labels = labels if isinstance(labels, dict) else {}
    annotations = annotations if isinstance(annotations, dict) else {}
    argo = [k for k in annotations if isinstance(k, str) and k.startswith(ARGO_PREFIX)]
    if argo:
        tracking = annotations.get(ARGO_TRACKING)
        app = tracking.partition(":")[0] if isinstance(tracking, str) else ""
        return f"Argo CD (application {app})" if app else "Argo CD"
    release = annotations.get(HELM_RELEASE)
    if isinstance(release, str) and release:
        return f"Helm (release {release})"
    if labels.get("app.kubernetes.io/managed-by") == "Helm":
        return "Helm"
    return None
