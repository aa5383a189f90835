"""Run an ASGI app under uvicorn in a background thread, for tests and the local demo.

Tests need a real HTTP server (slack_sdk and the bot speak HTTP) without owning the test's
event loop, so the server gets a daemon thread with a loop of its own.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from contextlib import suppress
from types import TracebackType
from typing import Any

import uvicorn


class StoppingServer(uvicorn.Server):
    """A uvicorn server that begins its shutdown as soon as `stop_soon()` is called, from any
    thread. uvicorn itself looks for a stop request once every 0.1 s: a test suite starts and
    stops servers by the hundred, and half a tick each adds up to seconds of its run."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken = asyncio.Event()

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864_000  # as uvicorn counts its ticks
            with suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), timeout=0.1)

    def stop_soon(self) -> None:
        self.should_exit = True
        if self._loop is not None:
            with suppress(RuntimeError):  # its loop already closed: it has stopped
                self._loop.call_soon_threadsafe(self._woken.set)


class _NotifyingServer(StoppingServer):
    """A uvicorn server that signals another thread once startup has finished (or failed)."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self._ready.set()


class RunningServer:
    """Handle to a server started by `serve_in_thread`; stop it or use it as a context."""

    def __init__(
        self,
        server: StoppingServer,
        thread: threading.Thread,
        host: str,
        port: int,
        scheme: str = "http",
    ) -> None:
        self._server = server
        self._thread = thread
        self.host = host
        self.port = port
        self.scheme = scheme

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to shut down gracefully and wait for its thread to finish."""
        self._server.stop_soon()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve_in_thread(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    graceful_timeout: float = 2.0,
    startup_timeout: float = 30.0,
    tls: tuple[str, str] | None = None,
    sock: socket.socket | None = None,
) -> RunningServer:
    """Serve `app` on host:port (0 picks a free port) and return once it accepts connections;
    over HTTPS with `tls`, the server's certificate file and key file.

    The socket is bound here rather than by uvicorn so the chosen port is known up front
    and there is no race between picking a free port and listening on it; or it is `sock`,
    bound (not listening) by whoever had to name the port before the server started.
    `graceful_timeout` bounds shutdown when responses are still in flight (e.g. stalled);
    `startup_timeout` only turns a wedged startup into an error instead of a hung test.
    """
    sock = sock or _bind(host, port)
    host = sock.getsockname()[0]
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_config=None,  # leave the host process's logging setup alone
        log_level="warning",
        access_log=False,
        lifespan="auto",  # run the app's startup/shutdown hooks if it has any
        timeout_graceful_shutdown=graceful_timeout,
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    ready = threading.Event()
    server = _NotifyingServer(config, ready)
    failure: list[BaseException] = []
    thread = threading.Thread(
        target=_run, args=(server, sock, ready, failure), name=f"uvicorn:{bound_port}", daemon=True
    )
    thread.start()
    ready.wait(startup_timeout)
    if not server.started:
        server.should_exit = True
        thread.join(graceful_timeout)
        sock.close()
        raise RuntimeError(f"server on {host}:{bound_port} failed to start") from (
            failure[0] if failure else None
        )
    return RunningServer(server, thread, host, bound_port, "https" if tls else "http")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says it is TCP, and without it every keep-alive response waits ~40 ms
    # for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _run(
    server: uvicorn.Server,
    sock: socket.socket,
    ready: threading.Event,
    failure: list[BaseException],
) -> None:
    try:
        # Runner (unlike a bare loop) cancels and awaits whatever uvicorn leaves behind
        # after a timed-out graceful shutdown, so stop() never strands pending tasks.
        with asyncio.Runner() as runner:
            runner.run(server.serve(sockets=[sock]))
    except BaseException as exc:  # includes uvicorn's sys.exit on startup failure
        failure.append(exc)
    finally:
        ready.set()  # never leave the starting thread waiting if serve() died early
