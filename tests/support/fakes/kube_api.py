"""The Kubernetes API server of the sandbox (`sandbox.kube_api`), with the recorded set to serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandbox.kube_api import KubeApi

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "backends" / "arc"
RECORDED = "mt-l-x86iavx512-8-64"  # the recorded scale set's name


class FakeKubeApi(KubeApi):
    def add_from_fixture(self, name: str = RECORDED, **spec: Any) -> dict[str, Any]:
        """The AutoscalingRunnerSet recorded from a real cluster, with `spec` changed; `name`:
        as a release of that name would make it (every name derived from the scale set's)."""
        text = (FIXTURE / "autoscalingrunnerset.json").read_text()
        runner_set = json.loads(text.replace(f'"{RECORDED}', f'"{name}'))
        runner_set["spec"].update(spec)
        return self.add(runner_set)

    def reacted(self, name: str = RECORDED, times: int = 1, namespace: str = "arc-runners") -> bool:
        """ARC's controller took the spec on `times` times: the listener created again that
        often, and the set Running."""
        key = (namespace, name)
        running = self.sets[key]["status"].get("phase") == "Running"
        return running and self.arc.listeners.get(key) == times
