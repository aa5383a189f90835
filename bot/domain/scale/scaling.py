"""Scaling a runner type as values: its target, its capacity, the tool that re-applies its spec
(`managed_by`), and what the scale form offers (`scale_default`). The calls are
`bot.backends.scale`'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.domain.incident.incidents import Incident
from bot.domain.reading.early_warning import SCALE_UNTIL, Phase, WarningState
from bot.domain.reading.judgement import Judgement
from bot.domain.shortened import shortened


@dataclass(frozen=True)
class Policy:
    """A runner type's pilot (SCALER_TARGETS' `pilot`): the most runners it adds in one incident,
    in one act, its up window (how long its readings must have wanted more), the quiet after a
    person's scale-up, and the least time between two of its own acts."""

    up_to: int
    step: int
    hold_s: int
    cooldown_s: int
    period_s: int = 60
    dry_run: bool = False  # it says what it would have done, and scales nothing


@dataclass(frozen=True)
class ScaleTarget:
    runner_type: str
    target: str  # arc: "namespace/name"; aws-asg: the group's name; sqs: the runner label
    cap: int
    ceiling: int | None = None
    pilot: Policy | None = None


@dataclass(frozen=True)
class Capacity:
    current: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    # Raising the floor would change nothing: ARC runs min(minRunners + assigned, maxRunners).
    at_maximum: bool = False
    managed_by: ManagedBy | None = None

    def describe(self) -> str:
        """ "40 runners (min 0, max 120)"."""
        runners = f"{self.current} runners" if self.current is not None else "runners unknown"
        named = (("min", self.minimum), ("max", self.maximum))
        bounds = [f"{name} {value}" for name, value in named if value is not None]
        return runners + (f" ({', '.join(bounds)})" if bounds else "")


@dataclass(frozen=True)
class ScaleOwner:
    """Whose scale-up the form makes: an incident's, or an early warning's."""

    choices: tuple[str, ...]  # the runner types offered, the owner's own first
    incident: Incident | None = None
    warning: WarningState | None = None

    @property
    def until(self) -> str:
        """What puts its scale-up back besides the time ("": the incident's resolve and settle)."""
        unfolded = self.warning is not None and self.warning.phase is not Phase.FOLDED
        return SCALE_UNTIL if unfolded else ""


# Why the target would refuse adding `delta` (to its maximum, when True); "" when it would not.
Refusal = Callable[[int, bool], str]


@dataclass(frozen=True)
class ScaleDefault:
    delta: int | None = None  # None: nothing advised, or nothing accepted
    raise_maximum: bool = False  # the maximum, not the floor
    more_after: int = 0  # advised beyond one request's cap
    because: str = ""  # why this shape
    limited: str = ""  # the target's refusal, where less than advised is offered


@dataclass(frozen=True)
class ScalePreview:
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
    """The judgement's `runners`, as much as one request may add and the target accepts (raising
    the maximum where the advice does or the floor is refused), saying why where less; else
    nothing, rather than a number a responder would take by accident."""
    if advice is None or advice.runners <= 0:
        # Still the shape a first runner fits; while new pods cannot start, none.
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
    """(raise the maximum, by how much) to try, the advice's own shape first: all it advises,
    past one request's cap too (the form offers the cap and says how many more after it)."""
    floor = (False, advice.runners + advice.beyond_cap)
    if not can_raise_maximum:
        return [floor]
    wanted = advice.new_maximum
    maximum = capacity.maximum if capacity is not None else None
    if wanted is not None and (maximum is None or wanted > maximum):
        # To the advice's maximum from the target's own, which may have moved since.
        by = advice.raise_maximum_by if maximum is None else wanted - maximum
        return [(True, by + advice.beyond_cap), floor]
    # A floor the target refuses (at or near its maximum): the maximum rises by the runners.
    return [floor, (True, floor[1])]


def _most_accepted(asked: int, raise_maximum: bool, refusal: Refusal) -> int:
    """Refusing one amount, the target refuses every larger one, so halving finds the most."""
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
    tool: str  # "Argo CD", "Helm", or "whatever applies its rendered Helm chart"
    owner: str  # "application arc-runners"; "" when not marked
    marking: str  # "tracked by its app.kubernetes.io/instance label"
    undoes: str  # "the next `helm upgrade` puts the chart's values back"

    def describe(self) -> str:
        return f"{self.tool} ({', '.join(part for part in (self.owner, self.marking) if part)})"


def managed_by(labels: object, annotations: object) -> ManagedBy | None:
    """The tool that re-applies this object's spec, undoing a patch made from Slack; None when
    nothing says. The first match decides, in this order; the instance label counts unless a
    Helm chart rendered it (Argo CD renders charts with `helm template`: no annotation)."""
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
    # The chart's own (ARC's: the scale set's name); Argo CD would have written over it.
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
    owner = f"application {_name(application)}"
    return ManagedBy("Argo CD", owner, f"tracked by {marking}", ARGO_SYNC)


def _strings(metadata: object) -> dict[str, str]:
    if not isinstance(metadata, dict):
        return {}
    return {k: v.strip() for k, v in metadata.items() if isinstance(k, str) and isinstance(v, str)}


def _name(text: str) -> str:
    return shortened(text, MAX_NAME)
