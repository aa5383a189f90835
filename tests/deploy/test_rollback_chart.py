"""Going back to 0.27 with its chart, as docs/upgrading.md says: 0.27.0's chart (from git), by
Helm's own engine, refuses a values file written for this release's chart, and renders it once
the keys 0.27 does not know are gone; and 0.27 publishes no GitHub webhook."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.deploy.manifests import NAMESPACE, RELEASE, REPO, SECRET, render_values

PREVIOUS_RELEASE = "c5af55f"  # 0.27.0
CHART = "deploy/helm/queuepilot"
# A values file written for this release: GitHub's webhook on its own Ingress, its limits, and
# the ceiling the admission policy holds.
OURS: dict[str, Any] = {
    **SECRET,
    "config": {"SCALER_TARGETS": '{"linux.2xlarge": {"cap": 10, "ceiling": 40}}'},
    "rbac": {"admissionPolicy": True},
    "ingress": {"githubWebhook": {"enabled": True, "annotations": {"allow": "github"}}},
    "webhooks": {"github": {"rate": 100, "concurrency": 16}},
}


@pytest.fixture(scope="module")
def previous_chart(tmp_path_factory: pytest.TempPathFactory) -> helm_python.Chart:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the previous release's chart comes from git")
    known = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"],
        capture_output=True,
    )
    if known.returncode != 0:
        pytest.skip(f"commit {PREVIOUS_RELEASE} is not in this clone (shallow?)")
    into = Path(tmp_path_factory.mktemp("chart-0.27"))
    archive = subprocess.run(
        [git, "-C", str(REPO), "archive", "--format=tar", PREVIOUS_RELEASE, CHART],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return helm_python.Chart.load(into / CHART)


def paths(rendered: dict[str, str]) -> list[str]:
    """The paths every Ingress the chart rendered publishes."""
    found = []
    for path, text in rendered.items():
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc and doc["kind"] == "Ingress":
                for rule in doc["spec"]["rules"]:
                    found += [p["path"] for p in rule["http"]["paths"]]
    return sorted(found)


def test_this_releases_values_render_here() -> None:
    assert render_values(OURS)


@pytest.mark.parametrize("key", [("ingress", "githubWebhook"), ("webhooks",)])
def test_the_previous_chart_refuses_the_keys_it_does_not_know(
    previous_chart: helm_python.Chart, key: tuple[str, ...]
) -> None:
    values = copy.deepcopy(OURS)
    if key == ("ingress", "githubWebhook"):
        del values["webhooks"]
    else:
        del values["ingress"]
    with pytest.raises(helm_python.HelmError) as refused:
        previous_chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert "schema" in str(refused.value) and f"'{key[-1]}'" in str(refused.value)


def test_without_them_it_renders_and_publishes_no_github_webhook(
    previous_chart: helm_python.Chart,
) -> None:
    values = copy.deepcopy(OURS)
    del values["webhooks"], values["ingress"]
    rendered = previous_chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert paths(rendered) == ["/slack/events"]
