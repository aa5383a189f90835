"""`serve` says what `check` finds: the leader, which alone calls the backends, runs `check`'s
probes 30 s into its term and every PROBE_INTERVAL_SECONDS after. A probe is logged when its verdict
changes, never each round, and `queuepilot_probe_ok{probe}` reads 0 while it fails; /readyz never
looks here (a Prometheus that is down leaves the bot taking alerts). The probes' calls are
uncounted, so `queuepilot_backend_calls_total` tells the bot's work alone. Slack is left to
`check`: serve counts and logs every Slack call, and checks its channels at start."""

from __future__ import annotations

import asyncio
import logging
import os
import time

from redis.asyncio import Redis

from bot.backends.http import deadline_of
from bot.checks import Finding, Verdict, slack
from bot.checks.run import Probe, hiding, probes, run_probes, secrets_of
from bot.config import Settings
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

SAID = {Verdict.WARN: "warns", Verdict.FAIL: "failing"}
FIRST_ROUND_AFTER_S = 30.0


class ProbeWatch:
    def __init__(self, settings: Settings, redis: Redis, telemetry: Telemetry) -> None:
        table = probes(settings, os.environ, redis)
        self._probes: dict[str, Probe] = {s: p for s, p in table.items() if s != slack.SUBJECT}
        self._gauge = telemetry.probe_ok
        self._hide = hiding(secrets_of(settings, os.environ))
        self._deadline_s = deadline_of(settings.backend_timeout_seconds)
        self._every_s = settings.probe_interval_seconds
        self._due = 0.0
        self._verdicts: dict[str, Verdict] = {}
        self._round: asyncio.Task[None] | None = None

    async def tick(self) -> None:
        """A round started when one is due, apart: a slow backend never holds up the tick."""
        now = time.monotonic()
        if not self._due:
            # A new leader has a backlog to catch up on first (a failover in a storm).
            self._due = now + min(FIRST_ROUND_AFTER_S, self._every_s)
        if now < self._due or (self._round is not None and not self._round.done()):
            return
        self._due = now + self._every_s
        self._round = asyncio.create_task(self._probe_all(), name="probes")

    def forget(self) -> None:
        """At the end of a term: no verdict left to go stale; the next leader says its own."""
        if self._round is not None:
            self._round.cancel()
        self._due = 0.0
        self._verdicts.clear()
        self._gauge.clear()

    async def _probe_all(self) -> None:
        for subject, findings in (await run_probes(self._probes, self._deadline_s)).items():
            self._judge(subject, findings)

    def _judge(self, subject: str, findings: list[Finding]) -> None:
        worst = max((f.verdict for f in findings), key=list(Verdict).index, default=Verdict.OK)
        self._gauge.labels(subject).set(0 if worst is Verdict.FAIL else 1)
        before = self._verdicts.get(subject, Verdict.OK)
        self._verdicts[subject] = worst
        if worst is before:
            return
        if worst is Verdict.OK:
            log.info("probe %s recovered: queuepilot check finds nothing to fix", subject)
            return
        problems = [f for f in findings if f.verdict is not Verdict.OK]
        said = "; ".join(f.detail + (f" — fix: {f.fix}" if f.fix else "") for f in problems)
        log.warning("probe %s %s: %s", subject, SAID[worst], self._hide(said))
