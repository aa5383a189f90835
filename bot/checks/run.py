"""Running the checks: the settings first; then every configured dependency's probe at once, each
within its deadline (one that overruns it or breaks is a failure of its own line, and `check`
never hangs); then the report, one line per finding."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TextIO
from urllib.parse import urlsplit

from pydantic import SecretStr
from redis.asyncio import Redis

from bot.backends.errors import deadline_of
from bot.checks import Finding, Verdict, aws, fail, github, kubernetes, prometheus, silence, slack
from bot.checks import redis as redis_check
from bot.checks import settings as settings_check
from bot.config import JobsBackend, MetricsBackend, ScalerBackend, Settings
from bot.storage.connection import build_redis

# The verdict as the report shows it, and its colour (green, yellow, red).
LABELS = {Verdict.OK: ("ok", "32"), Verdict.WARN: ("warn", "33"), Verdict.FAIL: ("FAIL", "31")}
SUBJECT_WIDTH = 11
HIDDEN = "•••"


@dataclass(frozen=True)
class Probe:
    subject: str
    run: Callable[[], Awaitable[list[Finding]]]


def probes(settings: Settings, environ: Mapping[str, str], client: Redis) -> list[Probe]:
    """A probe for each dependency these settings use; Slack and Redis always."""
    found = [
        Probe(slack.SUBJECT, partial(slack.probe, settings)),
        Probe(redis_check.SUBJECT, partial(redis_check.probe, settings, client)),
    ]
    metrics, jobs, scaler = settings.metrics_backend, settings.jobs_backend, settings.scaler_backend
    if metrics is MetricsBackend.PROMETHEUS:
        found.append(Probe(prometheus.SUBJECT, partial(prometheus.probe, settings)))
    if settings.silence_backend is not None:
        found.append(Probe(silence.SUBJECT, partial(silence.probe, settings)))
    if scaler is ScalerBackend.ARC:
        found.append(Probe(kubernetes.SUBJECT, partial(kubernetes.probe, settings, environ)))
    elif scaler is ScalerBackend.SQS:
        found.append(Probe(aws.SQS, partial(aws.probe_sqs, settings)))
    elif scaler is ScalerBackend.AWS_ASG:
        found.append(Probe(aws.ASG, partial(aws.probe_asg, settings, environ)))
    reads_github = metrics is MetricsBackend.GITHUB or jobs is JobsBackend.GITHUB
    if settings.github_app and (reads_github or settings.github_issues_repo):
        found.append(Probe(github.APP, partial(github.probe_app, settings)))
    if reads_github:
        found.append(Probe(github.SUBJECT, partial(github.probe_github, settings)))
    if metrics is MetricsBackend.HUD or jobs is JobsBackend.HUD:
        found.append(Probe(github.HUD, partial(github.probe_hud, settings)))
    if settings.github_issues_repo:
        found.append(Probe(github.ISSUES, partial(github.probe_issues, settings)))
    return found


async def probe_all(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    """Every configured dependency, probed at once."""
    client = build_redis(
        settings.redis_url, settings.sentinel(), max_connections=8, client_name="queuepilot-check"
    )
    deadline = deadline_of(max(settings.backend_timeout_seconds, settings.slack_timeout_seconds))
    try:
        found = await asyncio.gather(
            *(bounded(probe, deadline) for probe in probes(settings, environ, client))
        )
    finally:
        await client.aclose()
    return [finding for findings in found for finding in findings]


async def bounded(probe: Probe, deadline: float) -> list[Finding]:
    """The probe's findings, or one failure once it overran `deadline` or broke."""
    try:
        return await asyncio.wait_for(probe.run(), deadline)
    except TimeoutError:
        return [
            fail(probe.subject, f"no answer within {deadline:g} s", "make it reachable from here")
        ]
    except Exception as exc:  # a probe's own defect must not hide the other findings
        return [fail(probe.subject, f"the check itself failed: {type(exc).__name__}: {exc}")]


async def check(environ: Mapping[str, str]) -> tuple[Settings | None, list[Finding]]:
    """The settings' findings, then (when they can serve) every dependency's."""
    settings, findings = settings_check.read(environ)
    if settings is None:
        return None, findings
    return settings, findings + await probe_all(settings, environ)


def main(environ: Mapping[str, str], out: TextIO) -> int:
    """`queuepilot check`: 0 when nothing failed (warnings allowed), 1 otherwise."""
    settings, findings = asyncio.run(check(environ))
    color = out.isatty() and "NO_COLOR" not in environ and environ.get("TERM") != "dumb"
    out.write(render(findings, color=color, secrets=secrets_of(settings, environ)) + "\n")
    counts = {verdict: sum(f.verdict is verdict for f in findings) for verdict in Verdict}
    warnings = counts[Verdict.WARN]
    out.write(
        f"queuepilot check: {counts[Verdict.OK]} ok, {warnings} warning"
        f"{'s' if warnings != 1 else ''}, {counts[Verdict.FAIL]} failed\n"
    )
    return 1 if counts[Verdict.FAIL] else 0


def render(findings: list[Finding], *, color: bool = False, secrets: Iterable[str] = ()) -> str:
    """One line per finding: verdict, subject, what was found and, when not ok, the fix."""
    hidden = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
    lines = []
    for finding in findings:
        word, code = LABELS[finding.verdict]
        label = f"\033[{code}m{word.ljust(6)}\033[0m" if color else word.ljust(6)
        text = finding.detail + (f" — fix: {finding.fix}" if finding.fix else "")
        for secret in hidden:
            text = text.replace(secret, HIDDEN)
        lines.append(f"{label}{finding.subject.ljust(SUBJECT_WIDTH)}{text}")
    return "\n".join(lines)


def secrets_of(settings: Settings | None, environ: Mapping[str, str]) -> list[str]:
    """Every secret the settings hold (as read, or as set when they could not be read), to be
    kept out of the report whatever a backend echoes: the tokens and passwords, and a password
    in REDIS_URL."""
    found = []
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name) if settings is not None else None
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif settings is None and "SecretStr" in str(info.annotation):
            found.append(environ.get(name.upper(), ""))
    url = settings.redis_url if settings is not None else environ.get("REDIS_URL", "")
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        found.append(password)
    return found
