"""Benchmarks: `make bench` runs each module; numbers depend on the machine."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import httpx

from sandbox.slack_api import SlackEmulator

ROOT = Path(__file__).resolve().parent.parent


def incident_roots(emulator: SlackEmulator, channel: str) -> list[Any]:
    """The channel's incident root messages, in post order: a storm digest is not one."""
    return [
        m
        for m in emulator.channel_messages(channel)
        if ((m.metadata or {}).get("event_payload") or {}).get("incident")
    ]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def wait_until_up(check: Any, what: str, timeout: float = 30) -> None:
    """Poll `check` (an HTTP probe) until it holds; a TimeoutError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not start")


def write_table(marker: str, header: str, lines: list[str]) -> None:
    """Put a bench's table into docs/benchmarks.md between `<!-- marker:start/end -->`."""
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else ""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    block = f"{start}\n{header}\n\n" + "\n".join(lines) + f"\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text += ("\n" if text else "") + block + "\n"
    path.write_text(text)
