"""The Kubernetes manifests as `kubectl apply -k` sends them, and the app they deploy: what the
tests of `deploy/kubernetes` read."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.app import build_app, build_bot
from bot.config import known_variables as settings_variables
from bot.config import load_settings
from bot.config.secret_files import file_variables

REPO = Path(__file__).resolve().parents[2]
KUBERNETES = REPO / "deploy" / "kubernetes"
VARIANTS = {
    "base": KUBERNETES / "base",
    "socket-mode": KUBERNETES / "socket-mode",
    # The base or Socket Mode with components, as an operator's overlay adds them.
    "servicemonitor": Path(__file__).parent / "servicemonitor",
    "secret-files": Path(__file__).parent / "secret-files",
    "socket-mode-secret-files": Path(__file__).parent / "socket-mode-secret-files",
    "external-secret": Path(__file__).parent / "external-secret",
    "network-policy": Path(__file__).parent / "network-policy",
    # An operator's own overlay: its namespace and ARC's, and every component.
    "overlay": Path(__file__).parent / "overlay",
}
# The variants whose secrets are files of the mounted Secret, and what they are otherwise like.
SECRET_FILES = {
    "secret-files": "base",
    "socket-mode-secret-files": "socket-mode",
    "overlay": "base",
}
SECRET_EXAMPLES = {
    "base": KUBERNETES / "base" / "secret.env.example",
    "socket-mode": KUBERNETES / "socket-mode" / "secret.env.example",
}
DOCS = REPO / "docs" / "kubernetes.md"
# The schemas of the oldest Kubernetes release the manifests promise to work on.
KUBERNETES_VERSION = "1.30"


def known_variables() -> set[str]:
    """Every environment variable queuepilot reads: the settings, and the secrets' <NAME>_FILE."""
    return set(settings_variables()) | file_variables()


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is not installed: the manifests are rendered with `kubectl kustomize` "
            "(Kustomize v5, as kubectl 1.27 and later embed it)"
        )
    return path


@functools.cache
def _rendered(variant: str) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(VARIANTS[variant])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {variant}: {result.stderr}"
    return result.stdout


def render(variant: str) -> list[dict[str, Any]]:
    """The variant's objects as `kubectl apply -k` would send them (a fresh copy each call)."""
    return [doc for doc in yaml.safe_load_all(_rendered(variant)) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} objects of kind {kind}"
    return found[0]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "Deployment")["spec"]["template"]["spec"]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = pod_spec(objects)["containers"]
    assert len(containers) == 1
    return containers[0]


def config(objects: list[dict[str, Any]]) -> dict[str, str]:
    return dict(one(objects, "ConfigMap").get("data") or {})


def env_file_keys(path: Path, *, commented: bool = True) -> list[str]:
    """The keys an env file sets (and, with `commented`, those it offers as `# KEY=`)."""
    text = path.read_text()
    keys = re.findall(r"^([A-Z][A-Z0-9_]*)=", text, re.M)
    if commented:
        keys += re.findall(r"^#\s?([A-Z][A-Z0-9_]*)=", text, re.M)
    return keys


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_template_labels(objects: list[dict[str, Any]]) -> dict[str, str]:
    return one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]


@functools.cache
def served_routes(*, socket_mode: bool) -> dict[str, set[str]]:
    """The paths the app serves, by method, as `queuepilot serve` builds it."""
    settings = load_settings(
        _env_file=None,
        slack_bot_token="xoxb-0000-manifests",
        slack_signing_secret=None if socket_mode else "manifests",
        slack_app_token="xapp-1-manifests" if socket_mode else None,
        slack_channel="C0123456789",
        redis_url="redis://127.0.0.1:1/0",
        alert_webhook_token="manifests",
    )
    app = build_app(build_bot(settings))
    routes: dict[str, set[str]] = {}
    for route in app.app.routes:  # type: ignore[attr-defined]
        for method in route.methods or ():
            routes.setdefault(method, set()).add(route.path)
    return routes
