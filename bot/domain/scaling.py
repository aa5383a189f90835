"""Scaling a runner type as values: its target, the capacity a backend reports, the tool that
re-applies the target's spec (`managed_by`), and what the scale form offers before anyone
confirms (`scale_default`). The calls are `bot.backends.scale`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.domain.early_warning import SCALE_UNTIL, Phase, WarningState
from bot.domain.incidents import Incident
from bot.domain.judgement import Judgement


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
    managed_by: ManagedBy | None = None

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
class ScaleOwner:
    """Whose scale-up the Scale up… form makes: an incident's, or an early warning's."""

    choices: tuple[str, ...]  # the runner types offered, the owner's own first
    incident: Incident | None = None
    warning: WarningState | None = None

    @property
    def until(self) -> str:
        """What puts its scale-up back besides the time ("": the incident's resolve and settle)."""
        if self.warning is not None and self.warning.phase is not Phase.FOLDED:
            return SCALE_UNTIL
        return ""


# Why the target would refuse adding `delta` (to its maximum, when True); "" when it would not.
Refusal = Callable[[int, bool], str]


@dataclass(frozen=True)
class ScaleDefault:
    """What the form offers before anyone types: the advice, in a shape the target accepts."""

    delta: int | None = None  # pre-filled; None: nothing (nothing advised, or nothing accepted)
    raise_maximum: bool = False  # pre-selected: raise the maximum, not the floor
    more_after: int = 0  # advised beyond one request's cap: "+N more after this one"
    because: str = ""  # why this shape: the advice's, or the target refuses the other
    limited: str = ""  # why less than advised is offered, or nothing: the target's refusal


@dataclass(frozen=True)
class ScalePreview:
    """What the scale modal shows for one runner type before anyone confirms."""

    target: ScaleTarget
    capacity: Capacity | None
    capacity_note: str  # why capacity is unknown, when it is
    recommended: Judgement | None
    can_raise_maximum: bool
    cannot_undo: str = ""  # why queuepilot cannot put a scale-up back
    # Put back after this long, or as `until` says (0: no time limit; None: never put back).
    revert_after_s: int | None = None
    until: str = "the incident resolves"  # what puts it back, besides the time
    default: ScaleDefault = field(default_factory=ScaleDefault)


def scale_default(
    advice: Judgement | None,
    target: ScaleTarget,
    capacity: Capacity | None,
    *,
    can_raise_maximum: bool,
    refusal: Refusal,
) -> ScaleDefault:
    """What the form pre-fills: the judgement's `runners`, as much as one request may add and
    the target accepts. The maximum is raised instead of the floor where the advice raises it
    or the target refuses a raised floor; a refused shape offers the most the target accepts,
    saying why; else nothing, rather than a number a responder would take by accident."""
    if advice is None or advice.runners <= 0:
        # Nothing to fill in, but the shape chosen is still one a first runner fits: a set
        # that runs its maximum, or refuses a higher floor, gains nothing from its floor;
        # while new pods cannot start, a higher bound is nothing to choose for anyone.
        if advice is not None and (advice.cannot_start or advice.nodes_short):
            return ScaleDefault()
        at_maximum = capacity is not None and capacity.at_maximum
        raise_maximum = can_raise_maximum and (at_maximum or bool(refusal(1, False)))
        return ScaleDefault(raise_maximum=raise_maximum)
    shapes = _shapes(advice, capacity, can_raise_maximum)
    raised = f"the advice raises the maximum to {advice.new_maximum}" if advice.new_maximum else ""
    first = ""
    partial: ScaleDefault | None = None
    for raise_maximum, wanted in shapes:
        asked = min(wanted, target.cap)
        refused = refusal(asked, raise_maximum)
        because = first or (raised if raise_maximum else "")
        if not refused:
            return ScaleDefault(asked, raise_maximum, wanted - asked, because)
        first = first or refused
        most = _most_accepted(asked, raise_maximum, refusal)
        if most and partial is None:
            partial = ScaleDefault(most, raise_maximum, 0, because, refused)
    return partial or ScaleDefault(None, shapes[0][0], limited=first)


def _shapes(
    advice: Judgement, capacity: Capacity | None, can_raise_maximum: bool
) -> list[tuple[bool, int]]:
    """(raise the maximum, by how much) to try, the advice's own shape first."""
    floor = (False, advice.runners)
    if not can_raise_maximum:
        return [floor]
    wanted = advice.new_maximum
    maximum = capacity.maximum if capacity is not None else None
    if wanted is not None and maximum is None:
        return [(True, advice.raise_maximum_by), floor]
    if wanted is not None and maximum is not None and wanted > maximum:
        # To the advice's maximum from the target's own, which may have moved since.
        return [(True, wanted - maximum), floor]
    # A floor the target refuses (at or near its maximum): the maximum rises by the runners.
    return [floor, (True, advice.runners)]


def _most_accepted(asked: int, raise_maximum: bool, refusal: Refusal) -> int:
    """The most up to `asked` the target accepts: refusing one amount, it refuses every larger
    one, so halving finds it."""
    low, high = 0, asked
    while low < high:
        middle = (low + high + 1) // 2
        if refusal(middle, raise_maximum):
            high = middle - 1
        else:
            low = middle
    return low


# Argo CD's tracking (docs/user-guide/resource_tracking.md): the annotation (3.x's default),
# the label (2.x's), and the custom label its docs suggest.
ARGO_TRACKING_ID = "argocd.argoproj.io/tracking-id"
ARGO_INSTANCE_LABEL = "argocd.argoproj.io/instance"
INSTANCE_LABEL = "app.kubernetes.io/instance"
# Written by `helm install` and `helm upgrade` alone, never by `helm template`.
HELM_RELEASE = "meta.helm.sh/release-name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MAX_NAME = 100  # an application or release as shown (Helm's release names stop at 53)

ARGO_SYNC = "an Argo CD sync puts the values from Git back, within seconds when self-heal is on"
HELM_UPGRADE = "the next `helm upgrade` puts the chart's values back"


@dataclass(frozen=True)
class ManagedBy:
    """The tool that re-applies an object's spec, the marking that says so, and what it will do
    to a change made from Slack."""

    tool: str  # "Argo CD", "Helm", or "whatever applies its rendered Helm chart"
    owner: str  # "application arc-runners"; "" when not marked
    marking: str  # "tracked by its app.kubernetes.io/instance label"
    undoes: str  # "the next `helm upgrade` puts the chart's values back"

    def describe(self) -> str:
        return f"{self.tool} ({', '.join(part for part in (self.owner, self.marking) if part)})"


def managed_by(labels: object, annotations: object) -> ManagedBy | None:
    """Which tool re-applies this object's spec (a sync or an upgrade undoes a patch made from
    Slack), from its metadata; None when nothing says. The first match decides: Argo CD's
    tracking annotation, its instance label, Helm's release annotation, the instance label
    unless a Helm chart rendered it (Argo CD renders charts with `helm template`, which writes
    no annotation), any other Argo CD annotation, and `managed-by: Helm` alone."""
    labels, annotations = _strings(labels), _strings(annotations)
    if tracking := annotations.get(ARGO_TRACKING_ID):
        return _argo_cd(tracking.partition(":")[0], f"its {ARGO_TRACKING_ID} annotation")
    if instance := labels.get(ARGO_INSTANCE_LABEL):
        return _argo_cd(instance, f"its {ARGO_INSTANCE_LABEL} label")
    if release := annotations.get(HELM_RELEASE):
        owner = f"release {_name(release)}"
        if namespace := annotations.get("meta.helm.sh/release-namespace"):
            owner += f" in {_name(namespace)}"
        return ManagedBy("Helm", owner, f"marked by its {HELM_RELEASE} annotation", HELM_UPGRADE)
    helm = labels.get(MANAGED_BY_LABEL) == "Helm"
    instance = labels.get(INSTANCE_LABEL)
    # The chart's own instance label (ARC's: the scale set's name), which Argo CD would have
    # written its application's name over.
    chart = (labels.get("app.kubernetes.io/name"), labels.get("actions.github.com/scale-set-name"))
    if instance and not (helm and instance in chart):
        return _argo_cd(instance, f"its {INSTANCE_LABEL} label")
    if argo := sorted(key for key in annotations if key.startswith("argocd.argoproj.io/")):
        return ManagedBy("Argo CD", "", f"going by its {_name(argo[0])} annotation", ARGO_SYNC)
    if helm:
        marking = (
            f"marked by its {MANAGED_BY_LABEL}: Helm label, without the annotations "
            "`helm install` writes"
        )
        undoes = "applying the chart again puts its values back"
        return ManagedBy("whatever applies its rendered Helm chart", "", marking, undoes)
    return None


def _argo_cd(application: str, marking: str) -> ManagedBy:
    return ManagedBy(
        "Argo CD", f"application {_name(application)}", f"tracked by {marking}", ARGO_SYNC
    )


def _strings(metadata: object) -> dict[str, str]:
    """Labels or annotations as strings: anything else is no marking."""
    if not isinstance(metadata, dict):
        return {}
    return {k: v.strip() for k, v in metadata.items() if isinstance(k, str) and isinstance(v, str)}


def _name(text: str) -> str:
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"
