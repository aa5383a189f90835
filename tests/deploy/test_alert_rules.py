"""The example Prometheus rules: Prometheus's own `promtool` checks them and runs their unit test,
and the alert that test expects, delivered by Alertmanager, gives the incident its runner type,
priority and numbers through the bot's own parser."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from bot.domain.alerts import AlertFacts, RunnerQueue, parse_json_body, parse_notification
from bot.domain.delivery import facts_of
from tests.support.servers import require_binary

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "alerts"
RULES, RULES_TEST = ALERTS / "queue-rules.yaml", ALERTS / "queue-rules.test.yaml"
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


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_unit_test_passes() -> None:
    result = promtool("test", "rules", RULES_TEST.name)
    assert result.returncode == 0, result.stdout + result.stderr


def expected_alert(alertname: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the unit test expects of the rule's firing alert (the one
    case with a non-empty `exp_alerts`)."""
    cases = yaml.safe_load(RULES_TEST.read_text())["tests"]
    found = [
        alert
        for case in cases
        for check in case.get("alert_rule_test", [])
        if check["alertname"] == alertname
        for alert in check.get("exp_alerts") or []
    ]
    assert len(found) == 1, found
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
    assert facts.priority == "P2"
    assert facts.team == "ci-infra"
    assert facts.runner_types == {"linux-large": RunnerQueue(queued=40, longest_wait_mins=20)}
    assert facts.numbers.max_queue_size == 40
    assert facts.numbers.max_queue_time_mins == 20
    assert facts.numbers.queue_size_threshold == 10
    assert facts.numbers.queue_size_over is None  # a threshold, not a condition's outcome
    assert facts.summary == "Jobs are queueing for linux-large runners"
    assert facts.description.startswith("40 jobs have waited for a linux-large runner")
    assert facts.runbook_url == "https://example.com/runbooks/ci-runner-queue"


def test_the_stalled_listener_alert_names_its_runner_type_and_queue() -> None:
    facts = delivered("ARCListenerStalled")

    assert facts.priority == "P2"
    assert facts.runner_types == {"linux-gpu": RunnerQueue(queued=8)}
    assert facts.numbers.max_queue_size == 8
    assert facts.runbook_url == "https://example.com/runbooks/arc-listener-stalled"
