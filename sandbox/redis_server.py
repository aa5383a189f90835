"""A throwaway `redis-server` for the local demo and the tests.

Both want the same thing: a real Redis on a loopback port, without persistence, that is gone
when they are done, even when they are killed before they can clean up.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

NOT_FOUND = "redis-server not found: install it (apt-get install redis-server)"
# Another process may take a free port before redis binds it; a new port usually fixes that.
_FIRST_START_ATTEMPTS = 3
_STARTUP_TIMEOUT = 10.0
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class RedisServerError(RuntimeError):
    """redis-server could not be run; the message says why in one line, fit to show a user."""


class RedisServerNotFound(RedisServerError):
    """There is no redis-server binary to run."""


def free_port() -> int:
    """A loopback port nobody listens on now (nothing stops another process taking it next).

    With QUEUEPILOT_PORT_BAND=LOW-HIGH set (parallel test workers each get their own band, see
    tests/conftest.py) the port comes from that band: two workers never pick the same port, and a
    band below Linux's ephemeral range is never held by an outgoing connection."""
    band = os.environ.get("QUEUEPILOT_PORT_BAND")
    if band:
        low, high = (int(part) for part in band.split("-"))
        for _ in range(200):
            port = random.randint(low, high)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """`redis-server` on 127.0.0.1 without persistence, in a temp dir that stop() removes.

    stop() then start() is a Redis restart: the same port (clients keep their URL), no data.
    On Linux the server is sent SIGTERM when the thread that started it dies, so a killed demo
    or test run does not leave it behind; start it from a thread that outlives it.
    Also a context manager: `with RedisServer() as redis:` starts it and stops it.
    """

    def __init__(self, *, binary: str | None = None) -> None:
        found = binary or shutil.which("redis-server")
        if found is None:
            raise RedisServerNotFound(NOT_FOUND)
        self.binary = found
        self.port = free_port()
        self.dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._port_is_known = False  # once a start succeeded, callers hold the URL

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Return once redis answers PING; a failed or interrupted start leaves nothing behind."""
        if self.process is not None:
            return
        try:
            self.dir = Path(tempfile.mkdtemp(prefix="qp-redis-"))
            for attempt in range(1 if self._port_is_known else _FIRST_START_ATTEMPTS):
                if attempt:
                    self.port = free_port()
                if self._launch():
                    self._port_is_known = True
                    return
            raise RedisServerError(f"redis-server did not start: {_log_tail(self.dir)}")
        except BaseException:  # Ctrl-C while waiting must not strand a redis-server either
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and remove its directory; the port is kept for the next start()."""
        if self.process is not None:
            _stop_process(self.process)
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def flush(self) -> None:
        """Empty every database, so each test starts from a blank Redis without a restart."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _launch(self) -> bool:
        """One attempt on `self.port`: True once redis answers, else False with it stopped."""
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", "--dir", str(self.dir), "--logfile", "redis.log"]
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches only us, and we stop redis last
                preexec_fn=_death_signal_setter(),
            )
        except OSError as exc:  # e.g. a binary that is not executable
            raise RedisServerError(f"redis-server did not start: {exc}") from None
        if _answers(self.process, self.port):
            return True
        _stop_process(self.process)
        self.process = None
        return False


def _answers(process: subprocess.Popen[bytes], port: int) -> bool:
    """Poll until this process's redis answers, exits (a taken port, say) or the timeout passes.

    The answer must name our process: another redis that took the port first would answer too,
    and two test runs sharing one Redis would empty each other's data."""
    deadline = time.monotonic() + _STARTUP_TIMEOUT
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"INFO server\r\n")
                answer = b""
                while b"process_id:" not in answer or not answer.endswith(b"\r\n"):
                    chunk = sock.recv(8192)
                    if not chunk:
                        break
                    answer += chunk
                if f"process_id:{process.pid}\r\n".encode() in answer:
                    return True
                if b"process_id:" in answer:
                    return False  # someone else's redis holds the port
        except OSError:
            pass
        time.sleep(0.05)
    return False


def _log_tail(workdir: Path) -> str:
    """redis-server explains a failed start (a taken port, a bad option) in its log."""
    log = workdir / "redis.log"
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    return " / ".join(tail) or "no log"


def _death_signal_setter() -> Callable[[], object] | None:
    """On Linux, a preexec_fn that has the kernel SIGTERM the child if its parent dies first.

    prctl is looked up here, in the parent: between fork and exec the child should only call
    it, since loading a library there can deadlock when the parent runs other threads.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
