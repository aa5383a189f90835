"""The production pipeline for Prometheus users: a fleet's queue metric, a Prometheus alerting
rule, Alertmanager, queuepilot. Nothing is faked but the fleet's numbers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from tests.support.running import WEBHOOK_TOKEN, eventually, run_bot
from tests.support.servers import Alertmanager, Prometheus, free_port
from tests.support.slack import CHANNEL, Slack

RULES = """
groups:
- name: ci-queue
  rules:
  - alert: RunnerQueueTimeHigh
    expr: ci_runner_queue_max_wait_minutes > 60
    labels:
      priority: P2
      team: ci-infra
    annotations:
      summary: Jobs are queueing in the autoscaled machines
      max_queue_time_mins: "{{ $value }}"
      queue_time_threshold: "60"
      runbook_url: https://runbooks.example.org/ci-queue
"""


class Fleet:
    """A CI fleet's exporter: the longest queue wait per runner type, set by the test."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.wait = Gauge(
            "ci_runner_queue_max_wait_minutes",
            "Longest wait of a queued job, by runner type.",
            ["runner_type"],
            registry=self.registry,
        )
        self.port = free_port()
        self.server, self.thread = start_http_server(
            self.port, addr="127.0.0.1", registry=self.registry
        )

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture
def pipeline() -> Iterator[tuple[Fleet, int]]:
    fleet = Fleet()
    bot_port = free_port()
    alertmanager = Alertmanager(
        f"http://127.0.0.1:{bot_port}/alerts/alertmanager", bearer_token=WEBHOOK_TOKEN
    )
    alertmanager.start()
    prometheus = Prometheus(
        target=f"127.0.0.1:{fleet.port}",
        alertmanager=f"127.0.0.1:{alertmanager.port}",
        rules=RULES,
    )
    prometheus.start()
    try:
        yield fleet, bot_port
    finally:
        prometheus.stop()
        alertmanager.stop()
        fleet.stop()


@pytest.mark.slow
async def test_a_queue_metric_over_its_threshold_becomes_a_thread_and_drains(
    settings_for: Any, slack: Slack, pipeline: tuple[Fleet, int]
) -> None:
    fleet, bot_port = pipeline
    fleet.wait.labels(runner_type="linux.4xlarge").set(0)
    async with run_bot(settings_for(), port=bot_port):
        fleet.wait.labels(runner_type="linux.4xlarge").set(114)
        roots = await eventually(
            lambda: slack.emulator.channel_messages(CHANNEL), what="alert to thread", timeout=30
        )
        root = roots[0].text + json.dumps(roots[0].blocks)
        assert "RunnerQueueTimeHigh" in root
        assert "114" in root, "the templated annotation carries the metric's value"
        assert "linux.4xlarge" in root, "the runner type label names the affected runners"

        fleet.wait.labels(runner_type="linux.4xlarge").set(3)
        await eventually(
            lambda: "resolved" in slack.emulator.channel_messages(CHANNEL)[0].text.lower(),
            what="queue drained, alert resolved, thread resolved",
            timeout=30,
        )
        assert len(slack.emulator.channel_messages(CHANNEL)) == 1
