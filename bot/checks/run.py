"""Running the checks: the settings, read as `serve` reads them; then, only when they have no
problem (a probe of a half-configured backend would only repeat it), every configured dependency's
probe at once, each within its deadline, so that `check` never hangs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, TextIO
from urllib.parse import urlsplit

from pydantic import SecretStr
from redis.asyncio import Redis

from bot.backends.http import deadline_of
from bot.checks import (
    Finding,
    Verdict,
    fail,
    github,
    github_webhook,
    ok,
    prometheus,
    scaler,
    silence,
    slack,
    warn,
)
from bot.checks import redis as redis_check
from bot.config import JobsBackend, MetricsBackend, ScalerBackend, Settings, read_startup
from bot.config.loading import secret_settings
from bot.factory import scale_targets
from bot.storage.connection import build_redis

# The verdict as the report shows it, and its colour (green, yellow, red).
LABELS = {Verdict.OK: ("ok", "32"), Verdict.WARN: ("warn", "33"), Verdict.FAIL: ("FAIL", "31")}
SUBJECT_WIDTH = 11  # the least; a longer subject ("github issues") widens the column for all
HIDDEN = "•••"
Probe = Callable[[], Awaitable[list[Finding]]]


def read(environ: Mapping[str, str]) -> tuple[Settings | None, list[Finding]]:
    """The settings (None when `serve` would refuse them) and what was found about them. A near
    miss (METRIC_BACKEND) fails here, where `serve` only warns: the meant one is left default."""
    startup = read_startup(environ)
    settings, found = startup.settings, []
    if settings is not None:
        found = [ok("settings", summary(settings)), *runner_types(settings)]
        found += scaler.scaling(settings)
    return settings, [
        *(fail("settings", problem) for problem in [*startup.near_misses, *startup.problems]),
        *found,
        *(warn("settings", warning) for warning in startup.warnings),
    ]


def summary(settings: Settings) -> str:
    mode = "Socket Mode" if settings.socket_mode else "HTTP (/slack/events)"
    routes = len(settings.slack_routes)
    where = f"incidents in {settings.slack_channel}"
    if routes:
        where += f" and {routes} route{'s' if routes != 1 else ''}"
    silences = settings.silence_backend.value if settings.silence_backend else "off"
    return (
        f"Slack over {mode}, {where}; metrics {settings.metrics_backend.value}, "
        f"silences {silences}, scaler {settings.scaler_backend.value}"
    )


def runner_types(settings: Settings) -> list[Finding]:
    """Each runner type's ARC scale set: a wrong name is found here, not during an incident."""
    arc = settings.scaler_backend is ScalerBackend.ARC
    if not arc and settings.metrics_backend is not MetricsBackend.PROMETHEUS:
        return []
    targets = scale_targets(settings) if arc else {}
    lines = []
    for row in settings.runner_names.table():
        how = "RUNNER_SCALE_SETS" if row.explicit else "derived"
        detail = f"{row.runner_type} → scale set {row.scale_set} ({how})"
        if row.runner_type in targets:
            detail += f"; scales {targets[row.runner_type].target}"
        lines.append(ok("runners", detail))
    return lines


def probes(settings: Settings, environ: Mapping[str, str], client: Redis) -> dict[str, Probe]:
    """A probe for each dependency these settings use, by subject; Slack and Redis always."""
    found: dict[str, Probe] = {
        slack.SUBJECT: partial(slack.probe, settings),
        redis_check.SUBJECT: partial(redis_check.probe, settings, client),
    }
    metrics, jobs, scales = settings.metrics_backend, settings.jobs_backend, settings.scaler_backend
    if metrics is MetricsBackend.PROMETHEUS:
        found[prometheus.SUBJECT] = partial(prometheus.probe, settings)
    if settings.silence_backend is not None:
        found[silence.SUBJECT] = partial(silence.probe, settings)
    if scales is ScalerBackend.ARC:
        found[scaler.KUBERNETES] = partial(scaler.probe_arc, settings, environ)
    elif scales is ScalerBackend.SQS:
        found[scaler.SQS] = partial(scaler.probe_sqs, settings)
    elif scales is ScalerBackend.AWS_ASG:
        found[scaler.ASG] = partial(scaler.probe_asg, settings, environ)
    reads_github = metrics is MetricsBackend.GITHUB or jobs is JobsBackend.GITHUB
    if settings.github_app and (reads_github or settings.github_issues_repo):
        found[github.APP] = partial(github.probe_app, settings)
    if reads_github:
        found[github.SUBJECT] = partial(github.probe_github, settings)
    if metrics is MetricsBackend.HUD or jobs is JobsBackend.HUD:
        found[github.HUD] = partial(github.probe_hud, settings)
    if settings.github_issues_repo:
        found[github.ISSUES] = partial(github.probe_issues, settings)
    if settings.github_webhook_secret is not None:
        found[github_webhook.SUBJECT] = partial(github_webhook.probe, settings, client)
    return found


async def probe_all(settings: Settings, environ: Mapping[str, str]) -> list[Finding]:
    deadline = deadline_of(max(settings.backend_timeout_seconds, settings.slack_timeout_seconds))
    async with build_redis(
        settings.redis_url, settings.sentinel(), max_connections=8, client_name="queuepilot-check"
    ) as client:
        found = await run_probes(probes(settings, environ, client), deadline)
    return [finding for findings in found.values() for finding in findings]


async def run_probes(wanted: Mapping[str, Probe], deadline: float) -> dict[str, list[Finding]]:
    found = await asyncio.gather(*(bounded(*probe, deadline) for probe in wanted.items()))
    return dict(zip(wanted, found, strict=True))


async def bounded(subject: str, probe: Probe, deadline: float) -> list[Finding]:
    """The probe's findings, or one failure once it overran `deadline` or broke."""
    try:
        return await asyncio.wait_for(probe(), deadline)
    except TimeoutError:
        fix = "make it reachable from here (its URL setting), or raise BACKEND_TIMEOUT_SECONDS"
        return [fail(subject, f"no answer within {deadline:g} s", fix)]
    except Exception as exc:  # a probe's own defect must not hide the other findings
        return [fail(subject, f"the check itself failed: {type(exc).__name__}: {exc}")]


def main(environ: Mapping[str, str], out: TextIO, *, as_json: bool = False) -> int:
    """`queuepilot check`: 0 when nothing failed (warnings allowed), 1 otherwise."""
    settings, findings = read(environ)
    if settings is not None:
        findings += asyncio.run(probe_all(settings, environ))
    secrets = secrets_of(settings, environ)
    counts = {verdict: sum(f.verdict is verdict for f in findings) for verdict in Verdict}
    if as_json:
        out.write(json.dumps(document(findings, counts, secrets=secrets), indent=2) + "\n")
    else:
        color = out.isatty() and "NO_COLOR" not in environ and environ.get("TERM") != "dumb"
        out.write(render(findings, color=color, secrets=secrets) + "\n")
        warnings = counts[Verdict.WARN]
        out.write(
            f"queuepilot check: {counts[Verdict.OK]} ok, {warnings} warning"
            f"{'s' if warnings != 1 else ''}, {counts[Verdict.FAIL]} failed\n"
        )
    return 1 if counts[Verdict.FAIL] else 0


def render(findings: list[Finding], *, color: bool = False, secrets: Iterable[str] = ()) -> str:
    hide = hiding(secrets)
    width = max([SUBJECT_WIDTH, *(len(finding.subject) + 1 for finding in findings)])
    lines = []
    for finding in findings:
        word, code = LABELS[finding.verdict]
        label = f"\033[{code}m{word.ljust(6)}\033[0m" if color else word.ljust(6)
        text = hide(finding.detail + (f" — fix: {finding.fix}" if finding.fix else ""))
        lines.append(f"{label}{finding.subject.ljust(width)}{text}")
    return "\n".join(lines)


def document(
    findings: list[Finding], counts: Mapping[Verdict, int], *, secrets: Iterable[str] = ()
) -> dict[str, Any]:
    """`check --format json`, for CI: its keys stay (new ones may be added); `ok` is false
    exactly when the exit code is 1."""
    hide = hiding(secrets)
    return {
        "ok": not counts[Verdict.FAIL],
        "counts": {verdict.value: counts[verdict] for verdict in Verdict},
        "checks": [
            {
                "name": finding.subject,
                "status": finding.verdict.value,
                "message": hide(finding.detail),
                "fix": hide(finding.fix),
            }
            for finding in findings
        ],
    }


def hiding(secrets: Iterable[str]) -> Callable[[str], str]:
    """A text with every secret (of 4 characters or more) replaced, the longest first."""
    hidden = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def hide(text: str) -> str:
        for secret in hidden:
            text = text.replace(secret, HIDDEN)
        return text

    return hide


def secrets_of(settings: Settings | None, environ: Mapping[str, str]) -> list[str]:
    """Every secret the settings hold (as set, when they could not be read), REDIS_URL's password
    too: kept out of the report whatever a backend echoes."""
    found = []
    for name in secret_settings():
        value = getattr(settings, name) if settings is not None else environ.get(name.upper())
        text = value.get_secret_value() if isinstance(value, SecretStr) else value or ""
        if name == "redis_url":
            try:
                text = urlsplit(text).password or ""
            except ValueError:
                text = ""
        found.append(text)
    return found
