"""The scaler backends, read as the scalers read them, never changed. The sqs scaler needs only
`sqs:SendMessage`, which no dry call can test, so a queue this check may not read is a warning."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from lightkube import AsyncClient
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview

from bot.backends.http import BackendError, uncounted
from bot.backends.kube import CredentialError, KubeAccess, call, kube_access
from bot.backends.scale import aws
from bot.backends.scale.arc import ArcScaler
from bot.checks import Finding, fail, ok, shown_url, warn
from bot.config import ScalerBackend, Settings, SettingsError
from bot.domain.scale.scaling import ScaleTarget
from bot.factory import build_scaler, scale_targets

KUBERNETES, SQS, ASG, SCALING = "kubernetes", "sqs", "aws-asg", "scaling"
GROUP, RESOURCE = "actions.github.com", "autoscalingrunnersets"
VERBS = ("get", "patch")
ROLE_PENDING = "QUEUEPILOT_ROLE_PENDING"
# A Role that lists resourceNames allows no other set, and the chart's names the scale sets of
# its values' SCALER_TARGETS: a target given only elsewhere (the Secret, an edited ConfigMap) is
# refused, whatever the Role grants the others.
RBAC = (
    "bind the bot's service account to a Role in {namespace} allowing get and patch on "
    "autoscalingrunnersets (apiGroups: [actions.github.com]) named {name}: the chart's Role names "
    "the scale sets of its config.SCALER_TARGETS, so add {runner_type} there and `helm upgrade` "
    "so the Role names it"
)
FIX_NAME = "name an existing group in SCALER_TARGETS"
ALLOW = (
    "set SCALE_ALLOWED_USERS to the Slack member IDs (U…) or user-group IDs (S…) who may scale, "
    "comma-separated, e.g. SCALE_ALLOWED_USERS=S0123456789 for the on-call group"
)
CREDENTIALS = (
    "give the bot AWS credentials (the pod's IAM role, or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY) and AWS_REGION"
)


def scaling(settings: Settings) -> list[Finding]:
    """What the scaling settings contradict: a scaler nobody may use, a cap no request can use,
    a pilot's up_to past the ceiling; and an `arc` target that nothing outside the bot bounds."""
    if settings.scaler_backend is ScalerBackend.NONE or not settings.scaler_targets:
        return []
    found = []
    if not settings.scale_allowed_users:
        said = f"SCALER_BACKEND is {settings.scaler_backend.value} but SCALE_ALLOWED_USERS is "
        said += "empty: nobody can scale (every Scale up is refused)"
        found.append(fail(SCALING, said, ALLOW))
    for target in scale_targets(settings).values():
        found += _ceiling(settings, target)
    return found


def _ceiling(settings: Settings, target: ScaleTarget) -> list[Finding]:
    """What a target's ceiling contradicts (its cap, its pilot's up_to), or, with `arc`, that it
    has none."""
    runner_type, ceiling = target.runner_type, target.ceiling
    entry = f'SCALER_TARGETS["{runner_type}"]'
    if ceiling is None:
        if settings.scaler_backend is not ScalerBackend.ARC:
            return []
        # RBAC's patch takes the whole object: the chart's admission policy, holding the token
        # to each set's ceiling, is the one bound outside the bot, and it needs the ceiling.
        said = f"{runner_type}: no ceiling: nothing outside the bot bounds what its token may "
        said += f"set on {target.target} (the chart's admission policy, which holds each scale "
        said += "set to its ceiling, requires one)"
        fix = f'give {entry} a "ceiling", the most runners its scale set should ever have '
        fix += f'(e.g. "ceiling": {max(target.cap, 40)}); the chart renders the same entry '
        return [warn(SCALING, said, fix + "into its admission policy")]
    found = []
    raise_it = f'at most {ceiling}, or raise its "ceiling"'
    if target.cap > ceiling:
        own = settings.scaler_targets[runner_type].cap
        cap = "its cap" if own else f"SCALE_DEFAULT_CAP ({settings.scale_default_cap})"
        said = f"{runner_type}: {cap}, the most one request may add, is {target.cap}, above "
        said += f"its ceiling of {ceiling}: a request for the cap is always refused"
        found.append(fail(SCALING, said, f'set {entry} "cap" to {raise_it}'))
    if target.pilot is not None and target.pilot.up_to > ceiling:
        said = f"{runner_type}: its pilot's up_to, {target.pilot.up_to} runners, is above its "
        said += f"ceiling of {ceiling}: the pilot's acts past the ceiling would be refused"
        found.append(warn(SCALING, said, f'lower {entry} "pilot" "up_to" to {raise_it}'))
    return found


async def probe_arc(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    try:
        access = kube_access(settings.scaler_kubeconfig, environ)
    except SettingsError as exc:
        return [fail(KUBERNETES, "; ".join(exc.problems))]  # each names its fix
    # Set by the chart's upgrade check, which runs before the upgrade applies the Role it makes
    # there: a grant missing in that namespace may be this upgrade's to make.
    pending = environ.get(ROLE_PENDING, "")
    async with access.client(settings.backend_timeout_seconds) as client:
        targets = scale_targets(settings).values()
        found = (_target(client, access, settings, target, pending) for target in targets)
        return list(await asyncio.gather(*found))


async def _target(
    client: AsyncClient, access: KubeAccess, settings: Settings, target: ScaleTarget, pending: str
) -> Finding:
    namespace, _, name = target.target.rpartition("/")
    namespace = namespace or settings.scaler_arc_namespace
    shown = f"{namespace}/{name} ({target.runner_type})"
    timeout_s = settings.backend_timeout_seconds
    try:
        allowed = {}
        for verb in VERBS:
            attributes = ResourceAttributes(
                namespace=namespace, verb=verb, group=GROUP, resource=RESOURCE, name=name
            )
            review = SelfSubjectAccessReview(
                spec=SelfSubjectAccessReviewSpec(resourceAttributes=attributes)
            )
            answer = await call(
                client.create(review), uncounted, timeout_s=timeout_s, server=access.server
            )
            allowed[verb] = answer.status is not None and answer.status.allowed is True
    except BackendError as exc:
        return _refused(exc, access, shown)
    denied = " or ".join(verb for verb, yes in allowed.items() if not yes)
    if denied and pending == namespace:
        said = f"{shown}: may not {denied} {RESOURCE}.{GROUP} yet: the chart's Role in {namespace} "
        said += "is applied by this upgrade"
        return warn(KUBERNETES, said, "`helm test` checks it once the upgrade is done")
    if denied:
        fix = RBAC.format(namespace=namespace, name=name, runner_type=target.runner_type)
        return fail(KUBERNETES, f"{shown}: may not {denied} {RESOURCE}.{GROUP}", fix)
    try:
        capacity = await ArcScaler(settings, access, client).capacity(target)
    except BackendError as exc:
        if exc.status == 404:
            fix = _fix_set(target, settings, f"(kubectl get {RESOURCE} -n {namespace})")
            return fail(KUBERNETES, f"{shown}: no such AutoscalingRunnerSet", fix)
        return _refused(exc, access, shown)
    assert capacity is not None
    bounds = f"minRunners {capacity.minimum}, maxRunners {capacity.maximum or 'unset'}"
    if capacity.maximum is not None and (capacity.minimum or 0) > capacity.maximum:
        fix = f"set minRunners to at most maxRunners (kubectl edit {RESOURCE} -n {namespace} "
        fix += f"{name})"
        return fail(KUBERNETES, f"{shown}: {bounds}: minRunners above maxRunners", fix)
    now = f", {capacity.current} runners now" if capacity.current is not None else ""
    return ok(KUBERNETES, f"{shown}: get and patch allowed; {bounds}{now}")


def _fix_set(target: ScaleTarget, settings: Settings, listed: str) -> str:
    """SCALER_TARGETS where it names the scale set, else RUNNER_SCALE_SETS or the namespace."""
    runner_type = target.runner_type
    if settings.scaler_targets[runner_type].target:
        return f'set SCALER_TARGETS["{runner_type}"] to an existing scale set {listed}'
    return (
        f'give {runner_type}\'s scale set in RUNNER_SCALE_SETS ({{"{runner_type}": "<its '
        f'name>"}}) {listed}, or set SCALER_ARC_NAMESPACE to the namespace it is in'
    )


def _refused(exc: BackendError, access: KubeAccess, shown: str) -> Finding:
    fixes = {
        401: "the credential (the kubeconfig's token or exec plugin's, or the service account's) "
        "is not accepted: renew it",
        None: f"the API server at {shown_url(access.server)} must be reachable from here",
    }
    fix = fixes.get(exc.status, "see the API server's answer")
    if isinstance(exc, CredentialError):
        fix = "run the kubeconfig's exec plugin by hand where queuepilot runs, with its args and "
        fix += "env, to see why it gives no token"
    return fail(KUBERNETES, f"{shown}: {exc}", fix)


async def probe_sqs(settings: Settings) -> list[Finding]:
    url = settings.scaler_sqs_queue_url or ""
    queue, waiting = url.rstrip("/").rpartition("/")[2], "ApproximateNumberOfMessages"
    try:
        sqs = aws.client("sqs", settings, region=aws.queue_region(url))
        answer = await aws.call(
            "SQS", uncounted, sqs.get_queue_attributes, QueueUrl=url, AttributeNames=[waiting]
        )
    except BackendError as exc:
        return [_sqs_refused(queue, str(exc))]
    except Exception as exc:  # botocore refusing to build the client: no region, say
        return [fail(SQS, f"{type(exc).__name__}: {exc}", CREDENTIALS)]
    count = (answer.get("Attributes") or {}).get(waiting, "?")
    return [ok(SQS, f"queue {queue}: readable, {count} messages waiting")]


def _sqs_refused(queue: str, said: str) -> Finding:
    if "AccessDenied" in said:
        fix = "nothing to do if the bot's role has sqs:SendMessage on it (all it needs); "
        fix += "sqs:GetQueueAttributes lets this check see the queue"
        return warn(SQS, f"queue {queue} not read: {said}", fix)
    if any(gone in said for gone in ("NonExistentQueue", "QueueDoesNotExist")):
        fix = "set SCALER_SQS_QUEUE_URL to the scale-up queue's URL (…/<environment>-queued-builds)"
        return fail(SQS, f"queue {queue}: {said}", fix)
    return fail(SQS, said, CREDENTIALS)


async def probe_asg(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    scaler = build_scaler(settings, environ)
    assert isinstance(scaler, aws.AsgScaler)
    targets = list(scale_targets(settings).values())
    return list(await asyncio.gather(*(_group(scaler, target) for target in targets)))


async def _group(scaler: aws.AsgScaler, target: ScaleTarget) -> Finding:
    shown = f"{target.target} ({target.runner_type})"
    try:
        capacity = await scaler.capacity(target)
    except BackendError as exc:
        named = "no Auto Scaling group" in str(exc)
        return fail(ASG, f"{shown}: {exc}", FIX_NAME if named else CREDENTIALS)
    except Exception as exc:  # botocore refusing to build the client: no region, say
        return fail(ASG, f"{shown}: {type(exc).__name__}: {exc}", CREDENTIALS)
    assert capacity is not None
    desired, low, high = capacity.current, capacity.minimum, capacity.maximum
    sizes = f"desired {desired}, min {low}, max {high}"
    if desired is None or low is None or high is None or not low <= desired <= high:
        return fail(ASG, f"{shown}: {sizes}", "set the group's sizes so min ≤ desired ≤ max")
    return ok(ASG, f"{shown}: {sizes}")
