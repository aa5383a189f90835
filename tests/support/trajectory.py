"""Trajectories: a served bot watching one scripted ARC scale set (`fakes/arc_script.py`) through
a real Prometheus, its incident read as a responder reads it, surface by surface, after each step.

The judgement a responder acts on (which way the queue goes, how many runners would drain it) is
decided once per reading and rendered by every surface (ARCHITECTURE.md, "One judgement per
reading"). So after each step the harness waits for one reading that shows the step, then reads
the root, the latest status (where it shows that reading: one is posted on a material change), a
diagnostics reply, `/queue` and the Scale up… modal's default while that reading is still the
current one (each surface but the modal names the time of its
reading; the modal is read between two looks at the stored reading), and records what each said
(`Look`). If a newer reading lands meanwhile, it reads them all again. What the text says is
read in `trajectory_text.py` alone; what it should have said is checked in `trajectory_checks.py`.

Time runs fast here: a reading every `READING_S` seconds instead of every minute, and the rates'
window kept at the default's ten readings (10 min at one a minute), so a turn takes as many
readings to reach the rates as it would in production. The drain target and the jobs run at the
same pace (30 min and 5 min in production time), so the advice is sized as in production: a
queue of 30 holding gets +5, one rising 5 jobs a reading some +30. A responder may ask for
diagnostics once per 30 s; that cooldown is spent by hand before each click, as thirty seconds
would.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.domain.reading.fleet import RunnerTypeMetrics
from tests.support.fakes.arc_script import NAMESPACE, ScriptedScaleSet, Step
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import as_group
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.scale import form_values, view_submission
from tests.support.slack import CHANNEL, USER, Slack, click, post_event, slash
from tests.support.trajectory_checks import CAP, RUNNER_TYPE, Look, problems, table
from tests.support.trajectory_text import (
    Direction,
    initial_of,
    shown_text,
    stamp_of,
    target_refusal,
)

SCALE_SET = "linux-2xlarge"  # as Helm names the release serving linux.2xlarge
READING_S = 4  # at 2 s a loaded 2-core machine read one step of the surge as holding
PACE = 60 / READING_S  # production minutes to a minute here: one reading each
WINDOW_READINGS = 10  # PROMETHEUS_RATE_WINDOW's default (10m) over METRICS_INTERVAL's (1 min)
SCRAPE_S = 0.5
DRAIN_TARGET_MINUTES = 30 / PACE  # DRAIN_TARGET_MINUTES's default
JOB_MINUTES = 5 / PACE
ATTEMPTS = 4  # tries at reading every surface within one reading


@dataclass(frozen=True)
class ScaleUp:
    """A submitted default: what the form held, the scale set's spec around it, and the
    refusal a responder was shown, if any."""

    amount: int
    mode: str | None
    before: dict[str, int]
    after: dict[str, int]
    refusal: str
    said: str = ""  # the form, as it opened

    @property
    def accepted(self) -> bool:
        """The target took it: the field the form raises went up by the form's amount."""
        field = "maxRunners" if self.mode == "raise_max" else "minRunners"
        return not self.refusal and self.after[field] == self.before[field] + self.amount


class Trajectory:
    """One incident's thread read after each step of the script."""

    def __init__(
        self, name: str, running: RunningBot, slack: Slack, fleet: ScriptedScaleSet, root: Any
    ) -> None:
        self.name = name
        self.running = running
        self.slack = slack
        self.fleet = fleet
        self.root_ts = root.ts
        self.looks: list[Look] = []
        self.incident_id = ""
        self._holding = False  # the bot's refresh, so no newer reading lands during a look

    def problems(self) -> list[str]:
        return problems(self.looks)

    def table(self) -> str:
        return table(self.name, self.looks)

    # -- a step and what it shows --------------------------------------------------------------

    async def look(self, step: Step, *, expect: Direction | None = None) -> Look:
        """Apply `step`, then read every surface after one reading that shows it."""
        shown = self.fleet.apply(step)
        look = Look(len(self.looks), shown, expect)
        self.looks.append(look)
        try:
            for attempt in range(1, ATTEMPTS + 1):
                look.attempts = attempt
                stamp, metrics = await self._settled(shown)
                look.rates = (metrics.arrival_per_min, metrics.completed_per_min)
                diagnostics, queue = await self.diagnostics(), await self.queue()
                held = await self._stored_stamp()
                view = await self.form()
                look.said = {"root": self.root(), "diagnostics": diagnostics, "/queue": queue}
                # A status is posted only on a material change: a surface where it shows this one.
                if stamp_of(status := self.latest_status()) == stamp:
                    look.said["status"] = status
                look.form, look.mode = initial_of(view, "amount"), initial_of(view, "mode")
                read = {stamp_of(text) for text in look.said.values()}
                if read | {held, await self._stored_stamp()} == {stamp}:
                    look.stamp = stamp
                    break
        finally:
            self._let_go()
        if look.form is None:
            return look  # nothing advised, nothing filled in: nothing to submit by accident
        answer = await self.submit_default(view)
        if answer.get("response_action") == "update":
            confirmation = shown_text(answer["view"])
            look.refused = target_refusal(confirmation, self.fleet.spec, shown.registered)
        else:
            look.refused = f"the form: {json.dumps(answer.get('errors') or answer)}"
        return look

    async def _settled(self, shown: Step) -> tuple[int, RunnerTypeMetrics]:
        """The time of the first reading taken after `shown` was scraped, once the root renders
        it, and linux.2xlarge's numbers in it. From that reading on,
        the bot's refresh is held until the look is done: a later reading of the same numbers
        says the queue held, and reading every surface takes longer than READING_S on a loaded
        machine."""
        wanted = (shown.queued, shown.busy, shown.registered, shown.maximum)

        async def settled() -> tuple[int, RunnerTypeMetrics]:
            # Each way of not being there yet says what it saw: the wait's failure shows the last.
            reading = await self._reading()
            assert reading is not None and reading[1] is not None, f"no reading: {reading}"
            taken, metrics = reading
            read = (metrics.queued, metrics.busy, metrics.registered, metrics.maximum)
            assert read == wanted, f"the reading at {taken:.1f} read {read}"
            assert taken >= self.fleet.applied_at + 2 * SCRAPE_S, f"{taken:.1f}: before the step"
            if not self._holding:
                await self._hold()
                assert await self._stored_stamp() == int(taken), "a newer reading landed"
            root = self.root()
            assert stamp_of(root) == int(taken), f"reading {int(taken)}; root: {root}"
            return int(taken), metrics

        step = len(self.looks) - 1
        found = await eventually(settled, what=f"a reading of step {step}", timeout=30)
        return int(found[0]), found[1]

    async def _hold(self) -> None:
        """Hold the bot's refresh: while it is held, every reader gets the stored reading."""
        readings = self.running.bot.readings
        assert readings is not None, "a trajectory reads Prometheus"
        await readings._refreshing.acquire()
        self._holding = True

    def _let_go(self) -> None:
        if self._holding and self.running.bot.readings is not None:
            self.running.bot.readings._refreshing.release()
            self._holding = False

    async def _reading(self) -> tuple[float, RunnerTypeMetrics | None] | None:
        """The bot's current reading: when it was taken, and linux.2xlarge's numbers in it."""
        readings = self.running.bot.readings
        reading = await readings.stored() if readings is not None else None
        if reading is None or reading.fleet is None:
            return None
        return reading.fleet.at.timestamp(), reading.fleet.runner_types.get(RUNNER_TYPE)

    async def _stored_stamp(self) -> int | None:
        reading = await self._reading()
        return int(reading[0]) if reading else None

    # -- the surfaces --------------------------------------------------------------------------

    def thread(self) -> list[Any]:
        return self.slack.emulator.thread(CHANNEL, self.root_ts)

    def root(self) -> str:
        return shown_text(self.thread()[0])

    def latest_status(self) -> str:
        statuses = [m for m in self.thread()[1:] if m.text.startswith("Status update")]
        return shown_text(statuses[-1]) if statuses else ""

    async def diagnostics(self) -> str:
        """A diagnostics reply, asked for with the root's button."""
        bot = self.running.bot
        await bot.redis.delete(bot.store.keys.action_lock(self.incident_id, "diagnose"))
        before = len(self._diagnostics())
        assert (await click(self.running, self.thread()[0], "incident_diagnose")).status_code == 200
        replies = await eventually(
            lambda: self._diagnostics()[before:], what="a diagnostics reply", timeout=15
        )
        return str(replies[-1])

    def _diagnostics(self) -> list[str]:
        return [shown_text(m) for m in self.thread()[1:] if m.text.startswith("Diagnostics")]

    async def queue(self) -> str:
        """`/queue`'s answer."""

        def answers() -> list[str]:
            found = [shown_text(m) for m in self.slack.emulator.ephemerals(CHANNEL)]
            return [text for text in found if "Queue by runner type" in text]

        before = len(answers())
        assert (await post_event(self.running.http, slash(""))).status_code == 200
        return str((await eventually(lambda: answers()[before:], what="/queue's answer"))[-1])

    async def form(self) -> dict[str, Any]:
        """The Scale up… modal, once it shows the capacity it read."""
        before = len(self.slack.emulator.views())
        assert (await click(self.running, self.thread()[0], "incident_scale")).status_code == 200

        def filled() -> dict[str, Any] | None:
            opened = self.slack.emulator.views()[before:]
            text = shown_text(opened[-1]) if opened else ""
            return opened[-1] if "Now:" in text or "cannot report" in text else None

        # The default wait: the form fills in after a capacity read the bot allows 10 s
        # (PREVIEW_IN_FORM_S), between two Slack calls.
        return dict(await eventually(filled, what="the Scale up… modal"))

    async def submit_default(self, view: dict[str, Any]) -> dict[str, Any]:
        """The form submitted as it opened; the bot's answer (the confirmation, or errors)."""
        amount, mode = initial_of(view, "amount"), initial_of(view, "mode")
        values = form_values(RUNNER_TYPE, str(amount), mode)
        response = await post_event(self.running.http, view_submission(view, values))
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def scale_by_default(self) -> ScaleUp:
        """Open the modal, submit its default and confirm it, as a responder in a hurry would."""
        view = await self.form()
        amount, mode, said = initial_of(view, "amount"), initial_of(view, "mode"), shown_text(view)
        before, patches = self.fleet.spec, len(self.fleet.kube.patches)
        answer = await self.submit_default(view)
        if answer.get("response_action") != "update":
            return ScaleUp(amount, mode, before, before, f"the form refused: {answer}", said)
        confirm = {**answer["view"], "id": view["id"]}
        response = await post_event(self.running.http, view_submission(confirm, {}))
        assert response.json() == {"response_action": "clear"}, response.text

        def told() -> str | None:
            said = [t for t in map(shown_text, self.thread()[1:]) if "Scaled" in t]
            said += [t for t in self._ephemerals() if "Could not scale" in t]
            return said[-1] if said else None

        answered = await eventually(told, what="the scale-up's answer", timeout=15)
        if "Could not scale" in answered:
            return ScaleUp(amount, mode, before, self.fleet.spec, answered, said)
        await eventually(lambda: len(self.fleet.kube.patches) > patches, what="the patch")
        return ScaleUp(amount, mode, before, self.fleet.spec, "", said)

    async def root_saying(self, words: str) -> str:
        """The root, once it says `words` (a scale-up's runners, counted)."""

        def saying() -> str | None:
            root = self.root()
            return root if words in root else None

        return str(await eventually(saying, what=f"the root saying {words!r}"))

    def _ephemerals(self) -> list[str]:
        return [shown_text(m) for m in self.slack.emulator.ephemerals(CHANNEL)]

    async def resolved_by_drain(self) -> str:
        """The summary, once the root says the incident resolved on its drained queue."""
        await eventually(
            lambda: "Resolved" in self.root() and "queue drained" in self.root(),
            what="the root resolved on drain",
            timeout=30,
        )

        def summary() -> str | None:
            said = [t for t in map(shown_text, self.thread()[1:]) if "Peak by runner type" in t]
            return said[-1] if said else None

        return str(await eventually(summary, what="the summary"))


def settings_of(
    settings_for: Callable[..., Any], fleet: ScriptedScaleSet, kubeconfig: Path, **extra: Any
) -> Any:
    values = {
        "metrics_backend": "prometheus",
        "prometheus_url": fleet.prometheus.url,
        "prometheus_rate_window": f"{READING_S * WINDOW_READINGS}s",
        "metrics_interval_seconds": READING_S,
        "status_interval_seconds": 1,
        "drain_checks": 2,
        "drain_check_seconds": 1,
        # A look waits for the root to render its reading: edited at the default's pace (one
        # edit in 2 s), a step would often miss its reading and wait a second one.
        "root_edit_interval_ms": 100,
        "scaler_backend": "arc",
        "scaler_kubeconfig": str(kubeconfig),
        "scaler_targets": json.dumps(
            {RUNNER_TYPE: {"target": f"{NAMESPACE}/{SCALE_SET}", "cap": CAP}}
        ),
        "scale_allowed_users": USER,
        "scale_cooldown_seconds": 0,
        "drain_target_minutes": DRAIN_TARGET_MINUTES,
        # A reading stands for a fleet's minute: a rise holds over its three readings, as the
        # default minute does where a fleet is read once a minute.
        "advice_rise_window": READING_S,
    }
    return settings_for(**{**values, **extra})


def alert(name: str, first: Step) -> dict[str, Any]:
    """Grafana's alert for linux.2xlarge, its queue the first step's: the incident's trend
    starts where the fleet is, not at the fixture's queue."""
    payload = as_group(f"trajectory: {name}", runner_type=RUNNER_TYPE)
    for firing in payload["alerts"]:
        firing["values"]["max_queue_size"] = first.queued
        firing["valueString"] = re.sub(
            r"(var='max_queue_size' labels=\{\} value=)\d+",
            rf"\g<1>{first.queued}",
            firing["valueString"],
        )
    return payload


@asynccontextmanager
async def trajectory(
    name: str,
    settings_for: Callable[..., Any],
    slack: Slack,
    kube: FakeKubeApi,
    tmp_path: Path,
    first: Step,
    *,
    job_minutes: float = JOB_MINUTES,
    **settings: Any,
) -> AsyncIterator[Trajectory]:
    """A bot reading `first` through Prometheus, its incident opened by a Grafana alert for
    linux.2xlarge (`settings` over the harness's); the table of what each surface said is
    printed at the end, pass or fail."""
    fleet = ScriptedScaleSet(
        SCALE_SET,
        kube,
        first,
        job_minutes=job_minutes,
        history_s=READING_S * WINDOW_READINGS * 1.5,
        scrape_interval=f"{int(SCRAPE_S * 1000)}ms",
    )
    kubeconfig = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    walked: Trajectory | None = None
    started = time.monotonic()
    try:
        async with run_bot(settings_of(settings_for, fleet, kubeconfig, **settings)) as running:
            assert (await running.send("grafana", alert(name, first))).status_code == 202
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
            walked = Trajectory(name, running, slack, fleet, roots[0])
            walked.incident_id = await eventually(
                lambda: running.bot.core.incident_of_message(CHANNEL, roots[0].ts),
                what="the root's incident",
            )
            yield walked
    finally:
        fleet.stop()
        if walked is not None:
            print(walked.table())
            print(f"({time.monotonic() - started:.0f} s)")
