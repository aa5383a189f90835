"""A real Redis Sentinel set for the tests: a master, a replica and three `redis-sentinel`s,
each on a free loopback port, with failover timings short enough for a test."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from redis import Redis

from tests.support.servers import free_port, require_binary, wait_until

MASTER_NAME = "mymaster"


class SentinelSet:
    def __init__(self) -> None:
        self.server = require_binary("redis-server")
        self.sentinel = require_binary("redis-sentinel")
        self.dir = Path(tempfile.mkdtemp(prefix="qp-sentinel-"))
        self.master_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def sentinels(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def start(self) -> None:
        # A replica's first sync at once: a master waits 5 s by default for more replicas to
        # share one diskless transfer, and here there is one.
        self._redis(self.master_port, "--repl-diskless-sync-delay", "0")
        self._redis(self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port))
        ids = {port: f"{port:040x}" for port in self.sentinel_ports}
        for port in self.sentinel_ports:
            # Each knows its peers and the replica from the start, as a sentinel restarted from
            # the state it writes to its own config: agreed at once, not after a round of hello
            # messages (2 s apart).
            known = "".join(
                f"sentinel known-sentinel {MASTER_NAME} 127.0.0.1 {other} {ids[other]}\n"
                for other in self.sentinel_ports
                if other != port
            )
            conf = self.dir / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nsentinel myid {ids[port]}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
                f"sentinel failover-timeout {MASTER_NAME} 5000\n"
                f"sentinel known-replica {MASTER_NAME} 127.0.0.1 {self.replica_port}\n{known}"
            )
            self._spawn(port, [self.sentinel, str(conf), "--logfile", f"sentinel-{port}.log"])
        wait_until(self._ready, timeout=60, what="the replica in sync and the sentinels agreed")

    def master_port_now(self) -> int:
        """The master as a sentinel sees it now."""
        with Redis(port=self.sentinel_ports[0], decode_responses=True) as client:
            _, port = client.execute_command("SENTINEL", "get-master-addr-by-name", MASTER_NAME)
        return int(port)

    def kill(self, port: int) -> None:
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait(5)

    def stop(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(5)
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _ready(self) -> bool:
        with Redis(port=self.replica_port, decode_responses=True) as replica:
            if replica.info("replication").get("master_link_status") != "up":
                return False
        for port in self.sentinel_ports:
            with Redis(port=port, decode_responses=True) as sentinel:
                [state] = sentinel.execute_command("SENTINEL", "masters")  # parsed to a dict
                if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                    return False
        return True

    def _redis(self, port: int, *extra: str) -> None:
        command = [self.server, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", "--dir", str(self.dir), *extra]
        command += ["--logfile", f"redis-{port}.log"]
        self._spawn(port, command)

    def _spawn(self, port: int, command: list[str]) -> None:
        self.processes[port] = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=self.dir
        )

        def answers() -> bool:
            with Redis(port=port, socket_timeout=1) as client:
                return bool(client.ping())

        wait_until(answers, timeout=10, what=f"redis on {port}")
