"""PROMETHEUS_SELECTOR where the responder sees it: a served bot reading a Prometheus that holds
two clusters' same-named scale sets shows, in the incident's thread, the selected cluster's
queue and runners alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.arc_clusters import TwoClusters
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack

FIRING = "grafana/queue-alert-firing.json"
# The first rates need two of Prometheus's scrapes; slow on a loaded two-core machine.
LIVE_S = 120


@pytest.fixture(scope="module")
def clusters() -> Iterator[TwoClusters]:
    both = TwoClusters()
    try:
        yield both
    finally:
        both.stop()


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def test_the_thread_shows_the_selected_clusters_queue_alone(
    settings_for: Any, slack: Slack, clusters: TwoClusters
) -> None:
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=clusters.prometheus.url,
        prometheus_selector='cluster="prod"',
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=600,
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()

        # prod's 163 assigned on 120 busy runners: 43 queued (read from both clusters, 280).
        root = await eventually(
            lambda: (
                text_of(thread()[0])
                if f"{QUEUEING}: *43* queued" in text_of(thread()[0])
                and "busy 120/120" in text_of(thread()[0])
                else None
            ),
            what="the root with prod's queue",
            timeout=LIVE_S,
        )
    assert "live from Prometheus" in root
    assert "280" not in root and "/100" not in root, "nothing of staging's"
    assert HEALTHY not in root, "a healthy type stays out"
