"""The NetworkPolicy (networkPolicy.enabled): the bot's pods take Slack's requests, the scrapes and
the alerts on their port, and reach DNS, HTTPS and every in-cluster service their settings name."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.deploy.manifests import (
    SECRET,
    config,
    container,
    one,
    pod_template_labels,
    render,
    render_values,
    selects,
)

POLICY_CASES = ["network-policy", "ci-bots"]


def allowed_in(policy: dict[str, Any]) -> list[dict[str, str]]:
    (rule,) = policy["ingress"]
    return [peer["namespaceSelector"]["matchLabels"] for peer in rule["from"]]


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


@pytest.mark.parametrize("case", POLICY_CASES)
def test_the_policy_lets_in_slack_prometheus_and_the_alerts_on_the_bots_port(case: str) -> None:
    objects = render(case)
    policy = one(objects, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], pod_template_labels(objects))
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    ports = {port["name"] for port in container(objects)["ports"]}
    assert [p["port"] for p in policy["ingress"][0]["ports"]] == ["http"] and "http" in ports
    assert allowed_in(policy) == [
        {"kubernetes.io/metadata.name": "ingress-nginx"},
        {"kubernetes.io/metadata.name": "monitoring"},
    ]


def test_in_socket_mode_no_ingress_controller_gets_in() -> None:
    """Socket Mode has no inbound Slack route: only the scrapes and the alerts come in."""
    values = {**SECRET, "socketMode": {"enabled": True}, "networkPolicy": {"enabled": True}}
    policy = one(render_values(values), "NetworkPolicy")["spec"]
    assert allowed_in(policy) == [{"kubernetes.io/metadata.name": "monitoring"}]


def test_in_socket_mode_the_ingress_controller_gets_in_for_githubs_webhook_when_published() -> None:
    values = {
        **SECRET,
        "socketMode": {"enabled": True},
        "networkPolicy": {"enabled": True},
        "ingress": {"githubWebhook": True},
    }
    policy = one(render_values(values), "NetworkPolicy")["spec"]
    assert allowed_in(policy) == [
        {"kubernetes.io/metadata.name": "ingress-nginx"},
        {"kubernetes.io/metadata.name": "monitoring"},
    ]


@pytest.mark.parametrize("case", POLICY_CASES)
def test_the_policy_lets_out_dns_https_and_every_service_the_settings_name(case: str) -> None:
    objects = render(case)
    policy = one(objects, "NetworkPolicy")["spec"]
    assert allowed_out(policy, "kube-system", 53, "UDP")
    assert allowed_out(policy, "kube-system", 53, "TCP")
    assert allowed_out(policy, None, 443)  # Slack, GitHub, the Kubernetes API
    assert not allowed_out(policy, None, 80)
    # Every in-cluster URL of the settings: http://<service>.<namespace>.svc[.cluster.local]:<port>.
    urls = [value for value in config(objects).values() if "://" in value]
    assert len(urls) >= 3
    for url in urls:
        parts = httpx.URL(url.replace("redis://", "http://"))
        host = parts.host.split(".")
        assert host[2] == "svc", url
        assert allowed_out(policy, host[1], parts.port or 80), url


def test_the_namespaces_and_extra_rules_come_from_values() -> None:
    """Another ingress controller, Redis elsewhere, a scaler webhook on plain HTTP."""
    extra = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ci"}}}]}
    extra["ports"] = [{"port": 8080, "protocol": "TCP"}]
    values = {
        **SECRET,
        "config": {"REDIS_URL": "redis://redis-master.data.svc.cluster.local:6379/0"},
        "networkPolicy": {
            "enabled": True,
            "ingressNamespace": "traefik",
            "redisNamespace": "data",
            "extraEgress": [extra],
        },
    }
    policy = one(render_values(values), "NetworkPolicy")["spec"]
    assert {"kubernetes.io/metadata.name": "traefik"} in allowed_in(policy)
    assert allowed_out(policy, "data", 6379) and not allowed_out(policy, "redis", 6379)
    assert allowed_out(policy, "ci", 8080)
