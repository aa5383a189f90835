"""Run diagnostics from Slack: the report lands in the thread, says what it cannot know from the
alert alone, and a double click posts it once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from redis.asyncio import Redis

from bot.actions.flow import Actor
from bot.backends.http import BackendError
from bot.backends.kube import kube_access
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.queue_cost.jobs import QueuedJob, Trigger
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.scale.scaling import ScaleTarget
from bot.storage.fleet import JobArrivals
from bot.storage.incident_store import IncidentStore
from sandbox.serve import RunningServer
from tests.support.cores import action_core
from tests.support.fakes.github_api import FakeGithub
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.jobs import GPU, github_metrics
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, open_incident
from tests.support.slack import (
    CHANNEL,
    Slack,
    click,
    ephemeral_texts,
    post_event,
    slash,
    thread_texts,
)


async def test_diagnose_button_posts_the_report_in_the_thread(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    assert (await click(running_bot, root, "incident_diagnose")).status_code == 200
    reports = await eventually(
        lambda: [t for t in thread_texts(slack, root.ts) if "Diagnostics" in t], what="report"
    )
    report = reports[0]
    assert "from the alert's own numbers" in report
    # What the alert's numbers cannot tell is said once, every check named in it, after the
    # conclusion and the next step.
    assert report.count("❔ *Not in these numbers*") == 1
    for check in (
        "runner utilization",
        "job arrival rate",
        "job duration",
        "resource constraints",
        "autoscaling configuration",
    ):
        assert f"{check} needs" in report, check
    assert "*Likely cause:* not determined" in report
    assert "*Next:* +14 runners would drain it in 30 min" in report
    assert report.index("*Likely cause:*") < report.index("*Next:*") < report.index("❔")
    await eventually(
        lambda: any(
            "Diagnostics of incident 1 are in its thread" in t for t in ephemeral_texts(slack)
        )
    )
    # The root names the last action.
    await eventually(
        lambda: (
            "Diagnostics: likely cause not determined"
            in json.dumps(
                next(m for m in slack.emulator.channel_messages(CHANNEL) if m.ts == root.ts).blocks
            )
        ),
        what="root shows the action",
    )


async def test_queue_diagnose_and_a_second_run_right_after(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    await post_event(running_bot.http, slash("diagnose"))
    await eventually(lambda: any("Diagnostics" in t for t in thread_texts(slack, root.ts)))
    await post_event(running_bot.http, slash("diagnose 1"))
    await eventually(
        lambda: any("Diagnostics were just run" in t for t in ephemeral_texts(slack)),
        what="the second run refused",
    )
    assert sum("Diagnostics ·" in t for t in thread_texts(slack, root.ts)) == 1


class FailingMetrics:
    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        raise BackendError("Prometheus is unreachable at http://prom:9090", retryable=True)

    async def aclose(self) -> None:
        return None


async def test_a_failing_metrics_backend_leaves_the_report_on_the_alerts_numbers(
    redis_url: str,
) -> None:
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import GroupState
    from bot.domain.incident.incidents import open_incident as opened
    from bot.storage.incident_store import Commit

    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    payload = fixture_json("grafana/queue-alert-firing.json")
    incident = opened(
        delivery_of(parse_notification("grafana", payload)),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=datetime.now(UTC),
    )
    await store.commit(
        Commit(incident, group=GroupState(incident_id="1"), group_hash=incident.group_hash)
    )
    core = action_core(redis, store, metrics=FailingMetrics())
    outcome = await core.diagnosing.diagnose(Actor("U1", "al"), "1:u1")
    assert outcome.ok
    waiting = list((await redis.hgetall(store.keys.outbox_items("1"))).values())
    text = json.dumps(waiting, ensure_ascii=False)
    assert "Prometheus is unreachable at http://prom:9090" in text
    assert "these are the alert" in text
    await redis.aclose()


class FrozenListener:
    """ARC's numbers while a listener takes no jobs: 163 assigned, never changing, 4 idle."""

    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        stalled = RunnerTypeMetrics(
            queued=43,
            assigned=163,
            registered=100,
            busy=96,
            idle=4,
            maximum=120,
            desired=120,
            longest_wait_mins=38,
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": stalled})

    async def aclose(self) -> None:
        return None


async def test_a_listener_frozen_for_a_quarter_hour_is_named_and_the_advice_is_to_restart_it(
    redis_url: str,
) -> None:
    """The readings of every minute are kept; after 17 of them with the same assigned count and
    idle runners, the report names the stalled listener instead of advising to scale."""
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import GroupState
    from bot.domain.incident.incidents import open_incident as opened
    from bot.storage.incident_store import Commit

    now = [datetime(2026, 11, 23, 14, 0, tzinfo=UTC)]
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    payload = fixture_json("grafana/queue-alert-firing.json")
    incident = opened(
        delivery_of(parse_notification("grafana", payload)),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=now[0],
    )
    await store.commit(
        Commit(incident, group=GroupState(incident_id="1"), group_hash=incident.group_hash)
    )
    core = action_core(redis, store, metrics=FrozenListener(), clock=lambda: now[0])
    for _ in range(17):  # a reading a minute, as the status tick takes them
        await core.diagnosing.readings.latest()
        now[0] += timedelta(minutes=1)
    outcome = await core.diagnosing.diagnose(Actor("U1", "al"), "1:u1")
    assert outcome.ok and "likely cause Listener stalled" in outcome.message
    waiting = list((await redis.hgetall(store.keys.outbox_items("1"))).values())
    text = "".join(waiting)
    assert "163 jobs assigned and unchanged for 17 min while 4 runners idle" in text
    assert "restart the ARC listener of linux.2xlarge" in text
    # The root shows what diagnostics read, not an older status's numbers: one "now".
    diagnosed = await store.get("1")
    assert diagnosed is not None and diagnosed.live is not None
    assert diagnosed.live.at == now[0] and diagnosed.live.runner_types["linux.2xlarge"].busy == 96
    await redis.aclose()


async def test_the_report_names_the_surging_workflow_with_its_jobs_and_advises_deferring_it(
    redis_url: str, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    """38 periodic jobs arrived in the last hour against 12 the same hour a day before: the
    report lists the workflows behind the queue with links, names the surge with its numbers,
    and its next step is to cancel or defer the workflow."""
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import GroupState
    from bot.domain.incident.incidents import open_incident as opened
    from bot.storage.incident_store import Commit

    _, server = github_jobs
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    yesterday = datetime.now(UTC) - timedelta(days=1)
    before = [
        QueuedJob(GPU, "periodic", "test", "pytorch/pytorch", "", yesterday, Trigger.SCHEDULE, 1,
                  f"github:y{n}")
        for n in range(12)
    ]  # fmt: skip
    await JobArrivals(redis, store.keys).record(before, now=yesterday)
    incident = opened(
        delivery_of(parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=datetime.now(UTC),
    )
    await store.commit(
        Commit(incident, group=GroupState(incident_id="1"), group_hash=incident.group_hash)
    )
    core = action_core(redis, store, metrics=github_metrics(server))
    outcome = await core.diagnosing.diagnose(Actor("U1", "al"), "1:u1")
    assert outcome.ok and "likely cause One workflow's surge" in outcome.message
    text = "".join((await redis.hgetall(store.keys.outbox_items("1"))).values())
    assert f"*{GPU}* · *40* queued" in text  # the ghost is not in the queue either
    assert "38 arrivals in the last hour against 12 a day before (3.2×)" in text
    assert "cancel or defer periodic" in text
    assert "*Queued jobs* · from GitHub" in text
    assert "actions/runs/32/job/3201" in text  # the oldest PR job, linked
    assert "1 ghost job left out" in text
    await redis.aclose()


class ShortOfRunners:
    """A scale set the autoscaler wants 60 runners of and has 40: why, ARC itself says."""

    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        short = RunnerTypeMetrics(
            queued=20, registered=40, busy=40, idle=0, desired=60, maximum=120
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux": short})

    async def aclose(self) -> None:
        return None


async def test_the_autoscalers_own_failures_are_the_likely_cause_with_its_words(
    redis_url: str, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The scale set's status counts ephemeral runners that failed to start: the report names
    the failing scale-up with ARC's words and says to fix it before scaling further."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    kube.write(manager="manager", status={"failedEphemeralRunners": 7, "phase": "Running"})
    access = kube_access(str(kube.kubeconfig(tmp_path, kube.url)), {})
    arc = ArcScaler(Settings(backend_timeout_seconds=2), access)
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    await open_fixture_incident(store)
    target = ScaleTarget("linux", "arc-runners/mt-l-x86iavx512-8-64", cap=10)
    core = action_core(
        redis, store, metrics=ShortOfRunners(), scaler=arc, targets={"linux": target}
    )
    outcome = await core.diagnosing.diagnose(Actor("U1", "al"), "1:u1")
    assert outcome.ok and "likely cause Scale-up failing" in outcome.message
    text = "".join((await redis.hgetall(store.keys.outbox_items("1"))).values())
    assert "7 ephemeral runners failed to start (phase Running)" in text
    assert "fix what the autoscaler reports for linux before scaling further" in text
    await redis.aclose()


async def open_fixture_incident(store: IncidentStore) -> None:
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import GroupState
    from bot.domain.incident.incidents import open_incident as opened
    from bot.storage.incident_store import Commit

    payload = fixture_json("grafana/queue-alert-firing.json")
    incident = opened(
        delivery_of(parse_notification("grafana", payload)),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=datetime.now(UTC),
    )
    await store.commit(
        Commit(incident, group=GroupState(incident_id="1"), group_hash=incident.group_hash)
    )


class Growing:
    """linux.2xlarge with all its 40 runners busy and 30 jobs queued: 10 more would drain it.
    Read through a source that has no desired runners (the HUD's, say), so a scale-up shows
    only once its runners register."""

    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        growing = RunnerTypeMetrics(
            queued=30, registered=40, busy=40, maximum=200, job_duration_mins=10
        )
        return FleetSnapshot(at=now, source="prometheus", runner_types={"linux.2xlarge": growing})

    async def aclose(self) -> None:
        return None


async def test_an_early_warnings_scale_up_taken_on_counts_as_booting_from_when_it_was_made(
    redis: Redis,
) -> None:
    """The incident took the warning's +10 on just now; they were added a minute before, so the
    next step waits for them: a reading without desired runners cannot see them until they
    register. Only the scale-up the event records says when it was made: its words do not."""
    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import Event, GroupState, with_action
    from bot.domain.incident.incidents import open_incident as opened
    from bot.domain.scale.scale_ups import ScaleUp
    from bot.storage.incident_store import Commit

    now = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
    store = IncidentStore(redis, "qp")
    payload = fixture_json("grafana/queue-alert-firing.json")
    incident = opened(
        delivery_of(parse_notification("grafana", payload)),
        incident_id="1",
        uid="u1",
        channel="C1",
        now=now,
    )
    made = ScaleUp(
        runner_type="linux.2xlarge",
        added=10,
        by="alice",
        at=now - timedelta(minutes=1),
        field="minRunners",
    )
    taken = Event(
        at=now,
        kind="scaled",
        text="Took on the early warning's scale-up of linux.2xlarge by alice (minRunners 0 → 10)",
        scale=made,
    )
    incident = with_action(incident, taken)
    await store.commit(
        Commit(incident, group=GroupState(incident_id="1"), group_hash=incident.group_hash)
    )
    core = action_core(redis, store, metrics=Growing(), clock=lambda: now)
    assert (await core.diagnosing.diagnose(Actor("U1", "al"), "1:u1")).ok
    text = "".join((await redis.hgetall(store.keys.outbox_items("1"))).values())
    assert "+10 runners on their way should drain it in 30 min" in text, text
