"""queuepilot's own alert rules and dashboard (deploy/alerts/queuepilot-rules.yaml,
deploy/grafana/queuepilot.json): Prometheus's `promtool` checks the rules and runs their unit
test, the dashboard is a Grafana dashboard whose every query is PromQL, and every metric either
reads is one the bot exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.telemetry import Telemetry
from tests.support.servers import require_binary

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "alerts"
RULES, RULES_TEST = ALERTS / "queuepilot-rules.yaml", ALERTS / "queuepilot-rules.test.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "queuepilot.json"
METRIC = re.compile(r"\b((?:queuepilot|process|python)_[a-z0-9_]+)\b")


def promtool(*args: str, cwd: Path = ALERTS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def exported() -> set[str]:
    """Every series name the bot's /metrics can show (a counter as `_total` and `_created`)."""
    names = set()
    for family in Telemetry().registry.collect():
        if family.type == "counter":
            names |= {f"{family.name}_total", f"{family.name}_created"}
        elif family.type == "info":
            names.add(f"{family.name}_info")
        else:
            names.add(family.name)
    return names


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_unit_test_passes() -> None:
    result = promtool("test", "rules", RULES_TEST.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_unit_test_sees_every_alert_fire() -> None:
    cases = yaml.safe_load(RULES_TEST.read_text())["tests"]
    fired = {
        check["alertname"]
        for case in cases
        for check in case["alert_rule_test"]
        if check.get("exp_alerts")
    }
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert fired == {rule["alert"] for group in groups for rule in group["rules"]}


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    model = dashboard()
    assert model["title"] and model["uid"] and isinstance(model["schemaVersion"], int)
    variables = {v["name"] for v in model["templating"]["list"]}
    assert variables == {"datasource", "namespace"}
    everything = model["panels"]
    assert len({p["id"] for p in everything}) == len(everything), "panel IDs are unique"
    cells: set[tuple[int, int]] = set()
    for panel in everything:
        box = panel["gridPos"]
        assert box["x"] >= 0 and box["x"] + box["w"] <= 24, panel["title"]  # Grafana's 24 columns
        mine = {
            (x, y)
            for x in range(box["x"], box["x"] + box["w"])
            for y in range(box["y"], box["y"] + box["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
    for panel in panels():
        assert panel["type"] in {"stat", "timeseries"}, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert [t["refId"] for t in panel["targets"]] == [
            chr(65 + i) for i in range(len(panel["targets"]))
        ]
        used = set(re.findall(r"\$(\w+)", json.dumps(panel["targets"])))
        assert used <= variables | {"__rate_interval"}, panel["title"]


def test_every_dashboard_query_is_promql(tmp_path: Path) -> None:
    """promtool parses each query, written as a recording rule (the variables filled in)."""
    filled = [
        q.replace("$namespace", "queuepilot").replace("$__rate_interval", "2m") for q in queries()
    ]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": expr} for n, expr in enumerate(filled)
    ]}]}  # fmt: skip
    (tmp_path / "dashboard-rules.yaml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", "dashboard-rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_metric_read_is_one_the_bot_exports(source: str) -> None:
    expressions = rule_expressions() if source == "rules" else queries()
    read = {name for expr in expressions for name in METRIC.findall(expr)}
    assert read, "no metric read"
    assert read - exported() == set()
