"""The runner pods' causes, as tables of readings → what diagnostics say: each cause with its
numbers and next step, what a source not scraped leaves unknown, and no runners (nor a higher
maximum) advised while new pods cannot start."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.backends.metrics.prometheus_pods import runner_pods
from bot.domain.reading.causes import Cause, pod_causes
from bot.domain.reading.diagnostics import diagnose
from bot.domain.reading.fleet import OOM_NAMING, FleetSnapshot, with_workflows
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.judgement import added
from bot.domain.reading.judging import judge
from bot.domain.reading.runner_pods import (
    CADVISOR,
    DISK,
    NODE_EXPORTER,
    NodeTrouble,
    RunnerPods,
    unknown_said,
)

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"
# At its maximum with a queue: without the pods, the advice is to raise the maximum.
FULL = M(queued=40, registered=20, busy=20, idle=0, maximum=20, desired=20, job_duration_mins=15)
QUIET = RunnerPods(
    pods_pending=0, unschedulable=0, image_pull=0, config_error=0, oom_kills=0, restarts=0,
    cpu_throttled_periods=0.02, cpu_periods=1, memory_of_limit=0.4,
)  # fmt: skip


def judged(m: M) -> M:
    return m.model_copy(update={"judged": judge(m, [], at=NOW)})


def diagnosis_of(pods: RunnerPods | None, m: M = FULL) -> tuple[str, str, str]:
    """(the likely cause, its line of evidence, the next step) for one type."""
    snapshot = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={TYPE: judged(m.model_copy(update={"pods": pods}))},
    )
    d = diagnose(snapshot)
    return (d.cause.value if d.cause else "", d.why, d.recommendation)


@pytest.mark.parametrize(
    ("pods", "cause", "evidence", "advice"),
    [
        (
            QUIET.model_copy(
                update={
                    "pods_pending": 15,
                    "pending_mins": 9,
                    "unschedulable": 12,
                    "unschedulable_mins": 6,
                }
            ),
            Cause.PODS_UNSCHEDULABLE,
            "12 runner pods Pending for 6 min: no node fits (unschedulable)",
            "look at the cluster autoscaler or Karpenter; raising maxRunners will not help",
        ),
        (
            QUIET.model_copy(update={"pods_pending": 9, "image_pull": 9}),
            Cause.IMAGE_PULL,
            "new runners fail to pull their image (ImagePullBackOff, 9 pods)",
            "roll back a new image",
        ),
        (
            QUIET.model_copy(update={"config_error": 2}),
            Cause.CONFIG_ERROR,
            "2 runner pods cannot start (CreateContainerConfigError)",
            "a Secret or ConfigMap the runner pod names is missing",
        ),
        (
            QUIET.model_copy(update={"pods_pending": 3, "creating": 3}),
            Cause.CREATING,
            "3 runner pods ContainerCreating or PodInitializing for over 5 min on their node",
            "most often a large runner image still pulling on a new node",
        ),
        (
            QUIET.model_copy(update={"oom_kills": 7, "restarts": 2}),
            Cause.OOM_KILLED,
            "jobs were OOMKilled 7 times in 30 min, 2 restarts",
            "raise the runner's memory or move those jobs to a larger type",
        ),
        (
            QUIET.model_copy(update={"oom_kills": 7, "oom_workflows": (("pull", 5), ("trunk", 2))}),
            Cause.OOM_KILLED,
            "jobs were OOMKilled 7 times in 30 min (pull 5, trunk 2)",
            "raise the runner's memory or move those jobs to a larger type",
        ),
        (
            QUIET.model_copy(update={"oom_kills": 1, "oom_naming": "`JOBS_BACKEND=github` names"}),
            Cause.OOM_KILLED,
            "jobs were OOMKilled once in 30 min (`JOBS_BACKEND=github` names)",
            "raise the runner's memory",
        ),
        (  # ARC deleted every killed pod before a scrape: the nodes' kernel counted the kills
            QUIET.model_copy(update={"node_oom_kills": 7}),
            Cause.OOM_KILLED,
            "7 OOM kills in 30 min on the nodes these runners ran on",
            "raise the runner's memory or move those jobs to a larger type",
        ),
        (
            QUIET.model_copy(
                update={
                    "oom_kills": 3,
                    "node_oom_kills": 7,
                    "oom_workflows": (("pull", 2), ("trunk", 1)),
                }
            ),
            Cause.OOM_KILLED,
            "7 OOM kills in 30 min on the nodes these runners ran on (the kernel's count, of any "
            "process there); jobs seen OOMKilled 3 times (pull 2, trunk 1)",
            "raise the runner's memory",
        ),
        (  # every kill on the nodes was a runner pod seen killed
            QUIET.model_copy(
                update={
                    "oom_kills": 3,
                    "node_oom_kills": 3,
                    "oom_workflows": (("pull", 2), ("trunk", 1)),
                }
            ),
            Cause.OOM_KILLED,
            "jobs were OOMKilled 3 times in 30 min (pull 2, trunk 1)",
            "raise the runner's memory",
        ),
        (  # near the limit and killed: the kills say it
            QUIET.model_copy(update={"memory_of_limit": 0.95, "node_oom_kills": 3}),
            Cause.OOM_KILLED,
            "3 OOM kills in 30 min on the nodes these runners ran on",
            "raise the runner's memory",
        ),
        (
            QUIET.model_copy(
                update={
                    "nodes": (NodeTrouble(node="ip-10-0-1-5", condition="DiskPressure", pods=5),)
                }
            ),
            Cause.NODE_PRESSURE,
            "node ip-10-0-1-5 under DiskPressure: 5 runner pods on it",
            "cordon ip-10-0-1-5",
        ),
        (
            QUIET.model_copy(
                update={
                    "nodes": (NodeTrouble(node="ip-10-0-1-5", condition=DISK, pods=5, busy=0.96),)
                }
            ),
            Cause.DISK_BUSY,
            "node ip-10-0-1-5 disk busy 96% of the time: 5 runner pods on it; jobs there wait "
            "on I/O",
            "give runners faster disks",
        ),
        (
            QUIET.model_copy(update={"cpu_throttled_periods": 0.45}),
            Cause.CPU_THROTTLED,
            "runners CPU-throttled 45% of periods",
            "raise the runner container's CPU limit",
        ),
        (
            QUIET.model_copy(update={"memory_of_limit": 0.95}),
            Cause.MEMORY_NEAR_LIMIT,
            "memory working set is at 95% of its limit",
            "before jobs start being OOMKilled",
        ),
    ],
)
def test_each_cause_is_named_with_its_numbers_and_next_step(
    pods: RunnerPods, cause: Cause, evidence: str, advice: str
) -> None:
    named, why, step = diagnosis_of(pods)
    assert named == cause.value
    assert why.startswith(f"{TYPE}: ") and evidence in why
    assert advice in step


def test_throttling_says_how_much_longer_jobs_take_than_a_day_before() -> None:
    slower = FULL.model_copy(update={"job_duration_mins": 24, "duration_baseline_mins": 15})
    _, why, _ = diagnosis_of(QUIET.model_copy(update={"cpu_throttled_periods": 0.45}), slower)
    assert "runners CPU-throttled 45% of periods: jobs take 1.6× as long as a day before" in why


@pytest.mark.parametrize(
    "pods",
    [
        RunnerPods(pods_pending=12, unschedulable=12),
        RunnerPods(pods_pending=3, image_pull=3),
        RunnerPods(config_error=1),
        RunnerPods(creating=2),
    ],
)
def test_no_runners_nor_a_higher_maximum_while_new_pods_cannot_start(pods: RunnerPods) -> None:
    j = judge(FULL.model_copy(update={"pods": pods}), [], at=NOW)
    assert (j.runners, j.raise_maximum_by, j.new_maximum) == (0, 0, None)
    assert j.advice.startswith("none until pods start") and "maximum" not in j.advice
    _, _, step = diagnosis_of(pods)
    assert "raise the maximum" not in step and "+" not in step


@pytest.mark.parametrize(
    "pods",
    [
        # Pods the cluster autoscaler or Karpenter is adding a node for (under the boot time,
        # so not counted unschedulable): a normal scale-up.
        RunnerPods(pods_pending=12, pending_mins=2, unschedulable=0),
        # One pod stuck among many still booting.
        RunnerPods(pods_pending=12, pending_mins=7, unschedulable=1),
        RunnerPods(pods_pending=12, image_pull=1),
    ],
)
def test_a_few_pods_stuck_among_many_starting_still_get_runners(pods: RunnerPods) -> None:
    # Below its maximum, so the runners fit without raising it.
    roomy = FULL.model_copy(update={"maximum": 60, "pods": pods})
    j = judge(roomy, [], at=NOW)
    assert j.runners > 0 and j.advice.startswith(f"+{j.runners}")
    assert j.cannot_start == 0


def test_never_a_higher_maximum_while_any_pod_finds_no_node() -> None:
    """Desired = maximum = 20, 8 registered, 12 Pending of which 4 unschedulable past the boot:
    the stuck hold their slots, nothing fits under the maximum, and a higher one would only add
    pods that find no node."""
    m = M(queued=40, registered=8, busy=8, idle=0, maximum=20, desired=20, job_duration_mins=15)
    pods = RunnerPods(pods_pending=12, pending_mins=7, unschedulable=4, unschedulable_mins=7)
    j = judge(m.model_copy(update={"pods": pods}), [], at=NOW)
    assert (j.raise_maximum_by, j.new_maximum) == (0, None)
    assert "raise the maximum" not in j.advice
    assert (
        j.advice.startswith("none until nodes fit: ") and "4 new runner pods find none" in j.advice
    )
    assert "find no node" not in j.why  # said once, by the advice
    _, _, step = diagnosis_of(pods, m)
    assert "raise the maximum" not in step


def test_pods_waiting_for_a_node_however_young_hold_the_maximum_where_it_is() -> None:
    """The GPU team's early warning: its scale set asked for its maximum of 14, 10 registered,
    4 Pending that no node has fit for a minute (a node may come, or none will). Adding to the
    maximum would only add pods that wait with them: the advice says so, not "+20"; with the pods
    unread it is the queue's."""
    m = M(queued=30, registered=10, busy=10, idle=0, maximum=14, desired=14, job_duration_mins=10)
    waiting = RunnerPods(pods_pending=4, pending_mins=1, no_node=4, unschedulable=0)
    j = judge(m.model_copy(update={"pods": waiting}), [], at=NOW)
    assert (j.runners, j.raise_maximum_by, j.cannot_start) == (0, 0, 0)
    assert (
        j.advice.startswith("none until nodes fit: ") and "4 new runner pods find none" in j.advice
    )
    assert j.pods_read
    # Pods unread (no kube-state-metrics, or the query refused): whether they start is not
    # known, and the advice is the queue's.
    for unread in (m, m.model_copy(update={"pods": RunnerPods(unknown="not scraped")})):
        said = judge(unread, [], at=NOW)
        assert said.runners > 0 and said.raise_maximum_by > 0 and not said.pods_read
    placed = judge(m.model_copy(update={"pods": RunnerPods(pods_pending=4, no_node=0)}), [], at=NOW)
    assert placed.pods_read and placed.raise_maximum_by > 0


@pytest.mark.parametrize(
    ("maximum", "advice"),
    [
        # Nothing fits under the maximum: the runners needed wait for nodes, not for "booting".
        (20, "none until nodes fit: 12 more need nodes (2 new runner pods find none), not a "
             "higher maximum"),
        # Some fit: those, and the rest said as nodes'.
        (26, "+6 runners would drain it in 30 min; 6 more need nodes (2 new runner pods find "
             "none), not a higher maximum"),
    ],
)  # fmt: skip
def test_runners_short_of_nodes_are_said_so_never_booting_nor_fitting(
    maximum: float, advice: str
) -> None:
    """20 queued, 10 registered, 10 Pending of which 2 find no node (too few to withhold the
    advice): the 8 booting do not drain it, and the autoscaling check never says it fits."""
    m = M(queued=20, registered=10, busy=10, idle=0, maximum=maximum, desired=20,
          job_duration_mins=30)  # fmt: skip
    pods = RunnerPods(pods_pending=10, pending_mins=7, unschedulable=2, unschedulable_mins=7)
    j = judge(m.model_copy(update={"pods": pods}), [], at=NOW)
    assert j.advice == advice
    snapshot = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={TYPE: judged(m.model_copy(update={"pods": pods}))},
    )
    texts = [c.text for f in diagnose(snapshot).findings for c in f.checks]
    assert not any("fits the maximum" in t for t in texts), texts
    assert any("the maximum of " in t and "is not the limit" in t for t in texts), texts


def test_the_unschedulable_cause_counts_and_times_only_the_unschedulable_pods() -> None:
    pods = RunnerPods(
        pods_pending=6, pending_mins=10, unschedulable=3, unschedulable_mins=7, image_pull=2,
        creating=1,
    )  # fmt: skip
    said = [c.evidence for c in pod_causes(M(pods=pods))]
    assert said[0] == "3 runner pods Pending for 7 min: no node fits (unschedulable)"
    assert "1 runner pod ContainerCreating or PodInitializing for over 5 min on their node" in said


def test_one_pod_that_cannot_start_is_said_in_the_singular() -> None:
    j = judge(FULL.model_copy(update={"pods": RunnerPods(config_error=1)}), [], at=NOW)
    assert j.advice.startswith("none until pods start: 1 new runner pod cannot")
    assert "1 runner pod cannot start" in pod_causes(M(pods=RunnerPods(config_error=1)))[0].evidence


def test_without_the_pods_the_same_queue_asks_for_a_higher_maximum() -> None:
    j = judge(FULL, [], at=NOW)
    assert j.raise_maximum_by > 0 and "raise the maximum" in j.advice
    assert judge(FULL.model_copy(update={"pods": QUIET}), [], at=NOW).advice == j.advice


def test_a_source_not_scraped_is_said_once_with_the_source_that_would_tell() -> None:
    cadvisor = ("cpu_throttled_periods", "cpu_periods", "memory_of_limit")
    unknown = unknown_said(dict.fromkeys(cadvisor, CADVISOR))
    assert unknown == (
        "CPU throttling, memory against its limit not known (the kubelet's cAdvisor is not scraped)"
    )
    pods = RunnerPods(pods_pending=0, unschedulable=0, image_pull=0, oom_kills=0, unknown=unknown)
    other = "linux.4xlarge"
    snapshot = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={
            name: judged(FULL.model_copy(update={"pods": pods})) for name in (TYPE, other)
        },
    )
    lines = [(names, c.text) for names, c in diagnose(snapshot).evidence]
    said = [(names, text) for names, text in lines if "cAdvisor" in text]
    assert said == [(f"{TYPE}, {other}", unknown)]


def test_nothing_read_names_no_cause_and_says_nothing() -> None:
    assert pod_causes(M()) == ()
    assert pod_causes(M(pods=RunnerPods())) == ()
    assert pod_causes(M(pods=QUIET)) == ()
    # The kernel counts any process: a daemon killed once on a shared node is not the runners'.
    assert pod_causes(M(pods=QUIET.model_copy(update={"node_oom_kills": 2}))) == ()


def test_pods_that_cannot_start_are_not_counted_booting_nor_the_maximum_said_fine() -> None:
    """The GPU node group fits 10 and the set wants 14: the 4 stuck are not "booting", and the
    constraints line does not say "below the maximum" beside "no node fits"."""
    gpu = M(queued=12, registered=10, busy=10, idle=0, maximum=14, desired=14, job_duration_mins=20)
    pods = RunnerPods(pods_pending=4, pending_mins=9, unschedulable=4, unschedulable_mins=9)
    j = judge(gpu.model_copy(update={"pods": pods}), [], at=NOW)
    assert j.booting == 0 and "booting" not in j.advice
    snapshot = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={TYPE: judged(gpu.model_copy(update={"pods": pods}))},
    )
    texts = [c.text for f in diagnose(snapshot).findings for c in f.checks]
    assert any("no node fits" in t for t in texts)
    assert not any("below the maximum" in t for t in texts), texts


def test_forty_bad_nodes_keep_five_and_say_how_many_more() -> None:
    """A node group gone bad at once: the reading stored in each incident and in the history
    keeps the five nodes with most runner pods, and diagnostics say the rest in one line."""
    answers = {
        "nodes": [
            ({"name": "a-x7q2k", "node": f"ip-10-0-{n}-17", "condition": "DiskPressure"}, n + 1.0)
            for n in range(40)
        ],
        "disk_busy": [],
    }
    found, _ = runner_pods(answers, {}, lambda labels: labels["name"][:-6])
    pods = found["a"]
    assert [n.node for n in pods.nodes] == [f"ip-10-0-{n}-17" for n in (39, 38, 37, 36, 35)]
    assert pods.more_nodes == 35
    # Forty nodes stored would be four times as long.
    assert len(pods.model_dump_json(by_alias=True, exclude_defaults=True)) < 400
    _, why, _ = diagnosis_of(pods)
    assert why.startswith(f"{TYPE}: node ip-10-0-39-17 under DiskPressure: 40 runner pods")
    snapshot = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={TYPE: judged(FULL.model_copy(update={"pods": pods}))},
    )
    said = [c.text for _, c in diagnose(snapshot).evidence if c.name == Cause.NODE_PRESSURE.value]
    assert len(said) == 6
    assert said[-1].startswith("and 35 more nodes of these runners under pressure")


def test_a_node_with_a_saturated_disk_counts_as_one_of_the_nodes_kept() -> None:
    answers = {
        "disk_busy": [
            ({"name": "a-x7q2k", "node": "n1", "busy": "0.96"}, 2.0),
            ({"name": "a-d4zt9", "node": "n1", "busy": "0.96"}, 3.0),
        ],
    }
    found, _ = runner_pods(answers, {}, lambda labels: labels["name"][:-6])
    assert found["a"].nodes == (NodeTrouble(node="n1", condition=DISK, pods=5, busy=0.96),)
    assert found["a"].more_nodes == 0


def test_node_exporter_not_scraped_is_said_with_its_source() -> None:
    assert unknown_said({"disk_busy": NODE_EXPORTER, "node_oom_kills": NODE_EXPORTER}) == (
        "disk I/O saturation, OOM kills on the nodes not known (node-exporter is not scraped)"
    )


def test_kills_are_named_by_the_workflows_that_ran_on_their_pods_or_say_how_to_name_them() -> None:
    """`with_workflows` matches each killed (pod, uid) to the workflow its job ran; where no
    jobs source can, the cause says once how to get them named."""
    pods = QUIET.model_copy(
        update={"oom_kills": 4, "oom_pods": (("a", "1"), ("a", "2"), ("b", "3"), ("c", "4"))}
    )
    fleet = FleetSnapshot(
        at=NOW, source="prometheus", runner_types={TYPE: FULL.model_copy(update={"pods": pods})}
    )
    named = {("a", "1"): "pull", ("a", "2"): "pull", ("b", "3"): "trunk", ("c", "4"): ""}
    said = with_workflows(fleet, named, OOM_NAMING).runner_types[TYPE].pods
    assert said is not None and said.oom_workflows == (("pull", 2), ("trunk", 1))
    assert said.oom_naming == "", "named kills need no hint"
    unnamed = with_workflows(fleet, {}, OOM_NAMING).runner_types[TYPE].pods
    _, why, _ = diagnosis_of(unnamed)
    assert "OOMKilled 4 times in 30 min (`JOBS_BACKEND=github` names their workflows)" in why
    assert why.count("JOBS_BACKEND") == 1


def test_runners_added_beside_one_pod_that_finds_no_node_are_booting_not_advised_twice() -> None:
    """One Pending pod finds no node, most start: the runners taken from Slack count as booting
    at once, so the advice is not the same runners again."""
    m = M(queued=30, registered=12, busy=12, idle=0, maximum=20, desired=13, job_duration_mins=3)
    pods = RunnerPods(pods_pending=8, pending_mins=7, unschedulable=1, unschedulable_mins=7)
    j = judge(m.model_copy(update={"pods": pods}), [], at=NOW)
    assert (j.runners, j.cannot_start, j.unplaced) == (3, 0, 1)
    after = added(j, j.runners)
    assert (after.runners, after.booting) == (0, 3)
    assert after.advice.startswith("+3 runners on their way")
