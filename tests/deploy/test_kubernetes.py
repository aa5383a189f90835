"""What the chart deploys agrees with the code it runs: the port the app listens on, the routes it
serves (probes, Slack's request URL, the alert webhooks), the image's user, the settings it knows,
the API calls the `arc` scaler makes, and the leader's stop."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import helm_python
import httpx
import pytest
from lightkube import KubeConfig

from bot import leader
from bot.backends.kube import KubeAccess
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.checks import Verdict
from bot.checks.scaler import probe_arc, scaling
from bot.config import Settings, load_settings, read_settings
from bot.factory import scale_targets
from tests.deploy.manifests import (
    CASES,
    DOCS,
    NAMESPACE,
    OWN_SECURITY_CONTEXTS,
    RELEASE,
    REPO,
    SECRET,
    SECRET_EXAMPLES,
    SECRET_FILES,
    SLACK_SECRETS,
    SOCKET_MODE,
    chart,
    chart_env,
    config,
    container,
    env_file_keys,
    known_variables,
    one,
    pod_spec,
    pod_template_labels,
    render,
    render_values,
    selects,
    served_routes,
)
from tests.support.fakes.kube_api import FakeKubeApi

ARC_FIXTURE = REPO / "tests" / "fixtures" / "backends" / "arc" / "autoscalingrunnerset.json"

# --- the pod: what it runs, how it is probed, what it may do -----------------------------------


def test_the_probes_are_routes_the_app_serves_on_the_container_port() -> None:
    objects = render("defaults")
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
    objects = render("defaults")
    listens = int(config(objects).get("PORT", Settings.model_fields["port"].default))
    assert listens == 3000
    ports = {port["name"]: port["containerPort"] for port in container(objects)["ports"]}
    assert ports == {"http": listens}
    service = one(objects, "Service")
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(80, "http")]
    assert selects(service["spec"]["selector"], pod_template_labels(objects))


def test_a_port_set_in_the_settings_is_the_one_the_pod_exposes() -> None:
    objects = render_values({**SECRET, "config": {"PORT": "8080"}})
    assert container(objects)["ports"][0]["containerPort"] == 8080
    assert config(objects)["PORT"] == "8080"


def test_the_pod_runs_as_the_images_user_on_a_read_only_root() -> None:
    """The `restricted` Pod Security Standard, in every case."""
    for case in set(CASES) - OWN_SECURITY_CONTEXTS:
        objects = render(case)
        pod, main = pod_spec(objects), container(objects)
        group = {"fsGroup": 10001} if case in SECRET_FILES else {}
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            **group,
            "seccompProfile": {"type": "RuntimeDefault"},
        }, case
        assert main["securityContext"] == {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, case
        # /tmp, an emptyDir, is the one writable path.
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        writable = [m for m in main["volumeMounts"] if not m.get("readOnly")]
        assert [(m["mountPath"], m["name"]) for m in writable] == [("/tmp", "tmp")], case
        assert "emptyDir" in volumes["tmp"]


def test_the_pod_matches_the_image() -> None:
    """The user the pod runs as is the image's, and what the image writes is under /tmp."""
    dockerfile = (REPO / "Dockerfile").read_text()
    user = re.findall(r"^USER\s+(\d+):(\d+)\s*$", dockerfile, re.M)
    pod = pod_spec(render("defaults"))["securityContext"]
    assert user == [(str(pod["runAsUser"]), str(pod["runAsGroup"]))]
    written = re.findall(r"MPLCONFIGDIR=(\S+)", dockerfile)
    assert written and all(path.startswith("/tmp/") for path in written)
    exposed = re.findall(r"^EXPOSE\s+(\d+)\s*$", dockerfile, re.M)
    assert exposed == [str(container(render("defaults"))["ports"][0]["containerPort"])]


@pytest.mark.parametrize("case", CASES)
def test_the_service_account_token_is_mounted_only_for_the_arc_scaler(case: str) -> None:
    objects = render(case)
    for account in (o for o in objects if o["kind"] == "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    uses_arc = config(objects).get("SCALER_BACKEND") == "arc"
    assert pod_spec(objects)["automountServiceAccountToken"] is uses_arc
    assert ("Role" in [o["kind"] for o in objects]) is uses_arc


def test_replicas_on_separate_nodes_replaced_one_at_a_time() -> None:
    objects = render("defaults")
    deployment, budget = one(objects, "Deployment"), one(objects, "PodDisruptionBudget")
    labels = pod_template_labels(objects)
    assert deployment["spec"]["replicas"] == 2
    assert selects(deployment["spec"]["selector"]["matchLabels"], labels)
    assert selects(budget["spec"]["selector"]["matchLabels"], labels)
    assert budget["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in budget["spec"]
    # A rollout starts a new pod and waits for it to be ready before it stops an old one.
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    spread = [
        c
        for c in pod_spec(objects)["topologySpreadConstraints"]
        if c["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert len(spread) == 1
    assert spread[0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread[0]["maxSkew"] == 1
    assert selects(spread[0]["labelSelector"]["matchLabels"], labels)


def test_a_budget_with_min_available_replaces_max_unavailable() -> None:
    objects = render_values({**SECRET, "podDisruptionBudget": {"minAvailable": 1}})
    assert {"minAvailable": 1}.items() <= one(objects, "PodDisruptionBudget")["spec"].items()
    assert "maxUnavailable" not in one(objects, "PodDisruptionBudget")["spec"]


def test_termination_grace_covers_the_pause_the_drain_and_the_stop() -> None:
    """Kubernetes counts the preStop pause in the grace; SIGKILL must not come before the
    requests in flight are answered and the work is stopped in order."""
    objects = render("defaults")
    pause = container(objects)["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    drain = float(
        config(objects).get("SHUTDOWN_GRACE_SECONDS")
        or Settings.model_fields["shutdown_grace_seconds"].default
    )
    stop = leader.STOP_WORK_S + 5  # the lifespan's wait for the leader's work (bot/app.py)
    assert pod_spec(objects)["terminationGracePeriodSeconds"] > float(pause[1]) + drain + stop


def test_resources_are_set_with_a_memory_limit_and_no_cpu_limit() -> None:
    resources = container(render("defaults"))["resources"]
    assert resources == {
        "requests": {"cpu": "50m", "memory": "160Mi"},
        "limits": {"memory": "320Mi"},
    }


def test_scheduling_values_reach_the_pod() -> None:
    values = {
        **SECRET,
        "nodeSelector": {"pool": "bots"},
        "tolerations": [{"key": "bots", "operator": "Exists", "effect": "NoSchedule"}],
        "podAnnotations": {"team": "ci"},
        "podLabels": {"team": "ci"},
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/q"}},
        "imagePullSecrets": [{"name": "regcred"}],
    }
    objects = render_values(values)
    pod, template = pod_spec(objects), one(objects, "Deployment")["spec"]["template"]
    assert pod["nodeSelector"] == {"pool": "bots"}
    assert pod["tolerations"] == values["tolerations"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert template["metadata"]["annotations"]["team"] == "ci"
    assert template["metadata"]["labels"]["team"] == "ci"
    account = one(objects, "ServiceAccount")["metadata"]
    assert account["annotations"] == values["serviceAccount"]["annotations"]


# --- what the Role allows -----------------------------------------------------------------------


def test_the_role_grants_get_and_patch_on_scale_sets_to_the_bots_service_account() -> None:
    objects = render("arc-elsewhere")
    role, binding = one(objects, "Role"), one(objects, "RoleBinding")
    assert role["rules"] == [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["autoscalingrunnersets"],
            "resourceNames": ["linux-2xlarge"],  # SCALER_TARGETS' linux.2xlarge, derived
            "verbs": ["get", "patch"],
        }
    ]
    assert role["metadata"]["namespace"] == config(objects)["SCALER_ARC_NAMESPACE"]
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


def test_rbac_create_false_leaves_the_grant_to_the_cluster_admin() -> None:
    objects = render_values({**SECRET, "rbac": {"create": False}})
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
    assert pod_spec(objects)["automountServiceAccountToken"] is True


async def test_the_role_allows_exactly_what_the_arc_scaler_calls() -> None:
    """Every operation of the scaler, configured as the chart configures it, against a recording
    API: each call's verb, resource, namespace and name."""
    runner_set = json.loads(ARC_FIXTURE.read_text())
    # The recorded set's runner type, its scale set derived as the bot derives it.
    runner_type = runner_set["metadata"]["name"].replace("-", ".")
    targets = {"SCALER_TARGETS": json.dumps({runner_type: {"cap": 10, "ceiling": 300}})}
    objects = render_values({**SECRET, "arc": {"namespace": "arc-runners"}, "config": targets})
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
    settings = settings_of(objects)
    arc = ArcScaler(settings, access, client=client)
    target = scale_targets(settings)[runner_type]
    await arc.capacity(target)
    await arc.failures(target)
    result = await arc.scale(ScaleRequest(target, 2, "1", "al"))
    assert result.undo is not None
    await arc.revert(target, result.undo)
    await client.close()

    verbs = {"GET": "get", "PATCH": "patch"}
    role = one(objects, "Role")
    rule = role["rules"][0]
    namespace = role["metadata"]["namespace"]
    object_path = re.compile(
        rf"/apis/(?P<group>[^/]+)/v1alpha1/namespaces/{namespace}/(?P<resource>[^/]+)/"
        r"(?P<name>[^/]+)"
    )
    used = set()
    for method, path in calls:
        match = object_path.fullmatch(path)
        assert match, f"{method} {path}: not a named object in {namespace}"
        assert match["group"] in rule["apiGroups"]
        assert match["resource"] in rule["resources"]
        assert match["name"] in rule["resourceNames"]
        used.add(verbs[method])
    assert used == set(rule["verbs"])


def settings_of(objects: list[dict], **more: str) -> Settings:
    """The settings the bot reads from the chart's ConfigMap (and `more`, as from its Secret)."""
    read = {k.lower(): v for k, v in config(objects).items()}
    return load_settings(_env_file=None, **(read | more))


# Runner types as `runs-on` names them, with RUNNER_SCALE_SETS, and the scale sets the Role names:
# derived (escaped, lower-cased, trimmed), named by RUNNER_SCALE_SETS (matched by runner key, as an
# alert's label is), or a target given outright.
NAMING: dict[str, tuple[dict, dict, list[str]]] = {
    "derived": ({"linux.2xlarge": {"cap": 10}}, {}, ["linux-2xlarge"]),
    "escaped": (
        {"Linux_ARM64.2XLarge+AVX": {"cap": 1}, "-gpu.a10g-": {}, "  spaced  ": {}},
        {},
        ["gpu-a10g", "linux-arm64-2xlarge-avx", "spaced"],
    ),
    # Go lower-cases İ and the Kelvin sign to ASCII; the bot makes them -, and so must the chart.
    "not-ascii": ({"KİLO.8": {}, "\u212aube": {}, "gpu.ünï": {}}, {}, ["gpu--n", "k-lo-8", "ube"]),
    "one-type-three-spellings": (
        {"linux.2xlarge": {}, "linux-2xlarge": {}, "LINUX_2XLARGE": {}},
        {},
        ["linux-2xlarge"],
    ),
    "runner-scale-sets": (
        {"linux.g5.4xlarge.nvidia.gpu": {"cap": 2}, "linux.2xlarge": {}},
        {"linux.g5.4xlarge.nvidia.gpu": "gpu-a10g", "linux.unused": "unused"},
        ["gpu-a10g", "linux-2xlarge"],
    ),
    "runner-scale-sets-spelt-otherwise": ({"linux.g5": {}}, {"LINUX-G5": "gpu-x"}, ["gpu-x"]),
    "nothing-to-derive": ({"ГПУ": {}}, {"гпу": "gpu-ru"}, ["gpu-ru"]),
    "targets": (
        {"arm": {"target": "arc-runners/arm-set"}, "x86": "x86-set", "Error": "error-set"},
        {},
        ["arm-set", "error-set", "x86-set"],
    ),
}


@pytest.mark.parametrize("case", NAMING)
def test_the_role_names_the_scale_sets_the_bot_addresses(case: str) -> None:
    """The chart maps runner types to scale sets in its template, the bot in
    bot/domain/reading/runner_names.py and bot/factory.py: from the same values, the same sets."""
    targets, explicit, expected = NAMING[case]
    ceilinged = {
        runner_type: {**({"target": entry} if isinstance(entry, str) else entry), "ceiling": 40}
        for runner_type, entry in targets.items()
    }
    values = {
        **SECRET,
        "arc": {"namespace": "arc-runners"},
        "config": {
            "SCALER_TARGETS": json.dumps(ceilinged),
            "RUNNER_SCALE_SETS": json.dumps(explicit),
        },
    }
    objects = render_values(values)
    addressed = {t.target.rpartition("/") for t in scale_targets(settings_of(objects)).values()}
    assert {space or "arc-runners" for space, _, _ in addressed} == {"arc-runners"}
    bots = sorted({name for _, _, name in addressed})
    assert one(objects, "Role")["rules"][0]["resourceNames"] == bots == expected
    # The admission policy's ceilings name the same sets: one source, SCALER_TARGETS.
    variables = one(objects, "ValidatingAdmissionPolicy")["spec"]["variables"]
    (ceilings,) = [v["expression"] for v in variables if v["name"] == "ceilings"]
    assert ceilings == "{" + ", ".join(f"'arc-runners/{name}': 40" for name in bots) + "}"


async def test_the_check_names_a_target_the_charts_role_leaves_out(kube: FakeKubeApi) -> None:
    """The Role the chart renders, as the API server's RBAC: a runner type added to the pods'
    SCALER_TARGETS but not to the values (in the Secret, an edited ConfigMap) is refused, and
    `queuepilot check` names it with the fix."""
    objects = render_values({**SECRET, "arc": {"namespace": "arc-runners"}})
    kube.rules = one(objects, "Role")["rules"]
    kube.add_from_fixture("linux-2xlarge")
    kube.add_from_fixture("linux-gpu")
    directory = Path(tempfile.mkdtemp(prefix="qp-kube-"))
    kubeconfig = kube.kubeconfig(directory, kube.url)  # type: ignore[attr-defined]
    settings = settings_of(
        objects,
        scaler_kubeconfig=str(kubeconfig),
        scaler_targets=json.dumps({"linux.2xlarge": {"cap": 10}, "linux.gpu": {"cap": 2}}),
    )

    named, left_out = await probe_arc(settings, {})

    assert named.verdict is Verdict.OK, named
    assert left_out.verdict is Verdict.FAIL
    assert left_out.detail.startswith("arc-runners/linux-gpu (linux.gpu): may not get or patch")
    assert "add linux.gpu there and `helm upgrade` so the Role names it" in left_out.fix


async def test_the_upgrade_that_adds_a_runner_type_is_not_stopped_by_the_role_it_updates(
    kube: FakeKubeApi,
) -> None:
    """The pre-upgrade check runs while the old Role still names the old sets: the new runner
    type's set, which the new Role names, is a warning (QUEUEPILOT_ROLE_PENDING), not a stop;
    `helm test`, run after the upgrade, holds it to the new Role."""
    old = render_values({**SECRET, "arc": {"namespace": "arc-runners"}})
    targets = json.dumps(
        {"linux.2xlarge": {"cap": 10, "ceiling": 40}, "linux.gpu": {"cap": 2, "ceiling": 8}}
    )
    new = render_values(
        {**SECRET, "arc": {"namespace": "arc-runners"}, "config": {"SCALER_TARGETS": targets}}
    )
    assert one(new, "Role")["rules"][0]["resourceNames"] == ["linux-2xlarge", "linux-gpu"]
    kube.rules = one(old, "Role")["rules"]
    kube.add_from_fixture("linux-2xlarge")
    kube.add_from_fixture("linux-gpu")
    directory = Path(tempfile.mkdtemp(prefix="qp-kube-"))
    kubeconfig = str(kube.kubeconfig(directory, kube.url))  # type: ignore[attr-defined]

    def hook_env(hook: str) -> dict[str, str]:
        (pod,) = [
            o
            for o in new
            if o["kind"] == "Pod" and o["metadata"]["annotations"]["helm.sh/hook"] == hook
        ]
        return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}

    before = hook_env("pre-upgrade")
    settings = settings_of(new, scaler_kubeconfig=kubeconfig)
    assert settings.scaler_targets.keys() == {"linux.2xlarge", "linux.gpu"}
    kept, added = await probe_arc(settings, before)
    assert (kept.verdict, added.verdict) == (Verdict.OK, Verdict.WARN), added
    assert "linux-gpu (linux.gpu): may not get or patch" in added.detail
    assert "yet: the chart's Role in arc-runners is applied by this upgrade" in added.detail

    kube.rules = one(new, "Role")["rules"]  # the upgrade applied it
    kept, added = await probe_arc(settings, hook_env("test"))
    assert (kept.verdict, added.verdict) == (Verdict.OK, Verdict.OK), added


# --- settings: the ConfigMap, the Secret, and what the pod reads ------------------------------


@pytest.mark.parametrize("case", sorted(set(CASES) - set(SECRET_FILES) - {"escape-hatches"}))
def test_settings_come_from_the_config_map_then_the_secret(case: str) -> None:
    objects = render(case)
    main = container(objects)
    assert [e["name"] for e in main["env"]] == ["MEMORY_LIMIT_MIB"]  # the container's limit
    assert main["envFrom"] == [
        {"configMapRef": {"name": "queuepilot-config"}},
        {"secretRef": {"name": "queuepilot"}},  # last: a key in both takes the Secret's value
    ]


@pytest.mark.parametrize("case", CASES)
def test_the_caches_are_sized_from_the_containers_memory_limit(case: str) -> None:
    """MEMORY_LIMIT_MIB is the limit `resources` gives the container, in MiB as Kubernetes
    rounds it (up), so raising the limit grows the caches with it."""
    (memory,) = [e for e in container(render(case))["env"] if e["name"] == "MEMORY_LIMIT_MIB"]
    assert memory == {
        "name": "MEMORY_LIMIT_MIB",
        "valueFrom": {
            "resourceFieldRef": {
                "containerName": "queuepilot",
                "resource": "limits.memory",
                "divisor": "1Mi",
            }
        },
    }


@pytest.mark.parametrize(
    "values",
    [
        # Without a limit Kubernetes would give the node's allocatable memory: the bot reads its
        # cgroup instead, and sizes itself as the chart's default limit where there is none.
        {**SECRET, "resources": {"requests": {"memory": "160Mi"}, "limits": None}},
        # The operator's own value stands.
        {**SECRET, "config": {"MEMORY_LIMIT_MIB": "512"}},
    ],
    ids=["no-limit", "set-in-config"],
)
def test_no_memory_limit_or_one_in_config_leaves_the_variable_alone(values: dict) -> None:
    objects = render_values(values)
    assert "MEMORY_LIMIT_MIB" not in {e["name"] for e in container(objects).get("env", [])}


@pytest.mark.parametrize("case", CASES)
def test_every_variable_the_chart_sets_is_a_setting(case: str) -> None:
    known = known_variables()
    objects = render(case)
    assert set(config(objects)) <= known
    assert {e["name"] for e in chart_env(objects, case)} <= known


def test_every_secret_example_key_is_a_setting() -> None:
    known = known_variables()
    for mode, example in SECRET_EXAMPLES.items():
        keys = env_file_keys(example)
        assert keys, example
        assert set(keys) <= known, f"{mode}: {set(keys) - known}"


@pytest.mark.parametrize("case", ["defaults", "socket-mode", "ci-bots"])
def test_the_settings_with_their_secret_are_settings_serve_takes(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in known_variables():
        monkeypatch.delenv(name, raising=False)
    mode = "socket" if case in SOCKET_MODE else "http"
    required = set(env_file_keys(SECRET_EXAMPLES[mode], commented=False))
    slack = "SLACK_APP_TOKEN" if mode == "socket" else "SLACK_SIGNING_SECRET"
    assert required == {"SLACK_BOT_TOKEN", slack, "ALERT_WEBHOOK_TOKEN"}
    secret = {"SLACK_BOT_TOKEN": "xoxb-0000-example", slack: "xapp-1-x", "ALERT_WEBHOOK_TOKEN": "x"}
    values = {**config(render(case)), **secret}
    settings = read_settings(_env_file=None, **{k.lower(): v for k, v in values.items()})
    assert settings.socket_mode is (mode == "socket")


def test_the_charts_default_settings_allow_someone_to_scale() -> None:
    """`queuepilot check` fails when nobody may scale: the defaults name an on-call group."""
    settings = load_settings(
        _env_file=None, **{k.lower(): v for k, v in config(render("defaults")).items()}
    )
    assert settings.scaler_backend.value == "arc"
    assert scaling(settings) == []


def test_the_config_values_are_strings_as_the_configmap_holds_them() -> None:
    """A ConfigMap's data are strings: the schema refuses a bare number rather than let
    Kubernetes refuse the object at install."""
    defaults = chart().values["config"]
    assert all(isinstance(value, str) for value in defaults.values())
    assert set(defaults) <= known_variables()


# --- what reaches the outside ----------------------------------------------------------------


def test_the_ingress_publishes_only_slacks_request_url() -> None:
    objects = render("defaults")
    ingress = one(objects, "Ingress")["spec"]
    assert "defaultBackend" not in ingress
    paths = [path for rule in ingress["rules"] for path in rule["http"]["paths"]]
    service = one(objects, "Service")
    assert paths == [
        {
            "path": "/slack/events",
            "pathType": "Exact",
            "backend": {"service": {"name": service["metadata"]["name"], "port": {"name": "http"}}},
        }
    ]
    assert "/slack/events" in served_routes(socket_mode=False)["POST"]
    assert ingress["tls"] == [{"hosts": ["queuepilot.example.com"], "secretName": "queuepilot-tls"}]


GITHUB_SECRETS = {**SLACK_SECRETS, "GITHUB_WEBHOOK_SECRET": "github-secret-0000"}


def published(objects: list[dict[str, Any]]) -> list[str]:
    ingresses = [o["spec"] for o in objects if o["kind"] == "Ingress"]
    return [p["path"] for i in ingresses for rule in i["rules"] for p in rule["http"]["paths"]]


@pytest.mark.parametrize(
    ("values", "paths"),
    [
        ({**SECRET}, ["/slack/events"]),
        ({**SECRET, "ingress": {"githubWebhook": True}}, ["/slack/events", "/webhooks/github"]),
        ({"secrets": GITHUB_SECRETS}, ["/slack/events", "/webhooks/github"]),
        ({"secrets": GITHUB_SECRETS, "ingress": {"githubWebhook": False}}, ["/slack/events"]),
        (
            {**SECRET, "socketMode": {"enabled": True}, "ingress": {"githubWebhook": True}},
            ["/webhooks/github"],
        ),
        ({**SECRET, "ingress": {"enabled": False, "githubWebhook": True}}, []),
    ],
    ids=["default", "switched-on", "secret-in-values", "switched-off", "socket-mode", "no-ingress"],
)
def test_the_ingress_publishes_githubs_webhook_when_switched_on_or_its_secret_is_given(
    values: dict[str, Any], paths: list[str]
) -> None:
    assert published(render_values(values)) == paths
    assert "/webhooks/github" in served_routes(socket_mode=False)["POST"]


def test_githubs_webhook_has_an_ingress_of_its_own_over_tls_with_its_own_annotations() -> None:
    """An allowlist of GitHub's hook addresses on GitHub's Ingress leaves Slack's requests alone,
    and Slack's Ingress publishes no GitHub path; host, class and TLS default to Slack's."""
    allowlist = {"nginx.ingress.kubernetes.io/whitelist-source-range": "140.82.112.0/20"}
    github = {"enabled": True, "annotations": allowlist}
    objects = render_values({**SECRET, "ingress": {"githubWebhook": github}})
    slack, hooks = (o for o in objects if o["kind"] == "Ingress")
    assert slack["metadata"]["name"] == "queuepilot"
    assert published([slack]) == ["/slack/events"]
    assert "annotations" not in slack["metadata"]
    assert hooks["metadata"]["name"] == "queuepilot-github"
    assert published([hooks]) == ["/webhooks/github"]
    assert hooks["metadata"]["annotations"] == allowlist
    assert hooks["spec"]["tls"] == [
        {"hosts": ["queuepilot.example.com"], "secretName": "queuepilot-tls"}
    ]
    own = {
        **github,
        "host": "hooks.example.com",
        "className": "public",
        "tls": {"secretName": "hooks-tls"},
    }
    values = {**SECRET, "ingress": {"className": "internal", "githubWebhook": own}}
    hooks = [o for o in render_values(values) if o["kind"] == "Ingress"][1]
    assert hooks["spec"]["ingressClassName"] == "public"
    assert hooks["spec"]["rules"][0]["host"] == "hooks.example.com"
    assert hooks["spec"]["tls"] == [{"hosts": ["hooks.example.com"], "secretName": "hooks-tls"}]
    # TLS ended before Slack's Ingress (a cloud load balancer) is no TLS for GitHub's.
    plain = {"tls": {"secretName": ""}, "githubWebhook": {"enabled": True}}
    with pytest.raises(helm_python.HelmError, match="GitHub's webhook needs TLS on its Ingress"):
        render_values({**SECRET, "ingress": plain})


def test_the_webhooks_limits_reach_the_bot_from_their_values() -> None:
    """webhooks.github.rate and .concurrency are GITHUB_WEBHOOK_RATE and _CONCURRENCY in the
    ConfigMap, read by the bot; unset, the bot's defaults."""
    values = {**SECRET, "webhooks": {"github": {"rate": 40, "concurrency": 6}}}
    settings = settings_of(render_values(values))
    assert (settings.github_webhook_rate, settings.github_webhook_concurrency) == (40, 6)
    defaults = settings_of(render_values(SECRET))
    assert "GITHUB_WEBHOOK_RATE" not in config(render_values(SECRET))
    assert defaults.github_webhook_rate == Settings.model_fields["github_webhook_rate"].default


def test_the_ingress_takes_its_class_annotations_and_tls_from_values() -> None:
    objects = render("ci-bots")
    ingress = one(objects, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"cert-manager.io/cluster-issuer": "letsencrypt"}
    assert ingress["spec"]["rules"][0]["host"] == "queuepilot.ci.example.com"
    plain = render_values({**SECRET, "ingress": {"tls": {"secretName": ""}}})
    assert "tls" not in one(plain, "Ingress")["spec"]


@pytest.mark.parametrize("case", sorted(SOCKET_MODE))
def test_socket_mode_publishes_nothing_and_keeps_the_service_for_alerts(case: str) -> None:
    objects = render(case)
    assert not [o for o in objects if o["kind"] == "Ingress"]
    assert one(objects, "Service")["spec"]["type"] == "ClusterIP"
    routes = served_routes(socket_mode=True)
    assert "/slack/events" not in routes.get("POST", set())
    assert {"/alerts/grafana", "/alerts/alertmanager"} <= routes["POST"]


def test_the_notes_give_githubs_url_where_it_is_published() -> None:
    values = {**SECRET, "ingress": {"githubWebhook": True}}
    notes = chart().render(values, name=RELEASE, namespace=NAMESPACE)[
        "queuepilot/templates/NOTES.txt"
    ]
    assert "https://queuepilot.example.com/webhooks/github" in notes
    assert "on the Ingress queuepilot-github" in notes


WARNINGS = {
    "no replicas": ({"replicaCount": 0}, "WARNING: replicaCount is 0: no pod runs"),
    "open alert webhooks": (
        {"config": {"ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED": "true"}},
        "WARNING: config.ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED is true: anyone who reaches",
    ),
    "open alert webhooks, as pydantic reads yes": (
        {"config": {"ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED": "Yes"}},
        "WARNING: config.ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED is true",
    ),
    "no admission policy": (
        {"rbac": {"admissionPolicy": False}},
        "WARNING: rbac.admissionPolicy is false: nothing outside the bot bounds",
    ),
}


@pytest.mark.parametrize(("values", "warned"), WARNINGS.values(), ids=WARNINGS)
def test_the_notes_warn_of_a_release_that_runs_but_is_unsafe(values: dict, warned: str) -> None:
    render = chart().render
    notes = render({**SECRET, **values}, name=RELEASE, namespace=NAMESPACE)
    assert warned in notes["queuepilot/templates/NOTES.txt"]
    quiet = render(SECRET, name=RELEASE, namespace=NAMESPACE)["queuepilot/templates/NOTES.txt"]
    assert "WARNING" not in quiet


def test_the_notes_name_the_urls_the_app_serves() -> None:
    notes = chart().render(SECRET, name=RELEASE, namespace=NAMESPACE)[
        "queuepilot/templates/NOTES.txt"
    ]
    routes = served_routes(socket_mode=False)["POST"]
    urls = re.findall(r"https?://\S+", notes)
    paths = {httpx.URL(url).path for url in urls}
    assert {"/slack/events", "/alerts/alertmanager", "/alerts/grafana"} == paths
    assert paths <= routes
    assert "http://queuepilot.queuepilot.svc/alerts/alertmanager" in urls


def test_the_docs_create_the_secret_the_pods_read() -> None:
    text = DOCS.read_text()
    assert "kubectl -n queuepilot create secret generic queuepilot --from-env-file=" in text
    assert "--set existingSecret=queuepilot" in text
    # SSL_CERT_FILE is OpenSSL's and httpx's, read by every HTTPS client of the bot: a CA bundle.
    known = known_variables() | {"SSL_CERT_FILE"}
    named = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
    assert named - known == set(), "docs/kubernetes.md names variables that are no settings"


def test_config_null_drops_every_example_setting() -> None:
    """The defaults are examples: `config: null` (or `KEY: null`) leaves them out."""
    objects = render_values({**SECRET, "config": None})
    assert config(objects) == {}
    assert pod_spec(objects)["automountServiceAccountToken"] is False  # no scaler, no token
    dropped = render_values({**SECRET, "config": {"LOG_LEVEL": None}})
    assert "LOG_LEVEL" not in config(dropped) and "SLACK_CHANNEL" in config(dropped)
