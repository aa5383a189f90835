"""`queuepilot demo --once`: a canned alert's life, printed as a terminal transcript.

`make demo` runs the live sandbox instead (`live_demo.py`); this replay stays for a quick look
without a browser, and its helpers (Redis for the demo, signals, output) serve both. It starts
what it needs (a throwaway `redis-server` unless REDIS_URL is set, the Slack Web API emulator,
the bot itself), then plays a Grafana queue alert's life through the bot's real webhook and
prints the Slack thread that resulted. Every step waits on what the emulator shows rather than
on fixed sleeps, so a slow machine makes the demo slower, not wrong. Whatever it started is
stopped on the way out, including after Ctrl-C, SIGTERM or an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx

from bot import logs
from bot.app import build_app, build_bot
from bot.checks import Finding, Verdict
from bot.checks.run import probe_all, render
from bot.config import Settings, SettingsError, load_settings
from sandbox.redis_server import RedisServer, RedisServerError, RedisServerNotFound, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import Message, SlackEmulator
from sandbox.transcript import render_message, render_thread

CHANNEL = "C0DEMO"
BOT_TOKEN = "xoxb-demo"
# The queue alert's real Grafana payloads (see tests/fixtures/README.md), shipped with the package.
FIXTURES = Path(__file__).resolve().parent / "alerts"
FIRING, RESOLVED = FIXTURES / "queue-alert-firing.json", FIXTURES / "queue-alert-resolved.json"
WORSE = {"max_queue_time_mins": 131, "max_queue_size": 19}
STEP_TIMEOUT = 20.0

T = TypeVar("T")


class DemoError(Exception):
    """Something the user can fix or should know about; shown as one line, exit code 1."""


def run_demo() -> int:
    """Replay the alert, print the thread, and stop everything."""
    configure_output()
    stack, code = ExitStack(), 0
    try:
        with signals(interrupt, signal.SIGINT, signal.SIGTERM):
            http, emulator = _start(stack)
            root_ts = _replay(http, emulator)
            say("\n" + render_thread(emulator.thread(CHANNEL, root_ts), channel=CHANNEL) + "\n")
    except DemoError as exc:
        print(f"queuepilot demo: {exc}", file=sys.stderr, flush=True)
        code = 1
    except BrokenPipeError:  # e.g. `make demo | head`: the reader left, so stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python's documented remedy
        code = 1
    except KeyboardInterrupt:
        say("\nStopping the bot, the Slack emulator and the demo's Redis…")
        code = 130
    finally:
        # Ignored while stopping, so a second Ctrl-C cannot strand a redis-server.
        with signals(signal.SIG_IGN, signal.SIGINT, signal.SIGTERM):
            stack.close()
    return code


def _start(stack: ExitStack) -> tuple[httpx.Client, SlackEmulator]:
    """Redis, emulator, bot (stopped in reverse order by `stack`); prints where each one is."""
    redis_url, prefix, redis_note = demo_redis(stack)
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,))
    slack = serve_in_thread(emulator.app)
    stack.callback(slack.stop)
    settings = _settings(f"{slack.url}/api/", redis_url, prefix)
    try:
        bot = serve_in_thread(build_app(build_bot(settings)), port=settings.port)
    except (OSError, RuntimeError) as exc:
        raise DemoError(f"the bot cannot listen on port {settings.port}: {exc}") from None
    stack.callback(bot.stop)
    found = checked(settings)
    token = settings.alert_webhook_token.get_secret_value()  # type: ignore[union-attr]
    http = stack.enter_context(
        httpx.Client(base_url=bot.url, timeout=10, headers={"Authorization": f"Bearer {token}"})
    )
    hint = _send_hint(bot.url, token)
    say(
        "queuepilot demo: the incident loop, locally, with an emulated Slack\n"
        f"  bot         {bot.url}  (POST /alerts/grafana, GET /healthz /readyz /metrics)\n"
        f"  Slack       {slack.url}/_emulator/state  (the emulated workspace as JSON)\n"
        f"  Redis       {redis_url}  ({redis_note})\n"
        f"  send        {hint}\n"
        f"`queuepilot check` against them:\n{render(found)}\n"
    )
    return http, emulator


def checked(settings: Settings) -> list[Finding]:
    """`queuepilot check`'s probes against the demo's own servers, once they are up; it must
    pass there (a failure is a stand-in answering otherwise than the real thing would). Run on a
    thread of its own: the caller may be inside an event loop."""
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(asyncio.run, probe_all(settings, {})).result()
    failed = [f for f in found if f.verdict is Verdict.FAIL]
    if failed:
        raise DemoError(f"the demo's own check failed:\n{render(failed)}")
    return found


def configure_output() -> None:
    """Quiet logs (the bot's JSON lines would drown the narration) and a stdout that never
    dies on an emoji it cannot encode."""
    verbose = os.environ.get("QUEUEPILOT_DEMO_VERBOSE") == "1"
    logs.configure("INFO" if verbose else "WARNING")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")


# Set by `interrupt`: the demo's loops stop on it even when the KeyboardInterrupt raised with it
# was lost (Python runs a signal's handler wherever the main thread is, a finalizer included, and
# an exception raised in a finalizer is only printed: the demo then went on narrating).
STOPPING = threading.Event()


def interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C and SIGTERM stop the demo alike."""
    STOPPING.set()
    raise KeyboardInterrupt


def check_stopping() -> None:
    """For the demo's loops: stop once asked to, whatever became of the interrupt."""
    if STOPPING.is_set():
        raise KeyboardInterrupt


@contextmanager
def signals(handler: Any, *signums: int) -> Iterator[None]:
    """`handler` for `signums` while inside; outside the main thread, signals are left alone."""
    previous = {}
    for signum in signums:
        with suppress(ValueError):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def say(text: str) -> None:
    print(text, flush=True)


# --- the servers ---------------------------------------------------------------------------------


def demo_redis(stack: ExitStack) -> tuple[str, str, str]:
    """(url, key prefix, note): REDIS_URL with a throwaway prefix, else a private redis-server."""
    url = os.environ.get("REDIS_URL")
    if not url:
        return _local_redis(stack), "qpdemo", "a private redis-server, removed on exit"
    prefix = f"qpdemo-{secrets.token_hex(4)}"
    from redis import Redis, RedisError

    try:
        client = stack.enter_context(Redis.from_url(url, socket_connect_timeout=2))
        client.ping()
    except (RedisError, ValueError) as exc:
        raise DemoError(f"cannot use REDIS_URL: {exc}") from None
    stack.callback(_delete_keys, client, f"{prefix}:*")
    return url, prefix, f"from REDIS_URL; demo keys under {prefix}:, deleted on exit"


def _delete_keys(client: Any, pattern: str) -> None:
    """Leave a shared Redis as it was; a failure here is not worth a traceback on the way out."""
    from redis import RedisError

    with suppress(RedisError):
        for key in client.scan_iter(pattern):
            client.delete(key)


def _local_redis(stack: ExitStack) -> str:
    """A private redis-server, stopped (and its temp dir removed) when `stack` closes."""
    try:
        return stack.enter_context(RedisServer()).url
    except RedisServerNotFound as exc:
        raise DemoError(f"{exc} or set REDIS_URL") from None
    except RedisServerError as exc:
        raise DemoError(str(exc)) from None


def _settings(api_url: str, redis_url: str, prefix: str) -> Settings:
    """Demo settings: no .env, fast cadences, fresh secrets; risky environment values overridden
    (an inherited SLACK_APP_TOKEN would switch to Socket Mode and talk to the real Slack)."""
    port_text = os.environ.get("PORT") or str(free_port())
    if not port_text.isdigit():
        raise DemoError(f"PORT must be a port number, not {port_text!r}")
    try:
        return load_settings(
            _env_file=None,
            slack_api_url=api_url,
            slack_channel=CHANNEL,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=secrets.token_hex(16),
            slack_app_token=None,
            redis_url=redis_url,
            redis_prefix=prefix,
            host="127.0.0.1",
            port=int(port_text),
            alert_webhook_token=secrets.token_urlsafe(16),
            alert_webhook_hmac_secret=None,
            alert_webhook_basic_user=None,
            alert_webhook_basic_password=None,
            status_interval_seconds=5,
            status_tick_seconds=0.5,
            slack_post_interval_ms=200,
            slack_update_interval_ms=200,
        )
    except SettingsError as exc:
        raise DemoError(f"bad setting: {exc}") from None


def _send_hint(bot_url: str, token: str) -> str:
    """The `send` command line, with paths relative to here when that makes them shorter."""
    python, fixture = (os.path.relpath(p) for p in (sys.executable, FIRING))
    python = "python" if python.startswith("..") else python
    fixture = str(FIRING) if fixture.startswith("..") else fixture
    return f"{python} -m bot send {fixture} --url {bot_url} --token {token}"


# --- the alert's life ----------------------------------------------------------------------------


def _replay(http: httpx.Client, emulator: SlackEmulator) -> str:
    """Fire, re-notify worse, let a status reply land, resolve; returns the thread's root ts."""
    started = datetime.now(UTC) - timedelta(minutes=3)
    firing = _payload(FIRING, started)
    worse = _payload(FIRING, started, values=WORSE)
    title = firing["commonLabels"]["alertname"]
    _step(f"Grafana fires: {title!r} ({_numbers(firing)})", http, firing)
    root = _wait_for(lambda: _root(emulator), "the incident thread to open")
    say(f"  ✓ thread opened in #{CHANNEL}: {root.text}")
    _step(f"Grafana re-notifies, worse: {_numbers(worse)}", http, worse)
    wait = f"{WORSE['max_queue_time_mins']} min"
    root = _wait_for(lambda: _root(emulator, containing=wait), "the root to show the new numbers")
    say(f"  ✓ root edited in place ({root.edits}×); while firing it reads:")
    say("\n".join(f"      {line}" for line in render_message(root)[1:]))
    say("▶ The bot posts a status reply every 5 s in the demo (10 min by default)…")
    status = _wait_for(lambda: _reply(emulator, root.ts, "Status update"), "a status reply")
    say(f"  ✓ {status.text}")
    resolved = _payload(RESOLVED, started, ends_at=datetime.now(UTC))
    _step("Grafana resolves: the queue drained", http, resolved)
    summary = _wait_for(lambda: _reply(emulator, root.ts, " resolved after "), "the summary")
    _wait_for(lambda: _root(emulator, containing="Resolved"), "the root to show it resolved")
    say(f"  ✓ {summary.text}")
    return root.ts


def _payload(
    path: Path,
    starts_at: datetime,
    *,
    ends_at: datetime | None = None,
    values: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A fixture with sensible times (its own are from 2025) and, optionally, other numbers."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DemoError(f"cannot read the demo alert {path}: {exc}") from None
    for alert in payload["alerts"]:
        alert["startsAt"] = _iso(starts_at)
        if ends_at is not None:
            alert["endsAt"] = _iso(ends_at)
        for name, value in (values or {}).items():
            alert["values"][name] = value
            pattern = rf"(var='{re.escape(name)}' labels=\{{\}} value=)[^ \]]+"
            alert["valueString"] = re.sub(pattern, rf"\g<1>{value}", alert["valueString"])
    return payload


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _numbers(payload: dict[str, Any]) -> str:
    values = payload["alerts"][0]["values"]
    return f"longest wait {values['max_queue_time_mins']} min, {values['max_queue_size']} queued"


def _step(narration: str, http: httpx.Client, payload: dict[str, Any]) -> None:
    """Narrate, then POST the payload to the bot's real Grafana webhook."""
    say(f"▶ {narration}")
    try:
        response = http.post("/alerts/grafana", json=payload)
    except httpx.HTTPError as exc:
        raise DemoError(f"the bot did not answer the webhook: {exc}") from None
    if response.status_code != 202:
        raise DemoError(f"the bot refused the alert: {response.status_code} {response.text}")


def _root(emulator: SlackEmulator, containing: str = "") -> Message | None:
    roots = emulator.channel_messages(CHANNEL)
    return roots[0] if roots and containing in roots[0].text else None


def _reply(emulator: SlackEmulator, root_ts: str, containing: str) -> Message | None:
    replies = emulator.thread(CHANNEL, root_ts)[1:]
    return next((m for m in replies if containing in m.text), None)


def _wait_for(check: Callable[[], T | None], what: str, timeout: float = STEP_TIMEOUT) -> T:
    """Poll the emulator until `check` finds something; a clear error instead of a hang."""
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        if time.monotonic() > deadline:
            raise DemoError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return found
