"""A change on fresh state: read, decide, write fenced by the version read; when another write
came first, read again and decide again on what the state became. The one loop for it, with its
one limit: an incident's commit (`IncidentStore.commit_fresh`) and an early warning's save
(`WarningStore.save_fresh`) both take it.

The leader is the one writer, and still a write can find its state moved on since it was read:
the leader's own tasks interleave at every await (intake applying a notification, a status tick
and a click on the same incident each read, then write), and during a rolling upgrade a replica
of 0.25 writes beside it. Each such race is lost to one write of a few milliseconds, so a change
that loses `ATTEMPTS` times in a row meets a state changing without pause: its caller says so (a
click is told to try again) rather than wait on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

ATTEMPTS = 20


async def on_fresh_state(attempt: Callable[[], Awaitable[bool]]) -> bool:
    """Run `attempt` until it is done, `ATTEMPTS` times at most; whether it got done. Each
    attempt reads, decides and writes fenced by what it read: True when done (written, or nothing
    to write), False when another write came first."""
    for _ in range(ATTEMPTS):
        if await attempt():
            return True
    return False
