"""Kubernetes (SCALER_BACKEND=arc): for each scale target, whether the bot's identity may `get`
and `patch` its AutoscalingRunnerSet (a SelfSubjectAccessReview, which the API server answers for
the caller without touching the object), and the set itself, read as the scaler reads it: it
exists, and its minRunners is not above its maxRunners.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import json_object, request
from bot.backends.kube import KubeAccess
from bot.backends.scale.arc import ArcScaler
from bot.checks import Finding, fail, ok, shown_url
from bot.config import Settings, SettingsError
from bot.domain.scaling import ScaleTarget
from bot.factory import kube_access, scale_targets

SUBJECT = "kubernetes"
SERVICE = "The Kubernetes API"
REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
GROUP, RESOURCE = "actions.github.com", "autoscalingrunnersets"
VERBS = ("get", "patch")
NO_ACCESS = (
    "set SCALER_KUBECONFIG to a kubeconfig file, or run in the cluster with a service account"
)
RBAC = (
    "bind the bot's service account to a Role in {namespace} allowing get and patch on "
    "autoscalingrunnersets (apiGroups: [actions.github.com])"
)


async def probe(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    try:
        access = kube_access(settings, environ)
    except SettingsError as exc:
        return [fail(SUBJECT, "; ".join(exc.problems), NO_ACCESS)]
    client = access.client(settings.backend_timeout_seconds)
    scaler, namespace = ArcScaler(settings, access, client), settings.scaler_arc_namespace
    try:
        targets = scale_targets(settings).values()
        found = (_target(client, access, scaler, target, namespace) for target in targets)
        return list(await asyncio.gather(*found))
    finally:
        await client.aclose()


async def _target(
    client: httpx.AsyncClient, access: KubeAccess, scaler: ArcScaler, target: ScaleTarget, ns: str
) -> Finding:
    namespace, _, name = target.target.rpartition("/")
    namespace = namespace or ns
    shown = f"{namespace}/{name} ({target.runner_type})"
    try:
        allowed = {verb: await _allowed(client, access, namespace, name, verb) for verb in VERBS}
    except BackendError as exc:
        return _refused(exc, access, shown)
    denied = [verb for verb, yes in allowed.items() if not yes]
    if denied:
        return fail(
            SUBJECT,
            f"{shown}: may not {' or '.join(denied)} {RESOURCE}.{GROUP}",
            RBAC.format(namespace=namespace),
        )
    try:
        capacity = await scaler.capacity(target)
    except BackendError as exc:
        if exc.status == 404:
            return fail(
                SUBJECT,
                f"{shown}: no such AutoscalingRunnerSet",
                f"name an existing scale set in SCALER_TARGETS (kubectl get {RESOURCE} -n "
                f"{namespace})",
            )
        return _refused(exc, access, shown)
    assert capacity is not None
    bounds = f"minRunners {capacity.minimum}, maxRunners {capacity.maximum or 'unset'}"
    if capacity.maximum is not None and (capacity.minimum or 0) > capacity.maximum:
        return fail(
            SUBJECT,
            f"{shown}: {bounds}: minRunners above maxRunners",
            f"set minRunners to at most maxRunners (kubectl edit {RESOURCE} -n {namespace} {name})",
        )
    now = f", {capacity.current} runners now" if capacity.current is not None else ""
    return ok(SUBJECT, f"{shown}: get and patch allowed; {bounds}{now}")


async def _allowed(
    client: httpx.AsyncClient, access: KubeAccess, namespace: str, name: str, verb: str
) -> bool:
    attributes = {"namespace": namespace, "verb": verb, "group": GROUP, "resource": RESOURCE}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {**attributes, "name": name}},
    }
    response = await request(
        client,
        SERVICE,
        "POST",
        REVIEWS,
        json_body=review,
        headers=access.headers(),
        expect=(200, 201),
    )
    status = json_object(response, SERVICE).get("status")
    return isinstance(status, dict) and status.get("allowed") is True


def _refused(exc: BackendError, access: KubeAccess, shown: str) -> Finding:
    if exc.status == 401:
        fix = "the kubeconfig's (or service account's) token is not accepted: renew it"
    elif exc.status is None:
        fix = f"the API server at {shown_url(access.server)} must be reachable from here"
    else:
        fix = "see the API server's answer"
    return fail(SUBJECT, f"{shown}: {exc}", fix)
