"""`/queue` answers for the channel it is typed in when incidents open there (SLACK_ROUTES), and
for every channel when typed anywhere else (a DM); an action without an ID never guesses an
incident of another channel. Its live queue and `/queue jobs` show the runner types the channel
owns."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from redis.asyncio import Redis

from bot.actions.commands import run_command
from bot.actions.core import Actor
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.alerting.routes import Routing, parse_routes
from bot.domain.incident.incidents import GroupState, open_incident
from bot.storage.incident_store import Commit, IncidentStore
from sandbox.serve import RunningServer
from tests.support.cores import action_core
from tests.support.fakes.github_api import FakeGithub
from tests.support.jobs import CPU, GPU, github_metrics
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
AL = Actor("U1", "al")
CI, ROCM, GPUS, DM = "C0CIQ", "C0ROCMQ", "C0GPUQ", "D0ALICE"
BY_TEAM = Routing(parse_routes('[{"match": ["team=rocm"], "channel": "C0ROCMQ"}]'), CI)
# The demo's routing: the GPU team's channel takes its runner types, the rest stay in CI's.
BY_TYPE = Routing(
    parse_routes(
        json.dumps(
            [
                {"match": ['runner_type=~"linux\\.g5\\..*"'], "channel": GPUS},
                {"match": ['runner_type=~"linux\\.rocm\\..*"'], "channel": ROCM},
            ]
        )
    ),
    CI,
)


async def opened(store: IncidentStore, n: int, channel: str, runner_type: str = "") -> None:
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"group-{n}"
    if runner_type:
        payload["alerts"][0]["labels"]["runner_type"] = runner_type
    delivery = delivery_of(parse_notification("grafana", payload))
    incident = open_incident(delivery, incident_id=str(n), uid=f"u{n}", channel=channel, now=NOW)
    group = GroupState(incident_id=str(n))
    assert await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))


async def test_queue_answers_for_its_channel_and_for_all_from_a_dm(redis: Redis) -> None:
    store = IncidentStore(redis, "qp")
    await opened(store, 1, CI)
    await opened(store, 2, CI)
    core = action_core(redis, store, routing=BY_TEAM, clock=lambda: NOW)

    in_rocm = (await run_command(core, AL, "", channel=ROCM)).message
    assert "No open incidents here." in in_rocm and f"2 open in other channels: <#{CI}>" in in_rocm
    from_dm = (await run_command(core, AL, "", channel=DM)).message
    assert "*#1*" in from_dm and "*#2*" in from_dm, "a DM answers for every channel"
    in_ci = (await run_command(core, AL, "", channel=CI)).message
    assert "*#1*" in in_ci and "other channels" not in in_ci

    # No ID, and nothing open in ROCm's channel: it asks, naming where they are.
    asked = await run_command(core, AL, "ack", channel=ROCM)
    assert not asked.ok and "say which" in asked.message and f"in <#{CI}>" in asked.message

    await opened(store, 3, ROCM)
    acked = await run_command(core, AL, "ack", channel=ROCM)
    assert acked.ok and (await store.load("3")).incident.acknowledged.by == "U1"  # type: ignore[union-attr]


async def test_queue_and_its_jobs_answer_for_the_runner_types_the_channel_owns(
    redis: Redis, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    _, server = github_jobs
    store = IncidentStore(redis, "qp")
    # The GPU team's incident is open: `/queue jobs` in CI's channel once answered with its type.
    await opened(store, 1, GPUS, runner_type=GPU)
    core = action_core(redis, store, metrics=github_metrics(server), routing=BY_TYPE)
    gpu_line, cpu_line = f"• {GPU}: *40* queued", f"• {CPU}: *1* queued"

    in_gpu = (await run_command(core, AL, "", channel=GPUS)).message
    assert "live from GitHub" in in_gpu and "the types this channel owns" in in_gpu
    assert gpu_line in in_gpu and CPU not in in_gpu
    assert f"+1 runner type of other channels (<#{CI}>)" in in_gpu
    in_ci = (await run_command(core, AL, "", channel=CI)).message
    assert cpu_line in in_ci and GPU not in in_ci.split("*Open incidents*")[0]
    assert f"+1 runner type of other channels (<#{GPUS}>)" in in_ci
    from_dm = (await run_command(core, AL, "", channel=DM)).message
    assert gpu_line in from_dm and cpu_line in from_dm and "owns" not in from_dm

    jobs_in_ci = (await run_command(core, AL, "jobs", channel=CI)).message
    assert "the types this channel owns" in jobs_in_ci
    assert f"*`{CPU}`* · 1 queued" in jobs_in_ci and GPU not in jobs_in_ci
    assert "1 other runner type with queued jobs belongs to other channels" in jobs_in_ci
    jobs_in_gpu = (await run_command(core, AL, "jobs", channel=GPUS)).message
    assert f"*`{GPU}`* · 40 queued" in jobs_in_gpu and CPU not in jobs_in_gpu
    # Named, another channel's type is still answered: someone asked for it.
    asked = (await run_command(core, AL, f"jobs {GPU}", channel=CI)).message
    assert f"*`{GPU}`* · 40 queued" in asked and "owns" not in asked
    # A channel none of whose types queues says so, and where the others are.
    in_rocm = (await run_command(core, AL, "", channel=ROCM)).message
    assert "None of this channel's runner types is known." in in_rocm
    assert f"+2 runner types of other channels (<#{CI}>, <#{GPUS}>)" in in_rocm
    jobs_in_rocm = (await run_command(core, AL, "jobs", channel=ROCM)).message
    assert "No queued jobs seen for these runner types." in jobs_in_rocm
    assert "2 other runner types with queued jobs belong to other channels" in jobs_in_rocm
    # From a DM, the whole fleet's: the open incident's type first, as before.
    jobs_from_dm = (await run_command(core, AL, "jobs", channel=DM)).message
    assert f"*`{GPU}`* · 40 queued" in jobs_from_dm and "owns" not in jobs_from_dm
