"""What the queue cost, through the real paths: ARC's listener labelled with `job_workflow_ref`,
scraped by a real Prometheus, the bot's status tick reading the window's startup histogram,
Slack emulated, Redis. Jobs start with known waits while the incident is open; the summary says
the cost in one sentence per runner type, the postmortem says the same, and the job-seconds and
delayed jobs are counted for dashboards."""

from __future__ import annotations

import re
from typing import Any

from tests.support.fakes.arc_exporter import AT_MAXIMUM, QUEUEING, ArcFleet
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack, post_event, shown, slash

WORKFLOWS = "pytorch/pytorch/.github/workflows"
PULL = f"{WORKFLOWS}/pull.yml@refs/pull/101/merge"
TRUNK = f"{WORKFLOWS}/trunk.yml@refs/heads/main"


def replies(slack: Slack) -> list[str]:
    roots = slack.emulator.channel_messages(CHANNEL)
    return [shown(m) for m in slack.emulator.thread(CHANNEL, roots[0].ts)[1:]] if roots else []


def metric(text: str, name: str) -> float:
    found = re.search(rf'^{name}{{runner_type="{re.escape(QUEUEING)}"}} ([0-9.e+]+)$', text, re.M)
    return float(found[1]) if found else 0.0


async def test_the_summary_and_postmortem_say_what_the_queue_cost_its_jobs(
    settings_for: Any, slack: Slack
) -> None:
    fleet = ArcFleet(workflow_label="job_workflow_ref")
    fleet.queueing.set(**AT_MAXIMUM)
    for ref in (PULL, TRUNK):  # the series exist before the incident, as a fleet's do
        fleet.queueing.start(waited_s=1, workflow=ref)
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=2,
        status_tick_seconds=0.5,
    )
    try:
        async with run_bot(settings) as running:
            await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
            thread = await slack.first_thread()
            await eventually(lambda: "busy 20/20" in shown(thread()[0]), what="the live root")
            # While it is open: 6 pull jobs wait 7 min each, 3 trunk jobs 2 min.
            fleet.queueing.start(waited_s=420, count=6, workflow=PULL)
            fleet.queueing.start(waited_s=120, count=3, workflow=TRUNK)

            async def counted() -> float:
                text = (await running.http.get("/metrics")).text
                seconds = metric(text, "queuepilot_queue_wait_job_seconds_total")
                return seconds if seconds >= 6 * 420 else 0.0

            seconds = await eventually(counted, what="the cost read and counted", timeout=60)
            assert (await post_event(running.http, slash("resolve 1 anyway"))).status_code == 200
            summary = await eventually(
                lambda: next((r for r in replies(slack) if "Duration" in r), None),
                what="the summary",
                timeout=30,
            )
            lines = re.findall(r"💸 (Cost on [^\"]+?\(ARC's job start times\))", summary)
            assert len(lines) == 1, summary
            line = lines[0]
            assert line.startswith(f"Cost on {QUEUEING}: "), line
            assert "job-minutes past" in line, line
            assert "pull" in line and "1 PR" in line and "(ARC's job start times)" in line, line
            assert (await post_event(running.http, slash("postmortem 1"))).status_code == 200
            files = await eventually(
                lambda: [
                    f for m in slack.emulator.thread(CHANNEL, thread()[0].ts) for f in m.files
                ],
                what="the postmortem",
                timeout=30,
            )
            markdown = (slack.emulator.file_bytes(files[0]["id"]) or b"").decode()
            assert line in markdown.replace("\\", ""), "the postmortem says the same sentence"
            text = (await running.http.get("/metrics")).text
            assert metric(text, "queuepilot_incident_jobs_delayed_total") >= 6
            assert seconds >= 6 * 420
    finally:
        fleet.stop()


async def test_where_no_source_tells_the_cost_the_summary_says_what_would(
    settings_for: Any, slack: Slack
) -> None:
    """The alert's own numbers count the jobs still queued, never what a started one waited."""
    settings = settings_for(status_interval_seconds=1, status_tick_seconds=0.2)
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        await slack.first_thread()
        await eventually(
            lambda: any("Status update" in r for r in replies(slack)), what="a status", timeout=30
        )
        assert (await post_event(running.http, slash("resolve 1 anyway"))).status_code == 200
        summary = await eventually(
            lambda: next((r for r in replies(slack) if "Duration" in r), None),
            what="the summary",
            timeout=30,
        )
        assert (
            "Cost not known: the alert does not say what each job waited: GitHub's workflow_job "
            "deliveries (GITHUB_WEBHOOK_SECRET), ARC's metrics through Prometheus or the HUD's "
            "queued jobs (METRICS_BACKEND=hud) do"
        ) in summary, summary
