"""The Kubernetes API server of the sandbox (`sandbox.kube_api`), with the recorded set to serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandbox.kube_api import KubeApi

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "backends" / "arc"


class FakeKubeApi(KubeApi):
    def add_from_fixture(self, **spec: Any) -> dict[str, Any]:
        """The AutoscalingRunnerSet recorded from a real cluster, with `spec` changed."""
        runner_set = json.loads((FIXTURE / "autoscalingrunnerset.json").read_text())
        runner_set["spec"].update(spec)
        return self.add(runner_set)
