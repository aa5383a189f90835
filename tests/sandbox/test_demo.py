"""`queuepilot demo`: the terminal transcript (pure) and the whole demo as a user runs it."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox.live_demo import PREFERRED_PAGE_PORT
from sandbox.slack_api import Message
from sandbox.transcript import mrkdwn_to_text, render_block, render_thread
from tests.support.servers import require_binary

REPO = Path(__file__).resolve().parents[2]
TITLE = "Jobs queueing in autoscaled machines"


def message(ts: str, *, blocks: list[dict[str, Any]] | None = None, **fields: Any) -> Message:
    values: dict[str, Any] = {"text": "", "thread_ts": None, "user": "U0QUEUEBOT"} | fields
    return Message(ts=ts, channel="C0DEMO", blocks=blocks or [], **values)


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


# --- mrkdwn ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        (
            "<https://hud.pytorch.org/metrics|📖 Runbook>",
            "📖 Runbook (https://hud.pytorch.org/metrics)",
        ),
        ("<https://example.com/a>", "https://example.com/a"),
        ("<https://g.net/x?a=1&amp;b=2|View>", "View (https://g.net/x?a=1&b=2)"),
        ("acknowledged by <@U0ALICE>", "acknowledged by @U0ALICE"),
        ("<@U0ALICE|alice>", "@alice"),
        ("<#C0DEMO|queue-alerts>", "#queue-alerts"),
        ("<!subteam^S0ONCALL>", "@S0ONCALL"),
        ("<!here>", "@here"),
        (
            "Started <!date^1764555780^{date_short_pretty} {time}|2025-12-01 02:23 UTC>",
            "Started 2025-12-01 02:23 UTC",
        ),
        ("a &lt;b&gt; &amp; c", "a <b> & c"),
        # Not a link, mention or command: a link to nowhere, shown as its label or not at all.
        ("`/queue silence <duration> [ID]`", "`/queue silence  [ID]`"),
        ("`/queue silence &lt;duration&gt; [ID]`", "`/queue silence <duration> [ID]`"),
        ("see <not a link|the label>", "see the label"),
        ("&amp;lt;channel&amp;gt;", "&lt;channel&gt;"),
        ("*Firing* · ID *1*", "Firing · ID 1"),
        ("_No queue numbers in the alert._", "No queue numbers in the alert."),
        ("linux_2xlarge and 2*3*4", "linux_2xlarge and 2*3*4"),
        ("see <https://x.io/_a_/*b*|docs>", "see docs (https://x.io/_a_/*b*)"),
        ("*<https://x.io|bold link>*", "bold link (https://x.io)"),
    ],
)
def test_mrkdwn_is_shown_as_a_reader_sees_it(source: str, shown: str) -> None:
    assert mrkdwn_to_text(source) == shown


def test_channels_and_people_show_their_names_in_text_and_blocks() -> None:
    names = {"C0GPU": "gpu-ci-incidents", "U0ALICE": "alice"}
    assert (
        mrkdwn_to_text("in <#C0GPU> by <@U0ALICE>", names=names) == "in #gpu-ci-incidents by @alice"
    )
    assert mrkdwn_to_text("<#C0GPU|old-name>", names=names) == "#gpu-ci-incidents"
    assert mrkdwn_to_text("<#C0OTHER|other> <#C0NONE>", names=names) == "#other #C0NONE"
    block = {"type": "context", "elements": [mrkdwn("1 open in <#C0GPU>")]}
    assert render_block(block, names=names) == ["1 open in #gpu-ci-incidents"]


def test_emphasis_can_be_kept() -> None:
    assert (
        mrkdwn_to_text("Longest wait: *131 min*", keep_emphasis=True) == "Longest wait: *131 min*"
    )


# --- blocks ----------------------------------------------------------------------------------


def test_blocks_become_plain_lines() -> None:
    blocks = [
        {"type": "header", "text": plain("🔴 P2 · Jobs &amp; queues")},
        {"type": "section", "text": mrkdwn("🔴 *Firing* · not acknowledged\nsecond line")},
        {"type": "section", "fields": [mrkdwn("Longest wait: *131 min*"), mrkdwn("Queued: *19*")]},
        {"type": "divider"},
        {"type": "context", "elements": [mrkdwn("Incident *1*"), mrkdwn("Source: Grafana")]},
    ]
    lines = [line for block in blocks for line in render_block(block)]
    assert lines == [
        "🔴 P2 · Jobs & queues",
        "🔴 Firing · not acknowledged",
        "second line",
        "Longest wait: 131 min",
        "Queued: 19",
        "─" * 40,
        "Incident 1 · Source: Grafana",
    ]


def test_actions_show_buttons_and_the_select() -> None:
    def button(text: str) -> dict[str, Any]:
        return {"type": "button", "text": plain(text), "action_id": text, "value": "1"}

    select = {"type": "static_select", "action_id": "s", "placeholder": plain("Silence…")}
    block = {"type": "actions", "elements": [button("Acknowledge"), select, button("Resolve")]}
    assert render_block(block) == ["[Acknowledge] [Silence… ▾] [Resolve]"]


def test_a_long_context_wraps_between_elements() -> None:
    links = [mrkdwn(f"<https://example.com/{'x' * 40}/{n}|link {n}>") for n in range(3)]
    lines = render_block({"type": "context", "elements": links})
    assert len(lines) == 3
    assert lines[0] == f"link 0 (https://example.com/{'x' * 40}/0)"


def test_unknown_blocks_are_named_not_dropped() -> None:
    assert render_block({"type": "rich_text", "elements": []}) == ["[rich_text block]"]


# --- threads ---------------------------------------------------------------------------------


def test_thread_shows_the_root_then_indented_replies_and_edit_counts() -> None:
    root = message(
        "1764555780.000001",
        text="fallback, not shown",
        blocks=[{"type": "header", "text": plain("✅ Queue alert")}],
        edits=2,
    )
    status = message(
        "1764555790.000002",
        thread_ts=root.ts,
        blocks=[{"type": "section", "text": mrkdwn("*📊 Status update*\nFiring for *3 min*")}],
    )
    summary = message("1764555800.000003", thread_ts=root.ts, text="Incident *1* resolved")
    lines = render_thread([root, status, summary], channel="C0DEMO").split("\n")
    assert lines == [
        "━━ #C0DEMO · thread 1764555780.000001 · 2 replies ━━",
        "queuepilot · 02:23:00 UTC · edited 2×",
        "  ✅ Queue alert",
        "",
        "    ↳ queuepilot · 02:23:10 UTC",
        "      📊 Status update",
        "      Firing for 3 min",
        "",
        "    ↳ queuepilot · 02:23:20 UTC",
        "      Incident 1 resolved",
    ]


def test_an_empty_thread_says_so() -> None:
    assert render_thread([], channel="C0DEMO") == "#C0DEMO: (no messages)"


# --- the demo itself -------------------------------------------------------------------------


def demo_env(**extra: str) -> dict[str, str]:
    """The caller's environment without REDIS_URL/PORT, so the demo starts its own Redis; its
    page on a port of its own (`DEMO_PORT` 0), never the preferred 8080 that a demo in another
    worker, or the developer's own, may hold or take the moment this one lets it go."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PORT")}
    return env | {"PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1", "DEMO_PORT": "0"} | extra


def demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sandbox", *args]


def redis_port(output: str) -> int:
    found = re.search(r"redis://127\.0\.0\.1:(\d+)", output)
    assert found, f"the demo did not print its Redis URL:\n{output}"
    return int(found.group(1))


def assert_nothing_listens(port: int) -> None:
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


@pytest.mark.slow
def test_demo_once_replays_the_alert_and_cleans_up() -> None:
    require_binary("redis-server")
    result = subprocess.run(
        demo_command("--once"),
        cwd=REPO,
        env=demo_env(),
        capture_output=True,
        encoding="utf-8",
        timeout=60,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    assert TITLE in result.stdout
    assert "131 min" in result.stdout, "the re-notification's worse number"
    assert "📊 Status update" in result.stdout
    assert "[Acknowledge] [Silence… ▾]" in result.stdout, "the firing root's actions"
    assert re.search(r"Incident \S+ resolved", result.stdout), "the closing summary"
    assert "/_emulator/state" in result.stdout
    assert_nothing_listens(redis_port(result.stdout))


def test_demo_without_redis_server_says_how_to_get_one(tmp_path: Path) -> None:
    result = subprocess.run(
        demo_command("--once"),
        cwd=REPO,
        env=demo_env(PATH=str(tmp_path)),
        capture_output=True,
        encoding="utf-8",
        timeout=60,
    )
    assert result.returncode == 1
    assert "redis-server not found: install it (apt-get install redis-server)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_running_demo_prints_the_page_first_opens_the_incident_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    """The path a visitor gets: `make demo`'s command, its fleet sped up as its pace note
    offers (`DEMO_ARGS=--speed=…`; the SIGTERM test below runs it at its default speed). With
    no DEMO_PORT and the preferred page port held (by the developer's own demo, say), the page
    takes another port and says which."""
    require_binary("redis-server")
    env = {k: v for k, v in demo_env().items() if k != "DEMO_PORT"}
    with (
        (tmp_path / "stderr").open("w+", encoding="utf-8") as stderr,
        socket.socket() as held,
    ):
        with contextlib.suppress(OSError):  # held by someone else already: held all the same
            held.bind(("127.0.0.1", PREFERRED_PAGE_PORT))
            held.listen()
        process = subprocess.Popen(
            demo_command("--speed", "60"),
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            encoding="utf-8",
        )
        try:
            lines = LineReader(process.stdout)
            first = lines.until("\n", timeout=60)
            page = re.match(r"queuepilot demo: open http://127\.0\.0\.1:(\d+)/ ", first)
            assert page is not None and int(page.group(1)) != PREFERRED_PAGE_PORT, first
            # The fleet's burst makes the alert fire, and the bot opens the incident, in ~10 s.
            started = first + lines.until("[new root]", timeout=120)
            process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
            stopped = process.poll() is not None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        output = started + lines.rest() + stderr.read()
    assert stopped, f"still running 30 s after Ctrl-C:\n{output}"
    assert process.returncode == 0, output
    assert "Traceback" not in output
    assert "Stopping" in output
    for port in set(listening_ports(started)) - {PREFERRED_PAGE_PORT}:
        assert_nothing_listens(port)


@pytest.mark.slow
def test_running_demo_stops_everything_on_sigterm(tmp_path: Path) -> None:
    require_binary("redis-server")
    with (tmp_path / "stderr").open("w+", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            demo_command(),
            cwd=REPO,
            env=demo_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            encoding="utf-8",
        )
        try:
            lines = LineReader(process.stdout)
            started = lines.until("Ctrl-C stops everything", timeout=60)
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        output = started + lines.rest() + stderr.read()
    assert process.returncode == 0, output
    assert "Traceback" not in output
    for port in listening_ports(started):
        assert_nothing_listens(port)


def listening_ports(output: str) -> list[int]:
    """Every port the demo said it listens on (page, bot, fleet, Redis)."""
    ports = [int(p) for p in re.findall(r"(?:http|redis)://127\.0\.0\.1:(\d+)", output)]
    assert len(ports) >= 4, f"the demo did not print where it listens:\n{output}"
    return ports


class LineReader:
    """A child's stdout read by a thread, so waiting for a line can time out instead of hang."""

    def __init__(self, stream: Any) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            self._lines.put(line)

    def until(self, needle: str, *, timeout: float) -> str:
        """Everything read up to and including the first line containing `needle`."""
        seen = ""
        deadline = time.monotonic() + timeout
        while needle not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {needle!r} within {timeout} s:\n{seen}")
            with contextlib.suppress(queue.Empty):
                seen += self._lines.get(timeout=remaining)
        return seen

    def rest(self) -> str:
        """What is left once the child has exited (its stdout is at end of file)."""
        self._thread.join(timeout=5)
        out = []
        while not self._lines.empty():
            out.append(self._lines.get_nowait())
        return "".join(out)
