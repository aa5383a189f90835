"""queuepilot's own alert rules and dashboard (deploy/alerts/queuepilot-rules.yaml,
deploy/grafana/queuepilot.json): every metric either reads is one the bot exports, /metrics
serves what the counting rules read, and the dashboard is a Grafana dashboard whose every query
is PromQL (tests/deploy/test_alert_rules.py runs the rules' unit test)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from starlette.applications import Starlette

from bot.outbound.messages import NOT_A_MEMBER
from bot.telemetry import CHANNEL_REFUSALS, Telemetry
from handlers import health
from tests.support.servers import require_binary

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "alerts"
RULES = ALERTS / "queuepilot-rules.yaml"
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


async def served(telemetry: Telemetry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of /metrics, as the bot's route serves it: (name, labels) -> value."""
    app = Starlette()

    async def nothing() -> None:
        return None

    async def role() -> dict[str, Any]:
        return {}

    health.register(app, Redis(), telemetry, alive=lambda: True, backlogs=nothing, role=role)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://qp") as c:
        text = (await c.get("/metrics")).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_serve_what_the_counting_rules_read() -> None:
    """A labelled counter's series appears at its first increment, at 1, with the time it was
    created beside it; the channel refusals are there at 0 from the start."""
    telemetry = Telemetry()
    start = await served(telemetry)
    for error in CHANNEL_REFUSALS:
        assert start["queuepilot_slack_undeliverable_total", frozenset({("error", error)})] == 0
    assert set(NOT_A_MEMBER) <= set(CHANNEL_REFUSALS)
    restricted = frozenset({("error", "restricted_action")})
    assert ("queuepilot_slack_undeliverable_total", restricted) not in start

    before = time.time()
    telemetry.slack_undeliverable.labels("restricted_action").inc()
    telemetry.slack_rate_limited.labels("chat.update").inc()
    after = await served(telemetry)

    assert after["queuepilot_slack_undeliverable_total", restricted] == 1
    assert after["queuepilot_slack_undeliverable_created", restricted] >= before
    update = frozenset({("method", "chat.update")})
    assert after["queuepilot_slack_rate_limited_created", update] >= before
    read = {name for expr in rule_expressions() for name in METRIC.findall(expr)}
    created = {name for name in read if name.endswith("_created")}
    assert created and created <= {name for name, _ in after}


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
