"""ARC's AutoscalingRunnerSet controller, as far as the set's own object shows it: what ARC 0.14's
(`controllers/actions.github.com/autoscalingrunnerset_controller.go`) writes back after the set's
spec changed, whoever changed it.

Its reconcile sees the spec's hash differ from the `actions.github.com/change-hash` annotation:
it patches the annotation (a metadata write) and the status to phase `Pending`; 0.14's status
patch takes its counts from no ephemeral runner set, so `currentRunners` and the ephemeral
runners' counts read 0 meanwhile. The next reconciles find the listener's spec hash out of date,
delete the listener and create it again (the listener pod restarts with the new bounds), then
write phase `Running` with the ephemeral runner set's counts. Each write moves the
resourceVersion; none touches the spec, so the generation stays. Its writes carry no
resourceVersion (controller-runtime's `MergeFrom`), so they never conflict; a client that read
the set before them gets a 409 on its next patch. A change during the reaction starts it again.

It reacts `after_s` after the change and again `after_s` later (a watch event and a requeue, in a
cluster milliseconds to seconds); with `after_s` None it reacts only when told (`reconcile`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.kube_api import KubeApi

CHANGE_HASH = "actions.github.com/change-hash"
MANAGER = "manager"  # ARC's binary: the API server names a manager after its User-Agent
COUNTS = (
    "currentRunners",
    "pendingEphemeralRunners",
    "runningEphemeralRunners",
    "failedEphemeralRunners",
)
# Kubernetes' `rand.SafeEncodeString` alphabet: no vowels, no look-alikes.
SAFE = "bcdfghjklmnpqrstvwxz2456789"

Key = tuple[str, str]


@dataclass
class ArcController:
    api: KubeApi
    after_s: float | None = 0.05
    listeners: dict[Key, int] = field(default_factory=dict)  # listeners created, per set
    _loop: asyncio.AbstractEventLoop | None = None
    _tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict)
    _objects: dict[Key, int] = field(default_factory=dict)  # a set made anew: another object
    _counts: dict[Key, dict[str, Any]] = field(default_factory=dict)  # the runner set's

    def serving(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the API answers on: the controller's reactions run there."""
        self._loop = loop

    def spec_changed(self, key: Key) -> None:
        """Called by any writer of the spec, from any thread."""
        if self.after_s is None or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody serves the API now
            self._loop.call_soon_threadsafe(self._start, key)

    def created(self, key: Key) -> None:
        """A set made anew at `key`: a reaction to the object it replaced ends, unwritten."""
        self._objects[key] = self._objects.get(key, 0) + 1
        self._counts.pop(key, None)

    def reconcile(self, key: Key) -> None:
        """The whole reaction at once, for a test that places it between two requests."""
        self._pending(key)
        self._running(key)

    def _start(self, key: Key) -> None:
        running = self._tasks.get(key)
        if running is not None:
            running.cancel()  # the spec changed again: the reconcile starts over
        self._tasks[key] = asyncio.get_running_loop().create_task(self._react(key))

    async def _react(self, key: Key) -> None:
        delay, made = self.after_s or 0.0, self._objects.get(key, 0)
        await asyncio.sleep(delay)
        if self._objects.get(key, 0) == made:
            self._pending(key)
        await asyncio.sleep(delay)
        if self._objects.get(key, 0) == made:
            self._running(key)

    def _pending(self, key: Key) -> None:
        runner_set = self.api.sets.get(key)
        if runner_set is None:
            return
        target = change_hash(runner_set)
        if (runner_set["metadata"].get("annotations") or {}).get(CHANGE_HASH) == target:
            return
        self.api.annotate(key, MANAGER, {CHANGE_HASH: target})
        status = self.api.sets[key].get("status") or {}
        self._counts.setdefault(key, {name: status.get(name, 0) for name in COUNTS})
        pending = {"phase": "Pending"} | dict.fromkeys(COUNTS, 0)
        self.api.write(key[1], manager=MANAGER, status=pending, namespace=key[0])

    def _running(self, key: Key) -> None:
        if key not in self.api.sets:
            return
        self.listeners[key] = self.listeners.get(key, 0) + 1
        counts = self._counts.pop(key, {})
        status = self.api.sets[key].get("status") or {}
        if status.get("phase") != "Running":
            running = {"phase": "Running"} | counts
            self.api.write(key[1], manager=MANAGER, status=running, namespace=key[0])


def change_hash(runner_set: dict[str, Any]) -> str:
    """A hash of the spec and labels in the shape of ARC's (FNV-1a 32 of the two, its decimal
    safe-encoded): it changes exactly when they do."""
    data = {"spec": runner_set.get("spec"), "labels": runner_set["metadata"].get("labels")}
    value = 0x811C9DC5
    for byte in json.dumps(data, sort_keys=True).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE[ord(digit) % len(SAFE)] for digit in str(value))
