"""queuepilot's own alert rules and dashboard (deploy/alerts/queuepilot-rules.yaml,
deploy/grafana/queuepilot.json): every metric either reads is one the bot exports, /metrics
serves what the counting rules read, and the dashboard is a Grafana dashboard whose every query
is PromQL and shows queuepilot's own series only (tests/deploy/test_alert_rules.py runs the
rules' unit test)."""

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
# Scrape targets as a ServiceMonitor labels them (namespace, pod, instance, job): queuepilot's two
# replicas; beside them another exporter, and a sidecar in one of their pods scraped apart (its
# own port); and queuepilot's staging deployment.
Target = tuple[str, str, str, str]
QUEUEPILOT: list[Target] = [
    ("ci-bots", "queuepilot-7f9c6d5b8-2xk4p", "10.42.1.17:3000", "queuepilot"),
    ("ci-bots", "queuepilot-7f9c6d5b8-m8q2z", "10.42.2.23:3000", "queuepilot"),
]
OTHERS: list[Target] = [
    ("ci-bots", "redis-exporter-6b7c9d8f5-k2m4p", "10.42.1.40:9121", "redis-exporter"),
    ("ci-bots", "queuepilot-7f9c6d5b8-2xk4p", "10.42.1.17:9090", "ci-bots/sidecar"),
]
STAGING: Target = ("staging", "queuepilot-5b8d7c4f9-t6w5n", "10.42.3.9:3000", "queuepilot")


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
    # One deployment: its namespace, and its job (the Service scraped) within it.
    assert variables == {"datasource", "namespace", "job"}
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
    asked = [filled(q, "queuepilot") for q in queries()]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": expr} for n, expr in enumerate(asked)
    ]}]}  # fmt: skip
    (tmp_path / "dashboard-rules.yaml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", "dashboard-rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def filled(query: str, namespace: str = "ci-bots", job: str = "queuepilot") -> str:
    return (
        query.replace("$namespace", namespace).replace("$job", job)
        .replace("$__rate_interval", "2m")
    )  # fmt: skip


def exporting(target: Target, names: set[str]) -> list[dict[str, str]]:
    """promtool's input series of one scrape target: its process, as every prometheus_client
    exports it, and the queuepilot metrics in `names`."""
    namespace, pod, instance, job = target
    labels = f'namespace="{namespace}",pod="{pod}",instance="{instance}",job="{job}"'
    process = {
        "process_resident_memory_bytes": "1.2e8x10",
        "process_cpu_seconds_total": "0+6x10",
        "process_open_fds": "12x10",
        "process_start_time_seconds": "1.7e9x10",
    }
    own = {name: "0+1x10" if name.endswith("_total") else "1x10" for name in names}
    return [
        {"series": f"{name}{{{labels}}}", "values": values}
        for name, values in (process | own).items()
    ]


def test_every_panel_shows_queuepilot_s_own_series_only(tmp_path: Path) -> None:
    """promtool runs every query where queuepilot's namespace also holds another exporter and a
    sidecar scraped apart in one of its pods. Over those alone (queuepilot exporting only in
    another namespace) a query finds nothing, but the 0 a stat shows for "none"; beside
    queuepilot's replicas, a panel by pod shows each replica once."""
    read = {name for query in queries() for name in METRIC.findall(query)}
    own = {name for name in read if name.startswith("queuepilot_")}
    at = "10m"
    alone = [
        {
            "expr": filled(query),
            "eval_time": at,
            "exp_samples": [{"labels": "{}", "value": 0}] if "or vector(0)" in query else [],
        }
        for query in queries()
    ]
    by_pod = [
        {
            "expr": f"count by (pod, instance) ({filled(target['expr'])})",
            "eval_time": at,
            "exp_samples": [
                {"labels": f'{{pod="{pod}",instance="{instance}"}}', "value": 1}
                for _, pod, instance, _ in QUEUEPILOT
            ],
        }
        for panel in panels()
        for target in panel["targets"]
        if "{{pod}}" in target.get("legendFormat", "")
    ]
    assert by_pod, "no panel by pod"
    others = [s for target in OTHERS for s in exporting(target, set())]
    unit = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": others + exporting(STAGING, own),
                "promql_expr_test": alone,
            },
            {
                "interval": "1m",
                "input_series": others + [s for t in QUEUEPILOT for s in exporting(t, own)],
                "promql_expr_test": by_pod,
            },
        ],
    }
    (tmp_path / "dashboard.test.yaml").write_text(yaml.safe_dump(unit))
    result = promtool("test", "rules", "dashboard.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_metric_read_is_one_the_bot_exports(source: str) -> None:
    expressions = rule_expressions() if source == "rules" else queries()
    read = {name for expr in expressions for name in METRIC.findall(expr)}
    assert read, "no metric read"
    assert read - exported() == set()
