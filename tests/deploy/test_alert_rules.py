"""The Prometheus rules (deploy/alerts): the example queue rules on ARC's metrics and queuepilot's
own. Prometheus's own `promtool` checks them and runs their unit tests, every alert has a case
that fires and one that stays quiet, a severity, and a runbook that is its own entry in
docs/operations.md; and the queue alert those tests expect, delivered by Alertmanager, gives the
incident its runner type, priority and numbers through the bot's own parser."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.backends.metrics.promql import RUNNER_POD, RUNNER_SET
from bot.domain.alerting.alerts import AlertFacts, RunnerQueue, parse_json_body, parse_notification
from bot.domain.alerting.delivery import facts_of
from tests.deploy.manifests import SECRET, render_values
from tests.support.servers import require_binary

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "alerts"
QUEUE_RULES, QUEUE_TEST = ALERTS / "queue-rules.yaml", ALERTS / "queue-rules.test.yaml"
# Each rule file and its unit test.
RULE_FILES = {
    QUEUE_RULES: QUEUE_TEST,
    ALERTS / "queuepilot-rules.yaml": ALERTS / "queuepilot-rules.test.yaml",
}
OPERATIONS = REPO / "docs" / "operations.md"
# The project's repository: the image is ghcr.io/queuepilot/queuepilot, published from it.
RUNBOOKS = "https://github.com/queuepilot/queuepilot/blob/main/docs/operations.md#"
SEVERITIES = {"critical", "warning", "info"}
# queueRules as an operator tunes them: not one threshold or label at its default.
TUNED = {
    "thresholds": {"queuedJobs": 30, "queuedFor": "5m", "listenerStalledFor": "4m"},
    "labels": {"priority": "P1", "team": "ci-platform"},
}
# A real Alertmanager's webhook body (0.25, captured): the envelope the alert arrives in.
ALERTMANAGER_BODY = REPO / "tests" / "fixtures" / "alertmanager" / "runner-queue-am-00-firing.json"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ALERTS,
    )


def rules(path: Path) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


def alerts(path: Path) -> list[dict[str, Any]]:
    return [rule for rule in rules(path) if "alert" in rule]


def checks(path: Path) -> list[dict[str, Any]]:
    """Every `alert_rule_test` entry of a unit test file."""
    cases = yaml.safe_load(path.read_text())["tests"]
    return [check for case in cases for check in case.get("alert_rule_test", [])]


def slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(markdown: str) -> dict[str, str]:
    """Anchor -> heading text, of every heading outside code blocks (a repeated heading's anchor
    gets -1, -2, ... as on GitHub)."""
    found: dict[str, str] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            anchor, n = slug(match[1]), 0
            while (anchor if not n else f"{anchor}-{n}") in found:
                n += 1
            found[anchor if not n else f"{anchor}-{n}"] = match[1]
    return found


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_checks_the_rules(path: Path) -> None:
    result = promtool("check", "rules", path.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("path", RULE_FILES.values(), ids=lambda p: p.name)
def test_the_rules_unit_test_passes(path: Path) -> None:
    result = promtool("test", "rules", path.name)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_alert_has_a_case_that_fires_and_one_that_stays_quiet(path: Path) -> None:
    names = {rule["alert"] for rule in alerts(path)}
    tested = checks(RULE_FILES[path])
    fired = {check["alertname"] for check in tested if check.get("exp_alerts")}
    quiet = {check["alertname"] for check in tested if not check.get("exp_alerts")}
    assert names - fired == set(), "alerts no case sees fire"
    assert names - quiet == set(), "alerts no case sees stay quiet"
    assert fired | quiet <= names, "cases of alerts the rules do not have"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_alert_has_a_severity_and_its_own_runbook_entry(path: Path) -> None:
    entries = headings(OPERATIONS.read_text())
    for rule in alerts(path):
        name = rule["alert"]
        assert rule["labels"].get("severity") in SEVERITIES, name
        url = rule["annotations"].get("runbook_url", "")
        assert url.startswith(RUNBOOKS), f"{name}: {url!r}"
        anchor = url.removeprefix(RUNBOOKS)
        assert anchor in entries, f"{name}: docs/operations.md has no heading #{anchor}"
        assert name in entries[anchor], f"{name}: #{anchor} is {entries[anchor]!r}"


def test_every_link_to_an_operations_anchor_names_a_heading() -> None:
    """The page's own links too, so that the anchors are read as GitHub makes them."""
    page = OPERATIONS.read_text()
    linked = set(re.findall(r"\]\(#([^)]+)\)", page))
    for path in RULE_FILES:
        linked |= {rule["annotations"]["runbook_url"].partition("#")[2] for rule in alerts(path)}
    assert linked - set(headings(page)) == set()


def test_the_stalled_listener_rule_reads_runner_pods_as_the_bot_does() -> None:
    """The pods that cannot start are named as queuepilot's diagnostics name runner pods."""
    [stuck] = [r for r in rules(QUEUE_RULES) if r.get("record", "").endswith("pods_stuck:count")]
    assert f'"runner_set", "{RUNNER_SET}", "pod",\n' in stuck["expr"]
    assert f'"{RUNNER_POD}"\n' in stuck["expr"]
    [stalled] = [r for r in alerts(QUEUE_RULES) if r["alert"] == "ARCListenerStalled"]
    assert f"unless on (namespace, runner_type) {stuck['record']}" in stalled["expr"]


def expected_alert(alertname: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the unit test expects of the rule's first firing alert."""
    found = [
        alert
        for check in checks(QUEUE_TEST)
        if check["alertname"] == alertname
        for alert in check.get("exp_alerts") or []
    ]
    assert found, alertname
    labels = {"alertname": alertname, **found[0]["exp_labels"]}
    return labels, found[0]["exp_annotations"]


def alertmanager_body(labels: dict[str, str], annotations: dict[str, str]) -> bytes:
    """What Alertmanager posts for that alert, grouped by alertname, as its webhook does."""
    body: dict[str, Any] = copy.deepcopy(json.loads(ALERTMANAGER_BODY.read_text()))
    alert = body["alerts"][0]
    alert.update(labels=labels, annotations=annotations, fingerprint="3b1f6e0a9c2d4f57")
    body.update(
        groupLabels={"alertname": labels["alertname"]},
        commonLabels=labels,
        commonAnnotations=annotations,
        groupKey=f'{{}}:{{alertname="{labels["alertname"]}"}}',
        alerts=[alert],
    )
    return json.dumps(body).encode()


def delivered(alertname: str) -> AlertFacts:
    """The facts of that alert's notification, parsed as the webhook and the intake do."""
    body = alertmanager_body(*expected_alert(alertname))
    return facts_of(parse_notification("alertmanager", parse_json_body(body)))


def test_the_queue_alert_gives_the_incident_its_runner_type_priority_and_numbers() -> None:
    facts = delivered("RunnerJobsQueueing")

    assert facts.title == "RunnerJobsQueueing"
    assert facts.priority == "P2"  # the priority label, before the severity beside it
    assert facts.team == "ci-infra"
    assert facts.runner_types == {"linux-large": RunnerQueue(queued=40, longest_wait_mins=20)}
    assert facts.numbers.max_queue_size == 40
    assert facts.numbers.max_queue_time_mins == 20
    assert facts.numbers.queue_size_threshold == 10
    assert facts.numbers.queue_size_over is None  # a threshold, not a condition's outcome
    assert facts.summary == "Jobs are queueing for linux-large runners"
    assert facts.description.startswith("40 jobs have waited for a linux-large runner")
    assert facts.runbook_url == f"{RUNBOOKS}runnerjobsqueueing"


def test_the_stalled_listener_alert_names_its_runner_type_and_queue() -> None:
    facts = delivered("ARCListenerStalled")

    assert facts.priority == "P2"
    assert facts.runner_types == {"linux-gpu": RunnerQueue(queued=8)}
    assert facts.numbers.max_queue_size == 8
    assert facts.runbook_url == f"{RUNBOOKS}arclistenerstalled"


def test_the_charts_tuned_queue_rules_pass_promtool_on_their_own_thresholds(tmp_path: Path) -> None:
    """queueRules' thresholds (30 jobs for 5 minutes, a stalled listener for 4) and labels,
    rendered by the chart, on the unit test's own fleet: linux-large passes 30 queued at minute
    16 and fires 5 minutes on, at 50; the stalled listeners fire 2 minutes later than at the
    defaults."""
    values = {**SECRET, "prometheusRule": {"queueRules": True}, "queueRules": TUNED}
    (queues,) = [o for o in render_values(values) if o["kind"] == "PrometheusRule"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": queues["spec"]["groups"]}))
    fleet = yaml.safe_load(QUEUE_TEST.read_text())["tests"][0]
    default = {
        check["alertname"]: check["exp_alerts"]
        for check in fleet["alert_rule_test"]
        if check["exp_alerts"]
    }
    labels = {"priority": "P1", "severity": "warning", "team": "ci-platform"}
    large = copy.deepcopy(default["RunnerJobsQueueing"])
    large[0]["exp_labels"].update(labels)
    said = large[0]["exp_annotations"]
    said.update(max_queue_size="50", queue_size_threshold="30")
    said["description"] = said["description"].replace("40 jobs", "50 jobs")
    stalled = copy.deepcopy(default["ARCListenerStalled"])
    for alert in stalled:
        alert["exp_labels"].update(labels)
    fleet["alert_rule_test"] = [
        {"eval_time": "20m", "alertname": "RunnerJobsQueueing", "exp_alerts": []},
        {"eval_time": "25m", "alertname": "RunnerJobsQueueing", "exp_alerts": large},
        {"eval_time": "18m", "alertname": "ARCListenerStalled", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "ARCListenerStalled", "exp_alerts": stalled},
    ]
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [fleet]}
    (tmp_path / "rules.test.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [require_binary("promtool"), "test", "rules", "rules.test.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
