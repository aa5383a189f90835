"""The optional components of deploy/kubernetes, each as an overlay adds it (tests/deploy/<name>):
the secrets as files of the mounted Secret, the ExternalSecret that makes that Secret, the
NetworkPolicy; what each says agrees with what the bot reads and calls."""

from __future__ import annotations

from pathlib import Path

import httpx
import jsonschema
import pytest

from bot.config import read_settings
from tests.deploy.manifests import (
    SECRET_EXAMPLES,
    SECRET_FILES,
    config,
    container,
    env_file_keys,
    known_variables,
    one,
    pod_spec,
    pod_template_labels,
    render,
    selects,
)

# The fields of the External Secrets Operator's ExternalSecret CRD (external-secrets.io/v1, the
# version it stores; v1beta1 is deprecated) that the component uses, with the CRD's constraints.
NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
EXTERNAL_SECRET = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "external-secrets.io/v1"},
        "kind": {"const": "ExternalSecret"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["secretStoreRef", "target", "dataFrom"],
            "properties": {
                "secretStoreRef": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "kind": {"enum": ["SecretStore", "ClusterSecretStore"]},
                        "name": {"type": "string", "maxLength": 253, "pattern": NAME},
                    },
                },
                "refreshInterval": {"type": "string", "pattern": r"^([0-9]+(ns|us|µs|ms|s|m|h))+$"},
                "target": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "maxLength": 253, "pattern": NAME},
                        "creationPolicy": {"enum": ["Owner", "Orphan", "Merge", "None"]},
                        "deletionPolicy": {"enum": ["Delete", "Merge", "Retain"]},
                    },
                },
                "dataFrom": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "extract": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["key"],
                                "properties": {"key": {"type": "string", "minLength": 1}},
                            }
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("variant", ["external-secret", "overlay"])
def test_the_external_secret_makes_the_secret_the_pods_read(variant: str) -> None:
    objects = render(variant)
    external = one(objects, "ExternalSecret")
    jsonschema.validate(external, EXTERNAL_SECRET)
    deployment = one(objects, "Deployment")
    assert external["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    main, volumes = container(objects), pod_spec(objects)["volumes"]
    read = [source["secretRef"]["name"] for source in main["envFrom"] if "secretRef" in source]
    read += [volume["secret"]["secretName"] for volume in volumes if "secret" in volume]
    assert read == [external["spec"]["target"]["name"]]
    # Owned: deleting the ExternalSecret deletes the Secret it made, as `kubectl delete -k` expects.
    assert external["spec"]["target"]["creationPolicy"] == "Owner"


@pytest.mark.parametrize("variant", SECRET_FILES)
def test_secret_files_variants_read_each_required_secret_from_the_mounted_secret(
    variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every <NAME>_FILE the pod sets names a key of the mounted Secret, and those keys are the
    ones the variant's secret.env.example asks for; with those files, `serve` starts."""
    objects = render(variant)
    main, pod = container(objects), pod_spec(objects)
    assert main["envFrom"] == [
        {"configMapRef": {"name": one(objects, "ConfigMap")["metadata"]["name"]}}
    ]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "queuepilot"
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    # Readable by the bot's user through its group, and by nobody else.
    assert volume["secret"]["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]

    files = {e["name"]: e["value"] for e in main["env"] if e["name"].endswith("_FILE")}
    assert set(files) == {e["name"] for e in main["env"]}
    keys = {name.removesuffix("_FILE"): path for name, path in files.items()}
    for key, path in keys.items():
        assert path == f"{mount['mountPath']}/{key}"
    required = set(env_file_keys(SECRET_EXAMPLES[SECRET_FILES[variant]], commented=False))
    assert set(keys) == required

    for name in known_variables():
        monkeypatch.delenv(name, raising=False)
    values = {"SLACK_BOT_TOKEN": "xoxb-0000-example", "SLACK_APP_TOKEN": "xapp-1-example"}
    for key in keys:
        (tmp_path / key).write_text(values.get(key, "example") + "\n")
        monkeypatch.setenv(f"{key}_FILE", str(tmp_path / key))
    settings = read_settings(_env_file=None, **{k.lower(): v for k, v in config(objects).items()})
    assert settings.socket_mode is (SECRET_FILES[variant] == "socket-mode")
    assert settings.slack_bot_token.get_secret_value() == "xoxb-0000-example"


def test_the_network_policy_lets_in_slack_prometheus_and_the_alerts_on_the_bots_port() -> None:
    objects = render("network-policy")
    policy = one(objects, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], pod_template_labels(objects))
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (rule,) = policy["ingress"]
    ports = {port["name"] for port in container(objects)["ports"]}
    assert [p["port"] for p in rule["ports"]] == ["http"] and "http" in ports
    sources = [f["namespaceSelector"]["matchLabels"] for f in rule["from"]]
    assert sources == [
        {"kubernetes.io/metadata.name": "ingress-nginx"},
        {"kubernetes.io/metadata.name": "monitoring"},
    ]


def allowed_out(policy: dict, namespace: str | None, port: int, protocol: str = "TCP") -> bool:
    """Whether an egress rule lets the pods reach `port` in `namespace` (None: outside the
    cluster)."""
    for rule in policy["egress"]:
        ports = rule.get("ports") or [{}]
        if not any(
            p.get("port", port) == port and p.get("protocol", "TCP") == protocol for p in ports
        ):
            continue
        if "to" not in rule:
            return True
        for peer in rule["to"]:
            labels = peer.get("namespaceSelector", {}).get("matchLabels", {})
            if namespace is not None and labels == {"kubernetes.io/metadata.name": namespace}:
                return True
    return False


def test_the_network_policy_lets_out_dns_https_and_every_service_config_env_names() -> None:
    objects = render("network-policy")
    policy = one(objects, "NetworkPolicy")["spec"]
    assert allowed_out(policy, "kube-system", 53, "UDP")
    assert allowed_out(policy, "kube-system", 53, "TCP")
    assert allowed_out(policy, None, 443)  # Slack, GitHub, the Kubernetes API
    assert not allowed_out(policy, None, 80)
    # Every in-cluster URL of config.env: http://<service>.<namespace>.svc[.cluster.local]:<port>.
    urls = [value for value in config(objects).values() if "://" in value]
    assert len(urls) >= 3
    for url in urls:
        parts = httpx.URL(url.replace("redis://", "http://"))
        host = parts.host.split(".")
        assert host[2] == "svc", url
        assert allowed_out(policy, host[1], parts.port or 80), url
