"""The workflows behind jobs OOMKilled, end to end: a real Prometheus scrapes runner pods killed
for memory (`sandbox.runner_pods`, the pods named as ARC names them), GitHub lists the jobs that ran
on them under those names (`runner_name`), and the served bot's diagnostics, read back from
Slack, name the workflows with their kills; the record the weekly report reads holds each kill
once, however many readings saw it, and `/queue report` says them. Kills whose pods ARC deleted
before any scrape are said from their nodes' kernel counter (node-exporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from bot.actions.commands import run_command
from bot.actions.core import Actor
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.arc_exporter import ArcFleet
from tests.support.fakes.github_api import FakeGithub
from tests.support.jobs import ago
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack, diagnosed

LIVE_S = 60


@pytest.fixture
def killed_fleet() -> Iterator[tuple[ArcFleet, list[str]]]:
    """The queueing scale set with 3 jobs OOMKilled: two on one runner pod's name (ARC recreated
    the pod under it, a new uid), one on another; kube-state-metrics scraped."""
    fleet = ArcFleet(pods=("ksm",))
    name = fleet.queueing.name
    pods = [f"{name}-runner-k7x2p", f"{name}-runner-m4q9z"]
    # The killed pods kept served, as a scrape sometimes catches them before ARC deletes them:
    # only those name the workflows (node-exporter, not scraped here, counts kills unnamed).
    fleet.pods.set(
        name, running=4, oom_killed=3, oom_names=(pods[0], pods[0], pods[1]), oom_seen_s=None
    )
    fleet.pods.set(fleet.healthy.name, running=2)
    try:
        yield fleet, pods
    finally:
        fleet.stop()


@pytest.fixture
def github(killed_fleet: tuple[ArcFleet, list[str]]) -> Iterator[tuple[FakeGithub, RunningServer]]:
    """The jobs that ran on those pods: `pull` on the first (failed, as GitHub ends a job whose
    runner died), `trunk` still in progress on the second, in runs still in progress."""
    _, pods = killed_fleet
    fake = FakeGithub(page_size=100)
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    job, labels = FakeGithub.job, ["self-hosted", "linux.2xlarge"]
    fake.run("pytorch/pytorch", 41, "in_progress", [
        job(4101, labels, "completed", ago(20), conclusion="failure", started_at=ago(18),
            completed_at=ago(2), runner_name=pods[0]),
        job(4102, labels, "queued", ago(1), name="linux-jammy / test (2, 5)"),
    ], name="pull")  # fmt: skip
    fake.run("pytorch/pytorch", 42, "in_progress", [
        job(4201, labels, "in_progress", ago(15), started_at=ago(14), runner_name=pods[1]),
    ], name="trunk", event="push", head_branch="main")  # fmt: skip
    try:
        yield fake, server
    finally:
        server.stop()


async def test_diagnostics_name_the_workflows_of_the_jobs_oomkilled_and_each_kill_is_kept_once(
    settings_for: Any,
    slack: Slack,
    killed_fleet: tuple[ArcFleet, list[str]],
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fleet, _ = killed_fleet
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        prometheus_rate_window="30s",
        jobs_backend="github",
        github_token="ghp-test",
        github_api_url=github[1].url,
        github_repos="pytorch/pytorch",
        metrics_interval_seconds=1,
        status_interval_seconds=1,
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        thread = await slack.first_thread()
        readings, redis = running.bot.readings, running.bot.redis
        keys = running.bot.store.keys

        async def judged_kills() -> datetime | None:
            """The time of the latest reading whose judged OOM kills are named."""
            reading = await readings.stored()
            types = reading.fleet.runner_types.values() if reading and reading.fleet else ()
            named = any(m.pods and m.pods.oom_workflows for m in types)
            return reading.tried_at if reading and named else None

        first = await eventually(judged_kills, what="a reading naming the kills", timeout=LIVE_S)
        report = await diagnosed(running, slack, thread()[0].ts)
        assert "OOMKilled 3 times in 30 min (pull 2, trunk 1)" in report, report
        assert "JOBS_BACKEND" not in report, "no hint where the jobs name the workflows"

        async def refreshed() -> bool:
            return (await judged_kills() or first) > first

        await eventually(refreshed, what="a later reading", timeout=LIVE_S)
        kept = await redis.hgetall(keys.oom_kills)
        answer = await run_command(running.bot.core, Actor("U1", "al"), "report 7d")
    assert len(kept) == 3, "each (pod, uid) once, across readings"
    assert sorted(json.loads(v)["w"] for v in kept.values()) == ["pull", "pull", "trunk"]
    # The weekly report's numbers, from that record.
    assert answer.ok and "3 OOM kills (pull 2, trunk 1)" in answer.message, answer.message


@pytest.fixture
def deleted_fleet() -> Iterator[ArcFleet]:
    """The queueing scale set's runners on a node node-exporter watches; kube-state-metrics and
    node-exporter scraped."""
    fleet = ArcFleet(pods=("ksm", "node"))
    fleet.pods.set(fleet.queueing.name, running=4)
    fleet.pods.set(fleet.healthy.name, running=2)
    try:
        yield fleet
    finally:
        fleet.stop()


async def test_kills_arc_deleted_before_any_scrape_are_said_from_their_nodes(
    settings_for: Any, slack: Slack, deleted_fleet: ArcFleet
) -> None:
    fleet = deleted_fleet

    async def node_scraped() -> bool:
        async with httpx.AsyncClient(timeout=5) as client:
            answer = await client.get(
                f"{fleet.prometheus.url}/api/v1/query",
                params={"query": "count(node_vmstat_oom_kill)"},
            )
        return bool(answer.json()["data"]["result"])

    await eventually(node_scraped, what="the nodes' OOM kill counter scraped", timeout=30)
    # 7 jobs killed, their pods deleted by ARC before kube-state-metrics was scraped, as most are.
    fleet.pods.set(fleet.queueing.name, oom_killed=7, oom_seen_s=0)
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=1,
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        thread = await slack.first_thread()

        async def judged_kills() -> bool:
            reading = await running.bot.readings.stored()
            types = reading.fleet.runner_types.values() if reading and reading.fleet else ()
            return any(m.pods and m.pods.node_oom_kills for m in types)

        await eventually(judged_kills, what="a reading with the nodes' kills", timeout=LIVE_S)
        report = await diagnosed(running, slack, thread()[0].ts)
    assert "7 OOM kills in 30 min on the nodes these runners ran on" in report, report
    assert "raise the runner's memory" in report
