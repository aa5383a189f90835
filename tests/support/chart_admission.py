"""The chart's own admission policy as the Kubernetes stand-in's `admission` hook: the chart
rendered for the test's SCALER_TARGETS, its ValidatingAdmissionPolicy and binding judged in CEL
(`tests.support.admission`), so that a test of the bot meets the policy a cluster would run, not
a copy of it that could drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from tests.deploy.manifests import SECRET, one, render_values
from tests.support.admission import refusal

# Installed here, the chart's policy matches the stand-in's default `user`, the ServiceAccount
# system:serviceaccount:queuepilot:queuepilot.
NAMESPACE = "queuepilot"

Admission = Callable[[dict[str, Any]], str | None]


def chart_policy(targets: dict[str, Any], arc_namespace: str = "arc-runners") -> Admission:
    """The policy `helm install -n queuepilot` makes for these SCALER_TARGETS (with the `arc`
    scaler and ARC in `arc_namespace`), as a hook: the API server's denial, or None."""
    values = {
        **SECRET,
        "arc": {"namespace": arc_namespace},
        "config": {"SCALER_BACKEND": "arc", "SCALER_TARGETS": json.dumps(targets)},
    }
    objects = render_values(values, NAMESPACE)
    policy = one(objects, "ValidatingAdmissionPolicy")
    binding = one(objects, "ValidatingAdmissionPolicyBinding")
    return partial(refusal, policy, binding)
