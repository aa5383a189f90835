"""Footprint: the memory and CPU of one `queuepilot serve` process, idle and under a burst, and
the Kubernetes resources derived from them.

Runs the production command as its own process (so what is measured is what a pod runs), with a
real redis-server and the Slack emulator (enforcing Slack's limits) on loopback, then reads the
process's own accounting in /proc:
- idle: resident memory once started, and CPU per second over a quiet window (the scheduler's
  ticks, the senders' idle waits);
- burst: `--notifications` Grafana notifications spread over `--groups` alert groups and
  `--hold-seconds` (each group opens an incident; the rest re-notify with queues growing on three
  runner types, and its root is edited), then every group resolved (a summary and its chart
  each), until Slack has been quiet for 3 s. At Slack's pace of a post a second in the channel
  that is a storm digest, the roots, and the summaries (the statuses, due every 10 s here, give
  way to them). With `CHART_STYLE=image` (the default
  here) matplotlib draws every chart: the heavier case, and the default style's fallback in a
  workspace that refuses Slack's chart block. Peak resident memory (the kernel's high-water
  mark), CPU seconds, and memory once settled.

It ends by printing the resources the Helm chart sets (`resources` in
deploy/helm/queuepilot/values.yaml, the Deployment's) beside what the rule below gives for these
numbers. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import incident_roots
from bot.config import Settings
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

REPO = Path(__file__).resolve().parents[1]
ALERTS = REPO / "sandbox" / "alerts"
CHART_VALUES = REPO / "deploy" / "helm" / "queuepilot" / "values.yaml"
TOKEN, CHANNEL, BOT_TOKEN = "footprint-token", "C0FOOTPRINT", "xoxb-footprint"
MIB = 1024 * 1024
TICK_S = os.sysconf("SC_CLK_TCK")

# The headroom rule. Requests are what the process holds and uses when nothing happens (what the
# scheduler must find room for); the memory limit is twice the burst's peak, for what the bench
# does not make (many channels, incidents open for days, a bigger storm) and for the heap's
# fragmentation, which CPython does not give back. No CPU limit: a throttled process answers
# Slack's 3-second acknowledgement late, and the webhooks' 202 with it.
MEMORY_REQUEST_STEP = 16 * MIB
MEMORY_LIMIT_FACTOR, MEMORY_LIMIT_STEP = 2, 64 * MIB
CPU_REQUEST_FLOOR_M, CPU_REQUEST_STEP_M = 50, 10


@dataclass(frozen=True)
class Usage:
    """One look at the process: resident memory now, its high-water mark, CPU seconds so far."""

    rss: int
    peak_rss: int
    cpu_s: float


def usage(pid: int) -> Usage:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    # /proc/<pid>/stat: the command name (field 2) may hold spaces, so count after its ")".
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(stat[11]), int(stat[12])
    return Usage(
        rss=int(fields["VmRSS"].split()[0]) * 1024,
        peak_rss=int(fields["VmHWM"].split()[0]) * 1024,
        cpu_s=(utime + stime) / TICK_S,
    )


@dataclass(frozen=True)
class Plan:
    groups: int = 30
    notifications: int = 300
    hold_s: float = 30.0
    idle_s: float = 30.0
    chart_style: str = "image"


def serve_env(slack_url: str, redis_url: str, port: int, chart_style: str) -> dict[str, str]:
    """Production defaults but the status interval, none of the developer's own settings.

    A status every 10 s (production: 10 minutes) gives incidents open for a minute the trend
    of incidents open for an hour, so that each summary has a chart to draw."""
    known = {name.upper() for name in Settings.model_fields}
    env = {k: v for k, v in os.environ.items() if k.upper() not in known}
    env.update(
        PYTHONPATH=str(REPO),
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET="footprint",
        SLACK_API_URL=f"{slack_url}/api/",
        SLACK_CHANNEL=CHANNEL,
        REDIS_URL=redis_url,
        HOST="127.0.0.1",
        PORT=str(port),
        ALERT_WEBHOOK_TOKEN=TOKEN,
        CHART_STYLE=chart_style,
        STATUS_INTERVAL_SECONDS="10",
        LOG_LEVEL="WARNING",
    )
    return env


def wait_for(done: Callable[[], bool], timeout: float, what: str, every_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every_s)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


RUNNER_TYPES = ("linux.2xlarge", "linux.4xlarge.nvidia.gpu", "linux.arm64.2xlarge")


def firing(base: dict[str, Any], group: int, step: int) -> dict[str, Any]:
    """A firing notification of one group at one step: its queues grow, one series per runner
    type in `valueString` (as Grafana sends a multi-dimensional rule), so the incident has
    runner types and a trend to chart."""
    payload = copy.deepcopy(base)
    payload["groupKey"] = f"{base['groupKey']}/footprint-{group}"
    series = []
    for n, runner in enumerate(RUNNER_TYPES):
        queued, wait = 4 + 3 * step + n, 20 + 5 * step + 7 * n
        series.append(f"[ var='max_queue_size' labels={{runner_type={runner}}} value={queued} ]")
        series.append(f"[ var='max_queue_time_mins' labels={{runner_type={runner}}} value={wait} ]")
    for alert in payload["alerts"]:
        alert["values"] = None  # the numbers are the labelled series
        alert["valueString"] = ", ".join(series)
    return payload


def resolved(base: dict[str, Any], group: int) -> dict[str, Any]:
    payload = copy.deepcopy(base)
    payload["groupKey"] = f"{base['groupKey']}/footprint-{group}"
    return payload


def burst(http: httpx.Client, groups: int, total: int, hold_s: float) -> float:
    """`total` firing notifications over `groups` groups, spread over `hold_s` (re-notifications
    with growing queues), then each group resolved. The seconds it took to post them."""
    fire = json.loads((ALERTS / "queue-alert-firing.json").read_text())
    resolve = json.loads((ALERTS / "queue-alert-resolved.json").read_text())
    started = time.monotonic()
    for n in range(total):
        due = started + hold_s * n / total
        time.sleep(max(0.0, due - time.monotonic()))
        payload = firing(fire, n % groups, n // groups)
        response = http.post("/alerts/grafana", content=json.dumps(payload))
        assert response.status_code == 202, response.text
    for group in range(groups):
        response = http.post("/alerts/grafana", content=json.dumps(resolved(resolve, group)))
        assert response.status_code == 202, response.text
    return time.monotonic() - started


def settled(emulator: SlackEmulator, groups: int, quiet_s: float = 3.0) -> Callable[[], bool]:
    """Every group's root is in Slack and no Slack call came for `quiet_s`: the work is done."""
    seen = {"calls": -1, "since": time.monotonic()}

    def done() -> bool:
        calls = len(emulator.calls())
        if calls != seen["calls"]:
            seen.update(calls=calls, since=time.monotonic())
            return False
        roots = len(incident_roots(emulator, CHANNEL))
        return roots >= groups and time.monotonic() - seen["since"] >= quiet_s

    return done


def run(plan: Plan) -> dict[str, float]:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), enforce_rate_limits=True)
    port = free_port()
    with (
        RedisServer() as redis,
        serve_in_thread(emulator.app) as slack,
        tempfile.TemporaryDirectory(prefix="qp-footprint-") as workdir,
        open(Path(workdir) / "serve.log", "wb") as log,
    ):
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=workdir,  # no .env is read
            env=serve_env(slack.url, redis.url, port, plan.chart_style),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            started = time.monotonic()
            wait_for(lambda: _answers(f"{base}/readyz"), 60, "queuepilot serve ready")
            ready_s = time.monotonic() - started
            return _measure(process.pid, base, emulator, plan) | {"ready_s": ready_s}
        finally:
            process.terminate()
            process.wait(timeout=30)


def _measure(pid: int, base: str, emulator: SlackEmulator, plan: Plan) -> dict[str, float]:
    time.sleep(5)  # the start's own work (the channel check, the first ticks) is not idling
    before = usage(pid)
    time.sleep(plan.idle_s)
    idle = usage(pid)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    burst_start = time.monotonic()
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        accepted_s = burst(http, plan.groups, plan.notifications, plan.hold_s)
    # Polled slowly: the emulator copies every call for each look, on the same two cores.
    done = settled(emulator, plan.groups)
    wait_for(done, 600, "every thread shown and Slack quiet", every_s=0.5)
    burst_s = time.monotonic() - burst_start
    after = usage(pid)
    time.sleep(10)
    rest = usage(pid)
    return {
        "start_rss": before.rss,
        "idle_rss": idle.rss,
        "idle_cpu_per_s": (idle.cpu_s - before.cpu_s) / plan.idle_s,
        "accepted_s": accepted_s,
        "burst_s": burst_s,
        "burst_cpu_s": after.cpu_s - idle.cpu_s,
        "peak_rss": after.peak_rss,
        "settled_rss": rest.rss,
        "slack_calls": len(calls := emulator.calls()),
        "slack_429": sum(1 for call in calls if call.status == 429),
        "uploads": sum(1 for call in calls if call.method == "files.completeUploadExternal"),
    }


def _up(value: float, step: float) -> float:
    return math.ceil(value / step) * step


def rule(measured: dict[str, float]) -> dict[str, str]:
    """The resources the headroom rule gives for these numbers."""
    steady = max(measured["idle_rss"], measured["settled_rss"])
    cpu_m = max(CPU_REQUEST_FLOOR_M, _up(measured["idle_cpu_per_s"] * 1000, CPU_REQUEST_STEP_M))
    limit = _up(MEMORY_LIMIT_FACTOR * measured["peak_rss"], MEMORY_LIMIT_STEP)
    return {
        "requests.cpu": f"{cpu_m:.0f}m",
        "requests.memory": f"{_up(steady, MEMORY_REQUEST_STEP) / MIB:.0f}Mi",
        "limits.memory": f"{limit / MIB:.0f}Mi",
        "limits.cpu": "none",
    }


def chart_resources() -> dict[str, str]:
    resources = yaml.safe_load(CHART_VALUES.read_text())["resources"]
    found = {
        f"{kind}.{name}": str(value)
        for kind in ("requests", "limits")
        for name, value in (resources.get(kind) or {}).items()
    }
    return {"limits.cpu": "none", **found}


def report(measured: dict[str, float], plan: Plan) -> None:
    mib = {k: measured[k] / MIB for k in ("start_rss", "idle_rss", "peak_rss", "settled_rss")}
    print(f"footprint of one `queuepilot serve` (CHART_STYLE={plan.chart_style}):")
    print(f"  ready {measured['ready_s']:.1f} s after start; RSS {mib['start_rss']:.0f} MiB")
    print(
        f"  idle {plan.idle_s:.0f} s: RSS {mib['idle_rss']:.0f} MiB, "
        f"CPU {measured['idle_cpu_per_s'] * 1000:.1f} ms per second"
    )
    print(
        f"  burst: {plan.notifications} notifications over {plan.groups} groups in "
        f"{measured['accepted_s']:.0f} s, then each resolved; Slack quiet after "
        f"{measured['burst_s']:.0f} s ({measured['slack_calls']:.0f} Slack calls, "
        f"{measured['uploads']:.0f} chart pictures, {measured['slack_429']:.0f} answered 429)"
    )
    print(
        f"  burst: CPU {measured['burst_cpu_s']:.2f} s, peak RSS {mib['peak_rss']:.0f} MiB, "
        f"settled RSS {mib['settled_rss']:.0f} MiB"
    )
    wanted, shown = rule(measured), chart_resources()
    print(
        "resources (rule: requests = idle CPU with a 50m floor and the settled RSS; memory "
        f"limit = {MEMORY_LIMIT_FACTOR}x the peak RSS; no CPU limit):"
    )
    where = f"{CHART_VALUES.relative_to(REPO)} resources"
    for name, value in wanted.items():
        print(f"  {name:16} rule {value:>6} · {where} {shown.get(name, '-')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=Plan.groups)
    parser.add_argument("--notifications", type=int, default=Plan.notifications)
    parser.add_argument("--hold-seconds", type=float, default=Plan.hold_s)
    parser.add_argument("--idle-seconds", type=float, default=Plan.idle_s)
    parser.add_argument(
        "--chart-style",
        choices=["image", "native"],
        default=Plan.chart_style,
        help="image (the default here): matplotlib draws every chart, the heavier case",
    )
    args = parser.parse_args()
    plan = Plan(
        args.groups, args.notifications, args.hold_seconds, args.idle_seconds, args.chart_style
    )
    report(run(plan), plan)


if __name__ == "__main__":
    main()
