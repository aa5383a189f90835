"""queuepilot next to the real Alertmanager, from one run on this machine.

Starts `prometheus-alertmanager` with one receiver that has both a Slack config (Alertmanager's
own Slack notifier) and a webhook config (queuepilot), a real redis-server, queuepilot as its
production process (`python -m bot serve`), and the Slack emulator enforcing Slack's limits
(each side posts to its own channel, so neither spends the other's budget). Then:
- intake: `wrk` against Alertmanager's `/api/v2/alerts` and queuepilot's webhook;
- alert -> Slack: one new group at a time, until Alertmanager's Slack post and queuepilot's root
  are in Slack (the difference is queuepilot's cost in the chain);
- storm: 120 new groups at once, groups visible in each channel over time, and 429s;
- resident memory of both processes, Redis bytes per incident.
Writes `docs/benchmarks.md` (with `--write`) and prints the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import redis

from bench import ROOT, cpu_name, wait_until_up, write_table
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

TOKEN, SECRET, BOT_TOKEN = "bench-webhook-token", "bench-signing-secret", "xoxb-bench"
AM_CHANNEL, QP_CHANNEL = "C0ALERTMANAGER", "C0QUEUEPILOT"
STORM_GROUPS = 120
STORM_SAMPLES = (1, 2, 5, 10, 20, 30, 46)


@dataclass
class Wrk:
    rate: float
    p50_ms: float
    p99_ms: float


def run_wrk(url: str, body: bytes, *, headers: dict[str, str], seconds: int) -> Wrk:
    """wrk with 2 threads and 10 connections, POSTing `body`."""
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "body.json").write_bytes(body)
        lines = [
            f'local f = io.open("{workdir}/body.json", "rb"); wrk.body = f:read("*a"); f:close()',
            'wrk.method = "POST"',
            *(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()),
        ]
        script = Path(workdir) / "post.lua"
        script.write_text("\n".join(lines) + "\n")
        out = subprocess.run(
            ["wrk", "-t2", "-c10", f"-d{seconds}s", "--latency", "-s", str(script), url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors from {url}:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Wrk(rate, _wrk_ms(out, "50%"), _wrk_ms(out, "99%"))


def _wrk_ms(out: str, label: str) -> float:
    value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def alert(name: str) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    return {
        "labels": {"alertname": name, "severity": "P2", "type": "alerting-infra"},
        "annotations": {
            "summary": "Jobs are queueing in the autoscaled machines",
            "Priority": "P2",
        },
        "startsAt": now,
    }


class Stack:
    """Alertmanager, Redis, the emulator and queuepilot, started and stopped together."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.emulator = SlackEmulator(
            token=BOT_TOKEN, channels=(AM_CHANNEL, QP_CHANNEL), enforce_rate_limits=True
        )
        self.redis = RedisServer()
        self.qp_port, self.am_port = free_port(), free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Stack:
        self.redis.start()
        self.slack = serve_in_thread(self.emulator.app)
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": f"{self.slack.url}/api/",
            "SLACK_CHANNEL": QP_CHANNEL,
            "REDIS_URL": self.redis.url,
            "PORT": str(self.qp_port),
            "HOST": "127.0.0.1",
            "ALERT_WEBHOOK_TOKEN": TOKEN,
            "LOG_LEVEL": "INFO",  # the default, as users run it
        }
        env.pop("SLACK_APP_TOKEN", None)
        self.qp = self._spawn([sys.executable, "-m", "bot", "serve"], env)
        self.am = self._spawn(self._alertmanager_command(), dict(os.environ))
        wait_until_up(lambda: httpx.get(f"{self.qp_url}/readyz").status_code == 200, "queuepilot")
        wait_until_up(
            lambda: httpx.get(f"{self.am_url}/-/ready").status_code == 200, "alertmanager"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        self.slack.stop()
        self.redis.stop()

    @property
    def qp_url(self) -> str:
        return f"http://127.0.0.1:{self.qp_port}"

    @property
    def am_url(self) -> str:
        return f"http://127.0.0.1:{self.am_port}"

    def _alertmanager_command(self) -> list[str]:
        config = self.workdir / "alertmanager.yml"
        config.write_text(
            "route:\n  receiver: both\n  group_by: [alertname]\n  group_wait: 0s\n"
            "  group_interval: 5m\n  repeat_interval: 4h\n"
            "receivers:\n- name: both\n"
            "  webhook_configs:\n"
            f"  - url: {self.qp_url}/alerts/alertmanager\n    send_resolved: true\n"
            f"    http_config:\n      authorization:\n        credentials: {TOKEN}\n"
            "  slack_configs:\n"
            f"  - api_url: {self.slack.url}/api/chat.postMessage\n    channel: {AM_CHANNEL}\n"
            f"    http_config:\n      authorization:\n        credentials: {BOT_TOKEN}\n"
        )
        return [
            shutil.which("prometheus-alertmanager") or "prometheus-alertmanager",
            f"--config.file={config}",
            f"--storage.path={self.workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{self.am_port}",
            "--cluster.listen-address=",
            "--log.level=error",
        ]

    def _spawn(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.processes.append(process)
        return process

    def visible(self, names: list[str]) -> tuple[int, int]:
        """Groups shown in Alertmanager's channel and in queuepilot's, by name."""
        calls = self.emulator.calls("chat.postMessage")
        am_text = "".join(json.dumps(c.params) for c in calls if c.ok and _to(c, AM_CHANNEL))
        qp_text = "".join(
            m.text + json.dumps(m.blocks) for m in self.emulator.channel_messages(QP_CHANNEL)
        )
        return sum(n in am_text for n in names), sum(n in qp_text for n in names)

    def arrivals(self, name: str) -> tuple[float | None, float | None]:
        """When the first post naming `name` reached each side's channel (emulator's clock)."""
        calls = [c for c in self.emulator.calls("chat.postMessage") if c.ok]

        def first(channel: str) -> float | None:
            return next((c.at for c in calls if _to(c, channel) and name in str(c.params)), None)

        return first(AM_CHANNEL), first(QP_CHANNEL)

    def limited(self) -> tuple[int, int]:
        calls = [c for c in self.emulator.calls() if c.status == 429]
        return sum(_to(c, AM_CHANNEL) for c in calls), sum(_to(c, QP_CHANNEL) for c in calls)


def _to(call: Any, channel: str) -> bool:
    return call.params.get("channel") == channel


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]


def chain_latency(stack: Stack, count: int) -> tuple[list[float], list[float]]:
    """One new group at a time, 1.5 s apart (within Slack's pace): seconds from the POST to
    Alertmanager until each side's post reached Slack, by the emulator's own arrival times (the
    bench only looks every 20 ms, so its polling costs neither side CPU)."""
    am_times, qp_times = [], []
    for n in range(count):
        name = f"latency-{n:03d}"
        started = time.monotonic()  # the emulator stamps arrivals with the same clock
        httpx.post(f"{stack.am_url}/api/v2/alerts", json=[alert(name)]).raise_for_status()
        deadline = started + 10
        while None in (arrived := stack.arrivals(name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not reach Slack")
            time.sleep(0.02)
        am_at, qp_at = arrived
        am_times.append(am_at - started)
        qp_times.append(qp_at - started)
        time.sleep(1.5)
    return am_times, qp_times


def storm(stack: Stack) -> list[tuple[float, int, int]]:
    names = [f"storm-{n:03d}" for n in range(STORM_GROUPS)]
    started = time.perf_counter()
    httpx.post(f"{stack.am_url}/api/v2/alerts", json=[alert(n) for n in names]).raise_for_status()
    samples = []
    for at in STORM_SAMPLES:
        time.sleep(max(0.0, started + at - time.perf_counter()))
        am, qp = stack.visible(names)
        samples.append((at, am, qp))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="each wrk run")
    parser.add_argument("--latency-samples", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    if shutil.which("wrk") is None or shutil.which("prometheus-alertmanager") is None:
        sys.exit("bench.side_by_side needs wrk and prometheus-alertmanager (make bench installs)")
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as workdir, Stack(Path(workdir)) as stack:
        # The chain and the storm first, on the fresh stack: after a wrk run both sides may
        # still be digesting the flood (Alertmanager's chain p50 doubled after it).
        am_lat, qp_lat = chain_latency(stack, args.latency_samples)
        samples = storm(stack)
        am_429, qp_429 = stack.limited()
        am_body = json.dumps([alert("wrk-load")]).encode()
        qp_body = (ROOT / "tests/fixtures/alertmanager/runner-queue-am-00-firing.json").read_bytes()
        headers = {"Content-Type": "application/json"}
        am = run_wrk(
            f"{stack.am_url}/api/v2/alerts", am_body, headers=headers, seconds=args.seconds
        )
        qp = run_wrk(
            f"{stack.qp_url}/alerts/alertmanager",
            qp_body,
            headers={**headers, "Authorization": f"Bearer {TOKEN}"},
            seconds=args.seconds,
        )
        store = redis.Redis.from_url(stack.redis.url)
        incidents = len(store.keys("qp:v2:incident:*"))
        used = store.info("memory")["used_memory"]
        store.close()
        rss = (rss_mib(stack.am.pid), rss_mib(stack.qp.pid))

    cpu = cpu_name()
    am_p50, qp_p50 = statistics.median(am_lat), statistics.median(qp_lat)
    # Each sample is one alert both sides were sent at once: the difference within a sample
    # leaves out what both share (Alertmanager's dispatch), and its median is the overhead.
    overhead = statistics.median(q - a for a, q in zip(am_lat, qp_lat, strict=True))
    lines += [
        "| measure | Alertmanager | queuepilot | ratio (qp/AM) |",
        "|---|---|---|---|",
        f"| intake, wrk 10 connections: requests/s | {am.rate:,.0f} | {qp.rate:,.0f} |"
        f" {qp.rate / am.rate:.2f}× |",
        f"| intake p50 / p99 | {am.p50_ms:.2f} / {am.p99_ms:.2f} ms |"
        f" {qp.p50_ms:.2f} / {qp.p99_ms:.2f} ms | |",
        f"| alert → Slack, p50 of {len(am_lat)} (AM Slack receiver vs AM → queuepilot → Slack)"
        f" | {am_p50 * 1000:.1f} ms | {qp_p50 * 1000:.1f} ms"
        f" | +{(qp_p50 - am_p50) * 1000:.1f} ms |",
        f"| the same alerts: queuepilot's overhead, median of the {len(am_lat)} differences"
        f" | | +{overhead * 1000:.1f} ms | |",
    ]
    for at, am_seen, qp_seen in samples:
        lines.append(
            f"| storm: groups visible after {at} s (of {STORM_GROUPS}) | {am_seen} | {qp_seen} | |"
        )
    lines += [
        f"| storm: calls answered 429 | {am_429} | {qp_429} | |",
        f"| resident memory (RSS) | {rss[0]:.0f} MiB | {rss[1]:.0f} MiB | |",
        f"| Redis used_memory with {incidents} incidents | | {used / 1024:.0f} KiB"
        f" ({used / max(incidents, 1) / 1024:.1f} KiB per incident, all keys) | |",
    ]
    header = (
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {cpu}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
        "everything on loopback."
    )
    print(header)
    print("\n".join(lines))
    if args.write:
        write_table("side-by-side", header, lines)


if __name__ == "__main__":
    main()
