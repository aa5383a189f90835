"""`serve` says what `check` finds: the same probes (`bot.checks.run.probes`, one table), run by
the leader 30 s into its term (or one interval, if shorter) and every PROBE_INTERVAL_SECONDS after.

The leader runs them because it alone calls the backends (it applies, acts and reads the fleet);
every replica has the same settings and credentials, so one prober logs each problem once and asks
each backend once. A probe is logged when its verdict changes, never each round: a warning with its
findings and their fixes when it starts failing (or warning), one line when it recovers; the gauge
`queuepilot_probe_ok{probe}` reads 0 while it fails; the probes' own calls are built as `check`'s,
uncounted, so that `queuepilot_backend_calls_total` tells the bot's work alone. /readyz never looks
here: a Prometheus that is down leaves the bot taking alerts and acting on them.

Slack is the one probe left to `check`: serve calls Slack all the time, counts each call by its
outcome (`queuepilot_slack_calls_total`) and logs what Slack refuses as it happens, and checks at
start that it is in its channels (`bot.outbound.membership`)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping

from redis.asyncio import Redis

from bot.backends.errors import deadline_of
from bot.checks import Finding, Verdict, slack
from bot.checks.run import Probe, bounded, hiding, probes, secrets_of
from bot.config import Settings
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

RANK = {Verdict.OK: 0, Verdict.WARN: 1, Verdict.FAIL: 2}
SAID = {Verdict.WARN: "warns", Verdict.FAIL: "failing"}
FIRST_ROUND_AFTER_S = 30.0


class ProbeWatch:
    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        telemetry: Telemetry,
        *,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        table = probes(settings, environ, redis)
        self._probes: dict[str, Probe] = {s: p for s, p in table.items() if s != slack.SUBJECT}
        self._gauge = telemetry.probe_ok
        self._hide = hiding(secrets_of(settings, environ))
        self._deadline_s = deadline_of(settings.backend_timeout_seconds)
        self._every_s = settings.probe_interval_seconds
        self._clock = clock
        self._due = 0.0
        self._verdicts: dict[str, Verdict] = {}
        self._round: asyncio.Task[None] | None = None

    async def tick(self) -> None:
        """The scheduler's tick (every few seconds): a round started when one is due. It runs
        apart, so a backend that takes its whole timeout to answer never holds up the tick."""
        now = self._clock()
        if not self._due:
            # A replica that just took the lead has a backlog to catch up on (a failover in a
            # storm): the first round waits a little, never the work.
            self._due = now + min(FIRST_ROUND_AFTER_S, self._every_s)
        if now < self._due or (self._round is not None and not self._round.done()):
            return
        self._due = now + self._every_s
        self._round = asyncio.create_task(self._probe_all(), name="probes")

    def forget(self) -> None:
        """At the end of a term: the next leader probes afresh, and says again what it finds;
        a replica that no longer probes exports no verdict that could go stale."""
        if self._round is not None:
            self._round.cancel()
        self._due = 0.0
        self._verdicts.clear()
        self._gauge.clear()

    async def _probe_all(self) -> None:
        subjects = list(self._probes)
        found = await asyncio.gather(
            *(bounded(s, self._probes[s], self._deadline_s) for s in subjects)
        )
        for subject, findings in zip(subjects, found, strict=True):
            self._judge(subject, findings)

    def _judge(self, subject: str, findings: list[Finding]) -> None:
        worst = max((f.verdict for f in findings), key=RANK.__getitem__, default=Verdict.OK)
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
