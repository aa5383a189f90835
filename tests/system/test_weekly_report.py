"""REPORT_SCHEDULE's weekly post, end to end: two replicas' schedulers fire at the same minute and
the capacity report is posted once in SLACK_CHANNEL, by the channel's sender, with its bar chart
of firing hours drawn by Slack (the emulator checks the block by Slack's limits); with
SLACK_ROUTES, a team's runner types are reported in the team's channel instead."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.alerting.alerts import RunnerQueue, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import GroupState, open_incident, resolve_manually
from bot.storage.incident_store import Commit, IncidentStore
from tests.support.incidents import changed
from tests.support.payloads import fixture_json
from tests.support.running import eventually, leader_of, run_bot
from tests.support.slack import CHANNEL, Slack


async def kept(
    store: IncidentStore, n: int, runner_type: str, hours: float, channel: str = CHANNEL
) -> None:
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"weekly-{n}"
    started = datetime.now(UTC) - timedelta(days=2, hours=n)
    incident = changed(
        open_incident(
            delivery_of(parse_notification("grafana", payload)),
            incident_id=f"w{n}",
            uid=f"u{n}",
            channel=channel,
            now=started,
        ),
        started_at=started,
        peak_types={runner_type: RunnerQueue(queued=30)},
    )
    group = GroupState(incident_id=incident.id)
    assert await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))
    done = resolve_manually(incident, by="U1", name="al", now=started + timedelta(hours=hours))
    assert await store.commit(Commit(done, version=1))


async def test_the_weekly_report_is_posted_once_with_its_chart(
    settings_for: Any, slack: Slack
) -> None:
    settings = settings_for(report_schedule="mon 09:00 Europe/London")
    async with run_bot(settings) as first, run_bot(settings) as second:
        leader = await leader_of(first, second)
        await kept(leader.bot.store, 1, "linux.2xlarge", 3)
        await kept(leader.bot.store, 2, "linux.g5.4xlarge.nvidia.gpu", 1.5)
        # The leader's scheduler fires at 09:00 Monday, and a successor's too after a failover
        # at 09:00: both jobs run.
        await asyncio.gather(
            first.bot.core.report.post_weekly(), second.bot.core.report.post_weekly()
        )
        report = await eventually(
            lambda: next(
                (
                    m
                    for m in slack.emulator.channel_messages(CHANNEL)
                    if "Capacity report" in m.text
                ),
                None,
            ),
            what="the weekly report",
            timeout=20,
        )
        await leader.bot.core.report.post_weekly()  # a scheduler firing again the same day
        assert await leader.bot.queue.waiting(CHANNEL) == 0, "nothing more queued to post"
    posted = [m for m in slack.emulator.channel_messages(CHANNEL) if "Capacity report" in m.text]
    assert len(posted) == 1, "once across replicas"
    text = str(report.blocks)
    assert "linux.2xlarge" in text and "3 h firing" in text
    [chart] = [b for b in report.blocks if b["type"] == "data_visualization"]
    bars = {p["label"]: p["value"] for p in chart["chart"]["series"][0]["data"]}
    assert bars == {"linux.2xlarge": 3.0, "linux.g5.4xlarge…gpu": 1.5}


GPU_CHANNEL = "C0GPUQ"


async def test_a_teams_runner_types_are_reported_in_its_own_channel(
    settings_for: Any, slack: Slack
) -> None:
    slack.emulator.add_channel(GPU_CHANNEL)
    routes = [{"match": ['runner_type=~"linux\\.g5\\..*"'], "channel": GPU_CHANNEL}]
    settings = settings_for(report_schedule="mon 09:00", slack_routes=json.dumps(routes))
    async with run_bot(settings) as first, run_bot(settings) as second:
        leader = await leader_of(first, second)
        await kept(leader.bot.store, 1, "linux.2xlarge", 3)
        await kept(leader.bot.store, 2, "linux.g5.4xlarge.nvidia.gpu", 1.5, GPU_CHANNEL)
        await asyncio.gather(
            first.bot.core.report.post_weekly(), second.bot.core.report.post_weekly()
        )

        def reports(channel: str) -> list[str]:
            return [
                str(m.blocks)
                for m in slack.emulator.channel_messages(channel)
                if "Capacity report" in m.text
            ]

        gpu = await eventually(
            lambda: reports(GPU_CHANNEL) or None, what="the GPU team's report", timeout=20
        )
        default = await eventually(
            lambda: reports(CHANNEL) or None, what="the default channel's report", timeout=20
        )
    assert len(gpu) == 1 and len(default) == 1, "once per channel across replicas"
    assert "linux.2xlarge" not in gpu[0]
    assert "linux.g5.4xlarge.nvidia.gpu" in gpu[0]
    assert "linux.2xlarge" in default[0] and "nvidia.gpu" not in default[0]


def schedule_at(at: datetime) -> str:
    return f"{at.strftime('%a').lower()} {at:%H:%M} UTC"


async def test_a_replica_started_within_the_hour_after_the_schedule_posts_it_once(
    settings_for: Any, slack: Slack
) -> None:
    """A deploy at 09:05 would miss a 09:00 schedule: the replica posts on start what is due,
    and a second replica started after it does not post it again."""
    settings = settings_for(report_schedule=schedule_at(datetime.now(UTC) - timedelta(minutes=10)))

    def posted() -> list[Any]:
        return [m for m in slack.emulator.channel_messages(CHANNEL) if "Capacity report" in m.text]

    async with run_bot(settings):
        await eventually(lambda: posted() or None, what="the report due 10 min ago", timeout=20)
    async with run_bot(settings) as later:
        await later.bot.core.report.post_weekly()  # as its own start did, or will
        assert await later.bot.queue.waiting(CHANNEL) == 0, "nothing more queued to post"
    assert len(posted()) == 1
