"""queuepilot watched: the ServiceMonitor scrapes /metrics on the bot's Service, the PrometheusRules
carry exactly the groups of the rule files in the chart, and the dashboard's ConfigMap holds
exactly the dashboard file, labelled for Grafana's sidecar."""

from __future__ import annotations

import json

import yaml

from tests.deploy.manifests import (
    CHART,
    SECRET,
    one,
    render,
    render_values,
    selects,
    served_routes,
)

RULES = {
    "queuepilot": CHART / "alerts" / "queuepilot-rules.yaml",
    "queuepilot-queues": CHART / "alerts" / "queue-rules.yaml",
}
DASHBOARD = CHART / "dashboards" / "queuepilot.json"


def test_the_service_monitor_scrapes_the_bots_metrics_on_its_service() -> None:
    objects = render("monitoring")
    monitor, service = one(objects, "ServiceMonitor"), one(objects, "Service")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    ports = {port["name"] for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in ports
        assert endpoint["path"] in served_routes(socket_mode=False)["GET"]
        assert endpoint["interval"] == "30s"


def test_the_prometheus_rules_are_the_rule_files_groups() -> None:
    """Read both ways: the rule file as YAML, the PrometheusRule as the API server gets it."""
    rules = [o for o in render("monitoring") if o["kind"] == "PrometheusRule"]
    assert {rule["metadata"]["name"] for rule in rules} == set(RULES)
    for rule in rules:
        shipped = yaml.safe_load(RULES[rule["metadata"]["name"]].read_text())
        assert rule["spec"] == {"groups": shipped["groups"]}


def test_the_queue_rules_are_shipped_only_when_asked_for() -> None:
    """Their thresholds are the user's to tune."""
    objects = render_values({**SECRET, "prometheusRule": {"enabled": True}})
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert rule["metadata"]["name"] == "queuepilot"


def test_kube_prometheus_stack_selects_the_monitor_and_the_rules() -> None:
    """Its Prometheus selects ServiceMonitors and PrometheusRules by its release's label."""
    objects = render("ci-bots")
    selected = [o for o in objects if o["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert len(selected) == 3
    for obj in selected:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack", obj["kind"]


def test_the_dashboard_config_map_holds_the_dashboard_for_grafanas_sidecar() -> None:
    objects = render("monitoring")
    (dashboard,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "queuepilot.json" in o.get("data", {})
    ]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"] == {"queuepilot.json": DASHBOARD.read_text()}
    assert json.loads(dashboard["data"]["queuepilot.json"]) == json.loads(DASHBOARD.read_text())


def test_the_dashboards_labels_and_annotations_come_from_values() -> None:
    values = {
        **SECRET,
        "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "CI"}},
    }
    (dashboard,) = [
        o
        for o in render_values(values)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
    ]
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "CI"}
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
