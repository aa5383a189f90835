"""Benchmarks: `make bench` runs each module; numbers depend on the machine."""

from __future__ import annotations

from typing import Any

from sandbox.slack_api import SlackEmulator


def incident_roots(emulator: SlackEmulator, channel: str) -> list[Any]:
    """The channel's incident root messages, in post order: a storm digest is not one."""
    return [
        m
        for m in emulator.channel_messages(channel)
        if ((m.metadata or {}).get("event_payload") or {}).get("incident")
    ]
