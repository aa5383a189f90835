"""The chart as Helm takes it: `helm lint --strict` passes, every way of installing it renders,
every object is valid against Kubernetes 1.30's published schemas (custom resources against
their CRDs' fields), each lands in the release's namespace, and values that could not work are
refused with a message naming them."""

from __future__ import annotations

import re
import textwrap

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml

from deploy.helm import readme as chart_readme
from tests.deploy import crds
from tests.deploy.manifests import (
    CASES,
    CHART,
    CLUSTER_SCOPED,
    DOCS,
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    NAMESPACE,
    RELEASE,
    SECRET,
    SLACK_SECRETS,
    chart,
    config,
    kinds,
    lint,
    namespace_of,
    one,
    pod_spec,
    pod_template_labels,
    render,
    render_values,
)

BASE = [
    "ConfigMap",
    "Deployment",
    "Ingress",
    "Pod",  # the upgrade check: before an upgrade (a hook) and as `helm test`
    "Pod",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
    # The arc scaler's bounds, held by the API server.
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
]
POLICY = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
# The settings' ConfigMap and the dashboard's; the bot's rules and the queue rules.
MONITORING = ["ConfigMap", "ServiceMonitor", "PrometheusRule", "PrometheusRule"]
KINDS = {
    "defaults": BASE,
    "socket-mode": [k for k in BASE if k not in {"Ingress"}],
    # The chart's Secret, and its new values for the check before an upgrade.
    "secrets-in-values": sorted([*BASE, "Secret", "Secret"]),
    "secret-files": BASE,
    "socket-mode-secret-files": [k for k in BASE if k not in {"Ingress"}],
    "external-secret": sorted([*BASE, "ExternalSecret"]),
    "monitoring": sorted([*BASE, *MONITORING]),
    "network-policy": sorted([*BASE, "NetworkPolicy"]),
    "arc-elsewhere": BASE,
    "no-pdb": [k for k in BASE if k not in {"PodDisruptionBudget"}],
    "no-scaler": [k for k in BASE if k not in {"Role", "RoleBinding", *POLICY}],
    "admission-policy": BASE,
    "ci-bots": sorted([*BASE, *MONITORING, "ExternalSecret", "NetworkPolicy"]),
    "locked-down": sorted([*(k for k in BASE if k != "Ingress"), "NetworkPolicy"]),
    # The operator's own ServiceAccount; the bot's rules and the queue rules, routed.
    "escape-hatches": sorted(
        [
            *(k for k in BASE if k != "ServiceAccount"),
            "NetworkPolicy",
            "PrometheusRule",
            "PrometheusRule",
            "AlertmanagerConfig",
        ]
    ),
}


def test_every_case_is_listed_with_what_it_makes() -> None:
    assert set(KINDS) == set(CASES)


def test_helm_lint_strict_passes_on_the_charts_own_defaults() -> None:
    """What `helm lint --strict deploy/helm/queuepilot` runs: no value of the user's at all."""
    assert lint({}) == []


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_helm_lint_strict_passes(case: str, version: str) -> None:
    values, namespace = CASES[case]
    assert lint(values, namespace, version) == []


def test_the_chart_is_the_release_it_ships_for_the_oldest_kubernetes_it_is_tested_on() -> None:
    metadata = chart().metadata
    assert (metadata["apiVersion"], metadata["name"]) == ("v2", "queuepilot")
    assert metadata["kubeVersion"] == f">={KUBERNETES_VERSION}.0-0"
    assert metadata["home"] and metadata["sources"]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_every_object_is_valid_against_the_kubernetes_schemas(case: str, version: str) -> None:
    objects = render(case)
    assert kinds(objects) == KINDS[case]
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            if obj["kind"] in crds.SCHEMAS:
                crds.validate(obj)
            else:
                kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(part) for part in exc.path)
            pytest.fail(f"{case}: {name} is invalid at {path}: {exc.message}")
        except jsonschema.ValidationError as exc:
            path = ".".join(str(part) for part in exc.absolute_path)
            pytest.fail(f"{case}: {name} leaves its CRD at {path}: {exc.message}")


@pytest.mark.parametrize("case", CASES)
def test_every_object_is_in_the_releases_namespace_and_arcs_role_in_arcs(case: str) -> None:
    """Set explicitly on each object: `helm template | kubectl apply` and a GitOps tool that
    applies the rendered manifests put them where the release is, not in a current namespace.
    A cluster-scoped object has none, and its name carries the release's namespace and name, so
    two releases' do not collide."""
    objects = render(case)
    bots = namespace_of(case)
    runners = config(objects).get("SCALER_ARC_NAMESPACE")
    fullname = one(objects, "Deployment")["metadata"]["name"]
    for obj in objects:
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], f"{case}: {obj['kind']}"
            assert obj["metadata"]["name"] == f"{bots}.{fullname}-scaler"
            continue
        expected = runners if obj["kind"] in ("Role", "RoleBinding") else bots
        assert obj["metadata"].get("namespace") == expected, f"{case}: {obj['kind']}"
    if "RoleBinding" in kinds(objects):
        subject = one(objects, "RoleBinding")["subjects"][0]
        account = pod_spec(objects)["serviceAccountName"]
        assert (subject["name"], subject["namespace"]) == (account, bots)


def test_arcs_namespace_is_set_once_and_defaults_to_the_releases() -> None:
    assert config(render("defaults"))["SCALER_ARC_NAMESPACE"] == NAMESPACE
    assert config(render("arc-elsewhere"))["SCALER_ARC_NAMESPACE"] == "arc-runners"
    assert config(render("ci-bots"))["SCALER_ARC_NAMESPACE"] == "ci-runners"
    assert "SCALER_ARC_NAMESPACE" not in config(render("no-scaler"))


def test_every_object_carries_the_standard_labels() -> None:
    objects = render("ci-bots")
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "queuepilot", obj["kind"]
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/version"] == chart().metadata["appVersion"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == f"queuepilot-{chart().metadata['version']}"


def test_the_version_label_is_the_version_the_pods_run() -> None:
    """Going back with `--set image.tag=0.26.0` labels the pods 0.26.0, not the chart's release."""
    pinned = render_values({**SECRET, "image": {"tag": "0.26.0@sha256:" + "a" * 64}})
    assert pod_template_labels(pinned)["app.kubernetes.io/version"] == "0.26.0"
    assert one(pinned, "Deployment")["metadata"]["labels"]["app.kubernetes.io/version"] == "0.26.0"


def test_the_image_is_the_charts_release_unless_a_tag_is_given() -> None:
    image = pod_spec(render("defaults"))["containers"][0]["image"]
    assert image == f"ghcr.io/queuepilot/queuepilot:{chart().metadata['appVersion']}"
    tagged = render_values({**SECRET, "image": {"tag": "0.26.0"}})
    assert pod_spec(tagged)["containers"][0]["image"] == "ghcr.io/queuepilot/queuepilot:0.26.0"


def test_the_image_the_chart_names_is_the_one_the_project_publishes() -> None:
    workflow = (CHART.parents[2] / ".github" / "workflows" / "image.yml").read_text()
    assert "images: ghcr.io/${{ github.repository }}" in workflow
    assert chart().metadata["home"] == "https://github.com/queuepilot/queuepilot"
    assert chart().values["image"]["repository"] == "ghcr.io/queuepilot/queuepilot"


def test_a_changed_setting_or_secret_rolls_the_pods() -> None:
    """The pods read them at start: the pod template changes with them."""

    def annotations(values: dict) -> dict[str, str]:
        return one(render_values(values), "Deployment")["spec"]["template"]["metadata"][
            "annotations"
        ]

    before = annotations(SECRET)
    after = annotations({**SECRET, "config": {"LOG_LEVEL": "DEBUG"}})
    assert before["checksum/config"] != after["checksum/config"]
    secrets = {"secrets": SLACK_SECRETS}
    rotated = {"secrets": {**SLACK_SECRETS, "ALERT_WEBHOOK_TOKEN": "rotated"}}
    assert annotations(secrets)["checksum/secret"] != annotations(rotated)["checksum/secret"]


def test_the_package_leaves_out_the_rules_tests_and_notes_and_keeps_its_readme() -> None:
    """.helmignore: the promtool tests and grafana-rule.md stay in the repository; the README
    goes with the chart (`helm show readme`)."""
    names = {file["name"] for file in chart().files}
    assert {"alerts/queuepilot-rules.yaml", "alerts/queue-rules.yaml"} <= names
    assert {"dashboards/queuepilot.json", "README.md"} <= names
    assert not [n for n in names if n.endswith((".test.yaml", ".md")) and n != "README.md"]


# --- values that could not work are refused, naming them ----------------------------------------


def arc(settings: dict) -> dict:
    """Values with the arc scaler (the default) and these settings over the defaults."""
    return {**SECRET, "config": settings}


def refusal(values: dict) -> str:
    with pytest.raises(helm_python.HelmError) as caught:
        render_values(values)
    return str(caught.value)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({**SECRET, "replicas": 3}, "'replicas'"),  # replicaCount
        ({**SECRET, "ingress": {"hosts": ["q.example.com"]}}, "'hosts'"),  # ingress.host
        ({**SECRET, "serviceMonitor": {"enable": True}}, "'enable'"),
        ({**SECRET, "config": {"PORT": 3000}}, "/config/PORT"),  # a number, not a string
        ({**SECRET, "config": {"slack_channel": "C1"}}, "'slack_channel'"),  # SLACK_CHANNEL
        ({"secrets": {"slack_bot_token": "xoxb-1"}}, "'slack_bot_token'"),
        ({**SECRET, "replicaCount": "2"}, "/replicaCount"),
        ({**SECRET, "secretFiles": "yes"}, "/secretFiles"),
        ({**SECRET, "webhooks": {"github": {"rate": 0}}}, "/webhooks/github/rate"),
        ({**SECRET, "webhooks": {"github": {"concurrency": 1.5}}}, "/webhooks/github/concurrency"),
        ({**SECRET, "ingress": {"githubWebhook": {"tls": {"secret": "x"}}}}, "'secret'"),
    ],
)
def test_a_misspelt_or_mistyped_value_is_refused_by_the_schema(values: dict, named: str) -> None:
    message = refusal(values)
    assert "schema" in message and named in message, message
    assert lint(values), "helm lint passes a value the schema refuses"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({**SECRET, "secrets": SLACK_SECRETS}, "existingSecret and secrets are set: keep one"),
        (
            {**SECRET, "externalSecret": {"enabled": True, "secretStoreRef": {"name": "v"}}},
            "existingSecret and externalSecret.enabled are set: keep one",
        ),
        ({}, "none is set: choose one"),
        (
            {"externalSecret": {"enabled": True}},
            "externalSecret.secretStoreRef.name is empty",
        ),
        (
            {"secrets": {**SLACK_SECRETS, "SLACK_SIGNING_SECRET": ""}},
            "secrets.SLACK_SIGNING_SECRET is missing or empty",
        ),
        (
            {"secrets": SLACK_SECRETS, "socketMode": {"enabled": True}},
            "secrets.SLACK_APP_TOKEN is missing or empty",
        ),
        ({**SECRET, "config": {"GITHUB_TOKEN": "ghp_x"}}, "config.GITHUB_TOKEN is a secret"),
        ({**SECRET, "config": {"SCALER_ARC_NAMESPACE": "x"}}, "set arc.namespace instead"),
        (
            {"secrets": {**SLACK_SECRETS, "REDIS_URL": "redis://:pw@r:6379"}, "secretFiles": True},
            "config.REDIS_URL: with secretFiles the bot reads REDIS_URL from the file",
        ),
        ({**SECRET, "ingress": {"host": ""}}, "ingress.host is empty"),
        (
            {
                **SECRET,
                "socketMode": {"enabled": True},
                "ingress": {"host": "", "githubWebhook": True},
            },
            "ingress.githubWebhook.host and ingress.host are empty: GitHub posts to https://<host>",
        ),
        (
            {
                **SECRET,
                "ingress": {"tls": {"secretName": ""}, "githubWebhook": {"enabled": True}},
            },
            "ingress.githubWebhook.tls.secretName and ingress.tls.secretName are empty: GitHub's "
            "webhook needs TLS on its Ingress",
        ),
        # Unsafe to publish or to run: each refused with the fix.
        (
            {**SECRET, "serviceAccount": {"create": False, "name": "default"}},
            "serviceAccount.name is default: the namespace's default ServiceAccount is every pod's",
        ),
        (
            {**SECRET, "serviceAccount": {"name": "default"}},
            "serviceAccount.name is default",
        ),
        ({**SECRET, "image": {"tag": "latest"}}, "image.tag is latest: each pod would run"),
        (
            {**SECRET, "networkPolicy": {"enabled": True, "extraEgress": [{}]}},
            "networkPolicy.extraEgress[0] is a rule with no to and no ports: it lets the pods "
            "reach everything",
        ),
        (
            {
                **SECRET,
                "networkPolicy": {
                    "enabled": True,
                    "extraIngress": [
                        {"from": [{"podSelector": {"matchLabels": {"app": "grafana"}}}]},
                        {"ports": [{"port": 3000}]},
                    ],
                },
            },
            "networkPolicy.extraIngress[1] is a rule with no from: it lets anyone reach",
        ),
        (
            {**SECRET, "config": {"GITHUB_WEBHOOK_RATE": "5"}},
            "config.GITHUB_WEBHOOK_RATE: set webhooks.github.rate instead",
        ),
        ({**SECRET, "config": {"PORT": "http"}}, 'config.PORT is "http"'),
        ({**SECRET, "config": {"PORT": "70000"}}, "a number from 1 to 65535"),
        ({**SECRET, "config": {"PORT": "0"}}, "a number from 1 to 65535"),
        (
            {**SECRET, "resources": {"limits": {"memory": "lots"}}},
            'resources.limits.memory is "lots": not a quantity Kubernetes takes',
        ),
        ({**SECRET, "resources": {"requests": {"cpu": "50 m"}}}, "resources.requests.cpu"),
        (
            {**SECRET, "podDisruptionBudget": {"minAvailable": 2}},
            "podDisruptionBudget.minAvailable 2 with replicaCount 2 lets no pod be evicted",
        ),
        (
            {**SECRET, "replicaCount": 1, "podDisruptionBudget": {"maxUnavailable": 0}},
            "podDisruptionBudget.maxUnavailable 0 with replicaCount 1 lets no pod be evicted",
        ),
        (
            {**SECRET, "podDisruptionBudget": {"minAvailable": "60%"}},
            "minAvailable 60% with replicaCount 2",  # Kubernetes rounds 1.2 up to 2
        ),
        ({**SECRET, "podDisruptionBudget": {"maxUnavailable": "0%"}}, "maxUnavailable 0%"),
        (
            {
                **SECRET,
                "networkPolicy": {"enabled": True, "monitoringNamespace": "observability"},
            },
            "config.ALERTMANAGER_URL names a host in the namespace monitoring, where "
            "networkPolicy.monitoringNamespace (observability)",
        ),
        (
            {**SECRET, "networkPolicy": {"enabled": True, "redisNamespace": "data"}},
            "set networkPolicy.redisNamespace to redis",
        ),
        (
            {
                **SECRET,
                "config": {"HUD_URL": "http://hud.ci.svc.cluster.local:8080"},
                "networkPolicy": {"enabled": True},
            },
            "config.HUD_URL names a host in the namespace ci",
        ),
        (
            {
                **SECRET,
                "config": {
                    "REDIS_URL": "redis+sentinel://s-0.sentinel.redis.svc:26379,"
                    "s-1.sentinel.cache.svc:26379/mymaster/0"
                },
                "networkPolicy": {"enabled": True},
            },
            "config.REDIS_URL names a host in the namespace cache",
        ),
        ({**SECRET, "serviceAccount": {"create": False}}, "serviceAccount.name is empty"),
        (
            {
                **SECRET,
                "serviceAccount": {"create": False, "name": "ci", "annotations": {"a": "b"}},
            },
            "annotate your own (ci)",
        ),
        (
            {**SECRET, "extraEnv": [{"name": "GITHUB_TOKEN", "value": "ghp_x"}]},
            "extraEnv: GITHUB_TOKEN is a secret",
        ),
        # The bot reads its environment in any case.
        (
            {**SECRET, "extraEnv": [{"name": "slack_bot_token", "value": "xoxb-1"}]},
            "extraEnv: slack_bot_token is a secret",
        ),
        (
            {**SECRET, "extraEnv": [{"name": "REDIS_URL", "value": "redis://:pw@r:6379/0"}]},
            "extraEnv: REDIS_URL holds a password",
        ),
        (
            {**SECRET, "config": {"REDIS_URL": "redis://:pw@redis.redis.svc:6379/0"}},
            "config.REDIS_URL holds a password",
        ),
        ({**SECRET, "resources": {"requests": {"cpu": "-1"}}}, "not negative"),
        # Null drops a default in Helm: an empty egress rule would open everything.
        ({**SECRET, "networkPolicy": {"enabled": True, "dns": None}}, "networkPolicy.dns is empty"),
        # The arc scaler: SCALER_TARGETS names the scale sets, and the Role only those.
        (arc({"SCALER_TARGETS": "{linux.2xlarge"}), "config.SCALER_TARGETS must be a JSON object"),
        (arc({"SCALER_TARGETS": '["linux.2xlarge"]'}), "config.SCALER_TARGETS must be a JSON"),
        (arc({"SCALER_TARGETS": "{}"}), "config.SCALER_TARGETS is empty: with SCALER_BACKEND arc"),
        (arc({"SCALER_TARGETS": None}), "config.SCALER_TARGETS is empty"),
        (arc({"RUNNER_SCALE_SETS": '{"x": '}), "config.RUNNER_SCALE_SETS must be a JSON object"),
        (
            arc({"RUNNER_SCALE_SETS": '{"linux.gpu": "gpu-a", "LINUX-GPU": "gpu-b"}'}),
            '"LINUX-GPU" and "linux.gpu" are one runner type (linux-gpu) with two scale sets',
        ),
        (
            arc({"SCALER_TARGETS": '{"...": {"cap": 1}}'}),
            'config.SCALER_TARGETS["..."]: no scale set can be derived from this name',
        ),
        (
            arc({"SCALER_TARGETS": '{"linux.2xlarge": "ci-runners/linux-2xlarge"}'}),
            "its target ci-runners/linux-2xlarge is in the namespace ci-runners, but the chart's "
            "Role is in ARC's, queuepilot (arc.namespace): set arc.namespace to ci-runners",
        ),
    ],
)
def test_values_that_could_not_work_are_refused_naming_the_fix(values: dict, named: str) -> None:
    message = refusal(values)
    assert named in message, message


@pytest.mark.parametrize(
    "values",
    [
        {**SECRET, "config": {"PORT": "8080"}},
        {**SECRET, "resources": {"requests": {"cpu": "0.5", "memory": "1e9"}}},
        {**SECRET, "resources": {"limits": {"memory": "1Gi", "ephemeral-storage": "+2G"}}},
        {**SECRET, "replicaCount": 3, "podDisruptionBudget": {"minAvailable": 2}},
        {**SECRET, "replicaCount": 1, "podDisruptionBudget": {"maxUnavailable": "10%"}},
        {**SECRET, "replicaCount": 0, "podDisruptionBudget": {"maxUnavailable": 0}},
        # Reached through a rule of the operator's own.
        {
            **SECRET,
            "config": {"HUD_URL": "http://hud.ci.svc:8080"},
            "networkPolicy": {
                "enabled": True,
                "extraEgress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": "ci"}
                                }
                            }
                        ],
                        "ports": [{"port": 8080}],
                    }
                ],
            },
        },
        # On HTTPS's port, which the policy opens everywhere.
        {
            **SECRET,
            "config": {"SCALER_WEBHOOK_URL": "https://scaler.ci.svc/scale"},
            "networkPolicy": {"enabled": True},
        },
        # Outside the cluster, or with no policy to disagree with.
        {
            **SECRET,
            "config": {"HUD_URL": "https://hud.example.com"},
            "networkPolicy": {"enabled": True},
        },
        {**SECRET, "config": {"HUD_URL": "http://hud.ci.svc:8080"}},
        {**SECRET, "config": {"PORT": ""}},  # the default, as the bot reads it
        # A digest pins even a tag named latest; a rule with ports only is scoped.
        {**SECRET, "image": {"tag": "latest@sha256:" + "0" * 64}},
        {
            **SECRET,
            "networkPolicy": {"enabled": True, "extraEgress": [{"ports": [{"port": 8080}]}]},
        },
        # 0.27's boolean, and the Slack Ingress's TLS, for GitHub's.
        {**SECRET, "ingress": {"githubWebhook": True}},
        # HTTPS to an in-cluster host, a namespace matched by an expression, a host in capitals.
        {
            **SECRET,
            "config": {
                "GRAFANA_URL": "https://grafana.grafana.svc",
                "HUD_URL": "http://HUD.CI.svc:8080",
            },
            "networkPolicy": {
                "enabled": True,
                "extraEgress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/metadata.name",
                                            "operator": "In",
                                            "values": ["ci"],
                                        }
                                    ]
                                }
                            }
                        ]
                    }
                ],
            },
        },
        {
            **SECRET,
            "extraEnv": [
                {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "t"}}}
            ],
        },
    ],
)
def test_values_near_a_refusal_still_render(values: dict) -> None:
    render_values(values)


def test_socket_mode_needs_no_ingress_host() -> None:
    render_values({**SECRET, "socketMode": {"enabled": True}, "ingress": {"host": ""}})


def test_the_values_file_documents_every_value_the_schema_allows() -> None:
    """values.yaml is the reference: a value the schema takes but values.yaml does not show
    would be found by nobody."""
    schema = chart().schema
    assert schema is not None
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict, values: dict, path: str) -> None:
        for key, sub in node.get("properties", {}).items():
            if key == "global":
                continue
            assert key in values, f"values.yaml does not show {path}{key}"
            if sub.get("additionalProperties") is False and isinstance(values[key], dict):
                walk(sub, values[key], f"{path}{key}.")

    walk(schema, defaults, "")
    assert set(defaults) <= set(schema["properties"])


def docs_values() -> list[dict]:
    """Every set of chart values docs/kubernetes.md shows: a YAML block whose keys are values',
    and the values of its Argo CD Application and Flux HelmRelease."""
    text = DOCS.read_text()
    blocks = re.findall(r"^( *)```yaml\n(.*?)^\1```", text, re.M | re.S)
    keys = set(chart().schema["properties"])
    found = []
    for _, block in blocks:
        for doc in yaml.safe_load_all(textwrap.dedent(block)):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "Application":
                doc = doc["spec"]["source"]["helm"]["valuesObject"]
            elif doc.get("kind") == "HelmRelease":
                doc = doc["spec"]["values"]
            if set(doc) <= keys:
                found.append(doc)
    return found


def test_the_values_the_docs_show_render_and_lint() -> None:
    shown = docs_values()
    assert len(shown) >= 6
    for values in shown:
        sources = {"existingSecret", "secrets", "externalSecret"} & set(values)
        given = values if sources else {**SECRET, **values}
        render_values(given)
        assert lint(given) == [], values


# --- the chart's README ------------------------------------------------------------------------


def readme_rows() -> dict[str, str]:
    """Each value the README's table lists, and its row."""
    text = (CHART / "README.md").read_text()
    return {m[1]: m[0] for m in re.finditer(r"^\| `([^`]+)` \|.*$", text, re.M)}


def test_the_readme_is_what_its_generator_makes_from_the_values() -> None:
    """`make chart-readme` after changing values.yaml or its schema."""
    assert (CHART / "README.md").read_text() == chart_readme.readme(), "run `make chart-readme`"


def test_the_readme_lists_every_value_the_schema_takes_with_what_it_does() -> None:
    rows = readme_rows()
    assert set(rows) == {path for path, _ in chart_readme.leaves(chart().schema)}
    for path in ("extraEnv", "networkPolicy.dns.to", "queueRules.thresholds.queuedJobs"):
        assert path in rows
    undescribed = [path for path, row in rows.items() if row.rstrip(" |").endswith("|")]
    assert not undescribed, undescribed
    assert "| `replicaCount` | integer | `2` |" in rows["replicaCount"]
