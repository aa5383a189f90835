"""The Helm chart (deploy/helm/queuepilot) rendered as `helm install` renders it, by Helm's own
engine in this process, and the app it deploys: what the deploy tests read."""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import helm_python
import yaml
from helm_python import _native

from bot.app import build_app, build_bot
from bot.config import known_variables as settings_variables
from bot.config import load_settings
from bot.config.loading import file_variables

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "queuepilot"
EXAMPLES = REPO / "deploy" / "helm" / "examples"
DOCS = REPO / "docs" / "kubernetes.md"
# The schemas of the oldest Kubernetes release the chart promises to work on (its kubeVersion).
KUBERNETES_VERSION = "1.30"
# And the releases after it that the chart is checked against.
KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32")
RELEASE = "queuepilot"
# Not `default`: an object that forgot its namespace would land in kubectl's current one.
NAMESPACE = "queuepilot"
# What a cluster of the chart's oldest Kubernetes serves beyond the API versions Helm assumes
# offline (group/version only): `helm install` finds it by discovery, `helm template` is told it
# with --api-versions.
ADMISSION_POLICY_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
# Objects of no namespace: their names carry the release's.
CLUSTER_SCOPED = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
# The Secret an operator made, as docs/kubernetes.md makes it.
SECRET = {"existingSecret": "queuepilot"}
SLACK_SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-0000-example",
    "SLACK_SIGNING_SECRET": "signing-secret-0000",
    "ALERT_WEBHOOK_TOKEN": "webhook-token-0000",
}


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())


# Every value a platform team reaches for beyond the chart's own, at once: the environment from
# another Secret and a ConfigMap, a CA bundle mounted, a priority class, an account of theirs, an
# OpenShift-style security context (the user left to the platform), their own spread, Grafana in
# another namespace, NodeLocal DNSCache, tuned queue rules and the Alertmanager route.
ESCAPE_HATCHES: dict[str, Any] = {
    **SECRET,
    "extraEnv": [
        {"name": "SSL_CERT_FILE", "value": "/etc/ssl/corporate/ca-bundle.crt"},
        {
            "name": "GITHUB_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "ci-github", "key": "token"}},
        },
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ],
    "extraEnvFrom": [{"configMapRef": {"name": "proxy-settings"}}],
    "extraVolumes": [{"name": "corporate-ca", "configMap": {"name": "corporate-ca-bundle"}}],
    "extraVolumeMounts": [
        {"name": "corporate-ca", "mountPath": "/etc/ssl/corporate", "readOnly": True}
    ],
    "priorityClassName": "ci-platform-critical",
    "serviceAccount": {"create": False, "name": "ci-bots"},
    "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "supplementalGroups": [5000]},
    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
    ],
    "networkPolicy": {
        "enabled": True,
        "extraIngress": [
            {
                "from": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "grafana"}
                        }
                    }
                ]
            }
        ],
        "dns": {
            "to": [{"ipBlock": {"cidr": "169.254.20.10/32"}}],
            "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
        },
    },
    "prometheusRule": {"enabled": True, "queueRules": True},
    "queueRules": {
        "thresholds": {"queuedJobs": 30, "queuedFor": "5m", "listenerStalledFor": "4m"},
        "labels": {"priority": "P1", "team": "ci-platform"},
    },
    "alertmanagerConfig": {"enabled": True, "labels": {"alertmanagerConfig": "main"}},
}

# Each way an operator installs the chart: its values and the release's namespace.
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "defaults": (SECRET, NAMESPACE),
    "socket-mode": ({**SECRET, "socketMode": {"enabled": True}}, NAMESPACE),
    "secrets-in-values": ({"secrets": SLACK_SECRETS}, NAMESPACE),
    "secret-files": ({**SECRET, "secretFiles": True}, NAMESPACE),
    "socket-mode-secret-files": (
        {**SECRET, "secretFiles": True, "socketMode": {"enabled": True}},
        NAMESPACE,
    ),
    "external-secret": (
        {"externalSecret": {"enabled": True, "secretStoreRef": {"name": "vault"}}},
        NAMESPACE,
    ),
    "monitoring": (
        {
            **SECRET,
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True, "queueRules": True},
            "grafanaDashboard": {"enabled": True},
        },
        NAMESPACE,
    ),
    "network-policy": ({**SECRET, "networkPolicy": {"enabled": True}}, NAMESPACE),
    "arc-elsewhere": ({**SECRET, "arc": {"namespace": "arc-runners"}}, NAMESPACE),
    "no-pdb": ({**SECRET, "podDisruptionBudget": {"enabled": False}}, NAMESPACE),
    "no-scaler": ({**SECRET, "config": {"SCALER_BACKEND": "none"}}, NAMESPACE),
    # The recorded scale set (tests/fixtures/backends/arc) as a target, with its ceiling.
    "admission-policy": (
        {
            **SECRET,
            "arc": {"namespace": "arc-runners"},
            "config": {
                "SCALER_TARGETS": json.dumps(
                    {"linux.8xlarge": {"target": "mt-l-x86iavx512-8-64", "cap": 10, "ceiling": 150}}
                )
            },
        },
        NAMESPACE,
    ),
    "ci-bots": (example("ci-bots.yaml"), "ci-bots"),
    "locked-down": (example("locked-down.yaml"), NAMESPACE),
    "escape-hatches": (ESCAPE_HATCHES, NAMESPACE),
}
# The cases whose secrets are files of the mounted Secret, and the mode each runs in.
SECRET_FILES = {
    "secret-files": "http",
    "socket-mode-secret-files": "socket",
    "ci-bots": "http",
    "locked-down": "socket",
}
SOCKET_MODE = {"socket-mode", "socket-mode-secret-files", "locked-down"}
# The cases whose security contexts are not the chart's own.
OWN_SECURITY_CONTEXTS = {"escape-hatches"}
SECRET_EXAMPLES = {
    "http": EXAMPLES / "secret.env.example",
    "socket": EXAMPLES / "secret-socket-mode.env.example",
}


@functools.cache
def chart() -> helm_python.Chart:
    """Loaded once per test process: Helm's loader reads every file, .helmignore applied."""
    return helm_python.Chart.load(CHART)


@functools.cache
def _rendered(
    values: str, namespace: str, api_versions: tuple[str, ...]
) -> tuple[dict[str, Any], ...]:
    if api_versions:
        # helm_python 0.2's Chart.render passes no API versions on; the C ABI under it takes
        # them as `helm template --api-versions` does.
        options = {"name": RELEASE, "namespace": namespace, "api_versions": list(api_versions)}
        text = _native.call_string("helm_render", chart()._raw(), values, json.dumps(options))
        manifests = json.loads(text)
    else:
        manifests = chart().render(json.loads(values), name=RELEASE, namespace=namespace)
    return tuple(
        doc
        for path, text in sorted(manifests.items())
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    )


def render_values(
    values: dict[str, Any], namespace: str = NAMESPACE, api_versions: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The objects `helm template -n <namespace>` would print (a fresh copy each call), with
    `api_versions` as --api-versions; a value the schema or a template refuses raises
    helm_python.HelmError."""
    text = json.dumps(values, sort_keys=True)
    return copy.deepcopy(list(_rendered(text, namespace, api_versions)))


def render(case: str) -> list[dict[str, Any]]:
    values, namespace = CASES[case]
    return render_values(values, namespace)


def namespace_of(case: str) -> str:
    return CASES[case][1]


def lint(
    values: dict[str, Any], namespace: str = NAMESPACE, version: str = KUBERNETES_VERSION
) -> list[str]:
    """`helm lint --strict` against a Kubernetes release (1.30 unless said): its warnings and
    errors (info aside)."""
    report = helm_python.lint(
        CHART, values, strict=True, namespace=namespace, kube_version=f"v{version}.0"
    )
    found = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return found + list(report["errors"])


def extra_env(case: str) -> set[str]:
    """The variables the operator adds with extraEnv: theirs, not the chart's."""
    return {entry["name"] for entry in CASES[case][0].get("extraEnv", [])}


def chart_env(objects: list[dict[str, Any]], case: str) -> list[dict[str, Any]]:
    """The container's variables the chart sets itself."""
    extra = extra_env(case)
    return [e for e in container(objects).get("env", []) if e["name"] not in extra]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} objects of kind {kind}"
    return found[0]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objects)


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "Deployment")["spec"]["template"]["spec"]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = pod_spec(objects)["containers"]
    assert len(containers) == 1
    return containers[0]


def settings_config_map(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The ConfigMap the pods read their settings from (not the dashboard's)."""
    made = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    sources = [
        s["configMapRef"]["name"] for s in container(objects)["envFrom"] if "configMapRef" in s
    ]
    (name,) = [name for name in sources if name in made]  # not an extraEnvFrom of the operator's
    return made[name]


def config(objects: list[dict[str, Any]]) -> dict[str, str]:
    return dict(settings_config_map(objects).get("data") or {})


def known_variables() -> set[str]:
    """Every environment variable queuepilot reads: the settings, and the secrets' <NAME>_FILE."""
    return set(settings_variables()) | file_variables()


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
