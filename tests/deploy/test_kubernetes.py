"""The Kubernetes manifests: every variant renders with `kubectl kustomize`, every object is valid
against Kubernetes' published schemas, and what the manifests say agrees with the code they run
(routes, port, settings, the API calls the `arc` scaler makes)."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import kubernetes_validate
import pytest
import yaml
from lightkube import KubeConfig

from bot import leader
from bot.backends.kube import KubeAccess
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings, read_settings
from bot.domain.scaling import ScaleTarget
from tests.deploy.manifests import (
    DOCS,
    KUBERNETES,
    KUBERNETES_VERSION,
    REPO,
    SECRET_EXAMPLES,
    SECRET_FILES,
    VARIANTS,
    config,
    container,
    env_file_keys,
    known_variables,
    one,
    pod_spec,
    pod_template_labels,
    render,
    selects,
    served_routes,
)

BASE_KINDS = {
    "ConfigMap",
    "Deployment",
    "Ingress",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
}
KINDS = {
    "base": BASE_KINDS,
    "socket-mode": BASE_KINDS - {"Ingress"},
    "servicemonitor": BASE_KINDS | {"ServiceMonitor"},
    "secret-files": BASE_KINDS,
    "socket-mode-secret-files": BASE_KINDS - {"Ingress"},
    "external-secret": BASE_KINDS | {"ExternalSecret"},
    "network-policy": BASE_KINDS | {"NetworkPolicy"},
    "overlay": BASE_KINDS | {"ServiceMonitor", "ExternalSecret", "NetworkPolicy"},
}
# Custom resources, which Kubernetes' published schemas do not hold: each checked against the
# fields of its CRD that the manifests use, below.
CUSTOM_KINDS = {"ServiceMonitor", "ExternalSecret"}
# Where each variant puts the bot: the namespace its kustomization sets, once.
NAMESPACES = {"overlay": "ci-bots"}
ARC_FIXTURE = REPO / "tests" / "fixtures" / "backends" / "arc" / "autoscalingrunnerset.json"


# --- every variant renders, and is valid -------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_object_is_valid_against_the_kubernetes_schemas(variant: str) -> None:
    objects = render(variant)
    assert {o["kind"] for o in objects} == KINDS[variant]
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(part) for part in exc.path)
            pytest.fail(f"{variant}: {name} is invalid at {path}: {exc.message}")


# The fields of Prometheus Operator's ServiceMonitor CRD (monitoring.coreos.com/v1) that this
# component uses, with the CRD's own constraints on them.
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "properties": {"matchLabels": {"type": "object"}},
                    "required": ["matchLabels"],
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port", "path"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": {
                                "type": "string",
                                "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                                r"(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_the_service_monitor_scrapes_the_bots_metrics_on_its_service() -> None:
    objects = render("servicemonitor")
    monitor, service = one(objects, "ServiceMonitor"), one(objects, "Service")
    jsonschema.validate(monitor, SERVICE_MONITOR)
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    ports = {port["name"] for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in ports
        assert endpoint["path"] in served_routes(socket_mode=False)["GET"]


# --- where each object lives, and what the Role allows -----------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_role_stays_in_the_runners_namespace_and_the_rest_in_queuepilots(
    variant: str,
) -> None:
    """Each set once: the bot's by the kustomization's `namespace:`, ARC's by SCALER_ARC_NAMESPACE
    (the namespace the bot addresses the scale sets in)."""
    objects = render(variant)
    bots = NAMESPACES.get(variant, "queuepilot")
    runners = config(objects)["SCALER_ARC_NAMESPACE"]
    assert runners == ("ci-runners" if variant == "overlay" else "arc-runners")
    for obj in objects:
        expected = runners if obj["kind"] in ("Role", "RoleBinding") else bots
        assert obj["metadata"].get("namespace") == expected, obj["kind"]
    account = one(objects, "ServiceAccount")["metadata"]
    assert one(objects, "RoleBinding")["subjects"][0]["namespace"] == account["namespace"]


def test_no_object_writes_its_namespace() -> None:
    """Kustomize sets them: an object that named its own would stay behind in an overlay."""
    for path in sorted(KUBERNETES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and "metadata" in doc and doc.get("apiVersion") != "builtin":
                assert "namespace" not in doc["metadata"], path.relative_to(REPO)


def test_the_role_grants_get_and_patch_on_scale_sets_to_the_bots_service_account() -> None:
    objects = render("base")
    role, binding = one(objects, "Role"), one(objects, "RoleBinding")
    assert role["rules"] == [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["autoscalingrunnersets"],
            "verbs": ["get", "patch"],
        }
    ]
    assert role["metadata"]["namespace"] == config(objects).get(
        "SCALER_ARC_NAMESPACE", Settings.model_fields["scaler_arc_namespace"].default
    )
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    account = one(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert pod_spec(objects)["serviceAccountName"] == account["name"]


async def test_the_role_allows_exactly_what_the_arc_scaler_calls() -> None:
    """Every operation of the scaler against a recording API: each call's verb and resource."""
    runner_set = json.loads(ARC_FIXTURE.read_text())
    runner_set["spec"]["maxRunners"] = 200  # room to scale up: the recorded set is at its 120
    calls: list[tuple[str, str]] = []
    conflicts = iter([False, True])  # the put-back's first patch meets a controller's write

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        calls.append((request.method, path))
        if request.method == "PATCH":
            if next(conflicts, False):
                return httpx.Response(409, json={"kind": "Status", "code": 409})
            runner_set["spec"].update(json.loads(request.content)["spec"])
            version = int(runner_set["metadata"]["resourceVersion"]) + 1
            runner_set["metadata"]["resourceVersion"] = str(version)
        return httpx.Response(200, json=runner_set)

    access = KubeAccess(KubeConfig.from_server("https://kube").get())
    client = access.client(10, transport=httpx.MockTransport(answer))
    arc = ArcScaler(Settings(scaler_arc_namespace="arc-runners"), access, client=client)
    target = ScaleTarget("linux", runner_set["metadata"]["name"], cap=10)
    await arc.capacity(target)
    await arc.failures(target)
    result = await arc.scale(ScaleRequest(target, 2, "1", "al"))
    assert result.undo is not None
    await arc.revert(target, result.undo)
    await client.close()

    verbs = {"GET": "get", "PATCH": "patch"}
    role = one(render("base"), "Role")
    rule = role["rules"][0]
    namespace = role["metadata"]["namespace"]
    object_path = re.compile(
        rf"/apis/(?P<group>[^/]+)/v1alpha1/namespaces/{namespace}/(?P<resource>[^/]+)/[^/]+"
    )
    used = set()
    for method, path in calls:
        match = object_path.fullmatch(path)
        assert match, f"{method} {path}: not a named object in {namespace}"
        assert match["group"] in rule["apiGroups"]
        assert match["resource"] in rule["resources"]
        used.add(verbs[method])
    assert used == set(rule["verbs"])


# --- the pod: what it runs, how it is probed, what it may do -----------------------------------


def test_the_probes_are_routes_the_app_serves_on_the_container_port() -> None:
    objects = render("base")
    served = served_routes(socket_mode=False)["GET"]
    main = container(objects)
    probes = {kind: main[kind] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {port["name"]: port["containerPort"] for port in main["ports"]}
    for probe in probes.values():
        assert probe["httpGet"]["path"] in served
        assert probe["httpGet"]["port"] in ports


def test_the_container_port_is_the_one_the_app_listens_on() -> None:
    objects = render("base")
    listens = int(config(objects).get("PORT", Settings.model_fields["port"].default))
    assert listens == 3000
    ports = {port["name"]: port["containerPort"] for port in container(objects)["ports"]}
    assert ports == {"http": listens}
    service = one(objects, "Service")
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(80, "http")]
    assert selects(service["spec"]["selector"], pod_template_labels(objects))


def test_the_pod_runs_as_the_images_user_on_a_read_only_root() -> None:
    objects = render("base")
    pod, main = pod_spec(objects), container(objects)
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert main["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # /tmp, an emptyDir, is the one writable path.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert [(m["mountPath"], m["name"]) for m in main["volumeMounts"]] == [("/tmp", "tmp")]
    assert "emptyDir" in volumes["tmp"]


def test_the_pod_matches_the_image() -> None:
    """The user the pod runs as is the image's, and what the image writes is under /tmp."""
    dockerfile = (REPO / "Dockerfile").read_text()
    user = re.findall(r"^USER\s+(\d+):(\d+)\s*$", dockerfile, re.M)
    pod = pod_spec(render("base"))["securityContext"]
    assert user == [(str(pod["runAsUser"]), str(pod["runAsGroup"]))]
    written = re.findall(r"MPLCONFIGDIR=(\S+)", dockerfile)
    assert written and all(path.startswith("/tmp/") for path in written)
    exposed = re.findall(r"^EXPOSE\s+(\d+)\s*$", dockerfile, re.M)
    assert exposed == [str(container(render("base"))["ports"][0]["containerPort"])]


def test_the_service_account_token_is_mounted_only_for_the_arc_scaler() -> None:
    objects = render("base")
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is False
    uses_arc = config(objects).get("SCALER_BACKEND") == "arc"
    assert pod_spec(objects)["automountServiceAccountToken"] is uses_arc


def test_two_replicas_on_two_nodes_one_disrupted_at_a_time() -> None:
    objects = render("base")
    deployment, budget = one(objects, "Deployment"), one(objects, "PodDisruptionBudget")
    labels = pod_template_labels(objects)
    assert deployment["spec"]["replicas"] == 2
    assert selects(deployment["spec"]["selector"]["matchLabels"], labels)
    assert selects(budget["spec"]["selector"]["matchLabels"], labels)
    assert budget["spec"].get("maxUnavailable") == 1 or budget["spec"].get("minAvailable") == 1
    spread = [
        c
        for c in pod_spec(objects)["topologySpreadConstraints"]
        if c["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert len(spread) == 1
    assert spread[0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread[0]["maxSkew"] == 1
    assert selects(spread[0]["labelSelector"]["matchLabels"], labels)


def test_termination_grace_covers_the_pause_the_drain_and_the_stop() -> None:
    """Kubernetes counts the preStop pause in the grace; SIGKILL must not come before the
    requests in flight are answered and the work is stopped in order."""
    objects = render("base")
    pause = container(objects)["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    drain = float(
        config(objects).get("SHUTDOWN_GRACE_SECONDS")
        or Settings.model_fields["shutdown_grace_seconds"].default
    )
    stop = leader.STOP_WORK_S + 5  # the lifespan's wait for the leader's work (bot/app.py)
    assert pod_spec(objects)["terminationGracePeriodSeconds"] > float(pause[1]) + drain + stop


def test_resources_are_set_with_a_memory_limit_and_no_cpu_limit() -> None:
    resources = container(render("base"))["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"memory"}


# --- settings: the ConfigMap, the Secret, and what the pod reads ------------------------------


@pytest.mark.parametrize("variant", sorted(set(VARIANTS) - set(SECRET_FILES)))
def test_settings_come_from_the_config_map_then_the_secret(variant: str) -> None:
    objects = render(variant)
    main = container(objects)
    assert "env" not in main
    assert main["envFrom"] == [
        {"configMapRef": {"name": one(objects, "ConfigMap")["metadata"]["name"]}},
        {"secretRef": {"name": "queuepilot"}},  # last: a key in both takes the Secret's value
    ]
    assert one(objects, "ConfigMap")["metadata"]["name"].startswith("queuepilot-config-")


def test_every_variable_the_manifests_set_is_a_setting() -> None:
    known = known_variables()
    assert set(config(render("base"))) <= known
    for variant in VARIANTS:
        assert {e["name"] for e in container(render(variant)).get("env", [])} <= known
    for variant, example in SECRET_EXAMPLES.items():
        keys = env_file_keys(example)
        assert keys, example
        assert set(keys) <= known, f"{variant}: {set(keys) - known}"


def test_config_env_values_are_written_as_kubernetes_takes_them() -> None:
    """Kustomize keeps quotes and `export` in an env file's values: they would reach the bot."""
    lines = (KUBERNETES / "base" / "config.env").read_text().splitlines()
    settings = [line for line in lines if line.strip() and not line.startswith("#")]
    for line in settings:
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", key), line
        assert value == value.strip() and not value.startswith(("'", '"')), line


@pytest.mark.parametrize(
    ("variant", "secret"),
    [
        ("base", {"SLACK_BOT_TOKEN": "xoxb-0000-example", "SLACK_SIGNING_SECRET": "example"}),
        ("socket-mode", {"SLACK_BOT_TOKEN": "xoxb-0000-example", "SLACK_APP_TOKEN": "xapp-1-x"}),
    ],
)
def test_the_example_settings_with_their_secret_are_settings_serve_takes(
    variant: str, secret: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in known_variables():
        monkeypatch.delenv(name, raising=False)
    required = set(env_file_keys(SECRET_EXAMPLES[variant], commented=False))
    values = {**config(render(variant)), **secret, "ALERT_WEBHOOK_TOKEN": "example"}
    assert required == set(secret) | {"ALERT_WEBHOOK_TOKEN"}
    settings = read_settings(_env_file=None, **{k.lower(): v for k, v in values.items()})
    assert settings.socket_mode is (variant == "socket-mode")


# --- what reaches the outside ----------------------------------------------------------------


def test_the_ingress_publishes_only_slacks_request_url() -> None:
    objects = render("base")
    ingress = one(objects, "Ingress")["spec"]
    assert "defaultBackend" not in ingress
    paths = [path for rule in ingress["rules"] for path in rule["http"]["paths"]]
    assert paths == [
        {
            "path": "/slack/events",
            "pathType": "Exact",
            "backend": {"service": {"name": "queuepilot", "port": {"name": "http"}}},
        }
    ]
    assert "/slack/events" in served_routes(socket_mode=False)["POST"]


def test_socket_mode_publishes_nothing_and_keeps_the_service_for_alerts() -> None:
    objects = render("socket-mode")
    assert not [o for o in objects if o["kind"] == "Ingress"]
    assert one(objects, "Service")["spec"]["type"] == "ClusterIP"
    routes = served_routes(socket_mode=True)
    assert "/slack/events" not in routes.get("POST", set())
    assert {"/alerts/grafana", "/alerts/alertmanager"} <= routes["POST"]


def test_the_docs_create_the_secret_the_pods_read() -> None:
    text = DOCS.read_text()
    assert "kubectl -n queuepilot create secret generic queuepilot --from-env-file=" in text
    known = known_variables()
    named = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
    assert named - known == set(), "docs/kubernetes.md names variables that are no settings"
