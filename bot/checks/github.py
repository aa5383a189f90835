"""GitHub (METRICS_BACKEND=github or JOBS_BACKEND=github) and the HUD (=hud): the reads the
backends make, with the backends' own clients (`bot.factory`).

A GitHub App: its installation token minted, and what the installation granted it (its
permissions, its repositories) against what the configured readers need. GitHub: `GET
/rate_limit` (free: it costs no quota) says the token works and how much of the hour's quota is
left; then the self-hosted runners listing the metrics backend reads (the org's,
else each repository's), and each repository's queued runs. A 403 or 404 there is a token
without the permission, named as GitHub's docs name it for fine-grained and classic tokens (and
Apps, whose permissions are a fine-grained token's).
The HUD: the query the backend runs, with its bot header.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime

from bot.backends.errors import BackendError
from bot.backends.github_api import GithubApi
from bot.backends.github_auth import AppInstallationToken, Grant
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.checks import Finding, fail, ok, warn
from bot.config import JobsBackend, MetricsBackend, Settings
from bot.domain.alert_issue import AREA_LABEL
from bot.factory import build_issues, build_jobs_source, build_metrics, github_auth

SUBJECT, HUD, ISSUES, APP = "github", "hud", "github issues", "github app"
ISSUES_OFF = "turn issues on in the repository's settings (Features), or name another"
GONE = 410  # GitHub's answer where a repository's issues are turned off
ISSUES_PERMISSION = (
    'a fine-grained token or a GitHub App needs the repository permission "Issues" (read and '
    "write); a classic token the repo scope (public_repo for a public repository)"
)
LOW_QUOTA = 0.1
ORG_RUNNERS = (
    'a fine-grained token or a GitHub App needs the organization permission "Self-hosted '
    'runners" (read); a classic token the admin:org scope'
)
REPO_RUNNERS = (
    'a fine-grained token or a GitHub App needs the repository permission "Administration" '
    "(read); a classic token the repo scope"
)
REPO_RUNS = (
    'a fine-grained token or a GitHub App needs the repository permission "Actions" (read); a '
    "classic token the repo scope (public_repo for a public repository)"
)
LEVELS = {"read": 1, "write": 2, "admin": 3}  # an App's permission levels, as GitHub grants them
APP_KEY_FIX = (
    "set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY to one App's (its ID or client ID, and a key "
    "generated on its settings page), and keep this machine's clock right (NTP): GitHub refuses "
    "a JWT from a clock ahead of its own"
)


async def probe_github(settings: Settings) -> list[Finding]:
    metrics = build_metrics(settings)
    jobs = build_jobs_source(settings, metrics)
    github = next(s for s in (metrics, jobs) if isinstance(s, GithubMetrics))
    try:
        return await _github(settings, github.api)
    finally:
        await _close(metrics, jobs)


async def probe_issues(settings: Settings) -> list[Finding]:
    """GITHUB_ISSUES_REPO: the repository as the token sees it, and its open alert issues.
    Writing is not tried (a check leaves no trace): GitHub says no write permission before the
    first comment, and the thread is told."""
    issues = build_issues(settings)
    if issues is None:
        return []
    repo = issues.repo
    try:
        body, _ = await issues.api.get(f"/repos/{repo}")
        listed = await issues.open_issues(AREA_LABEL)
    except BackendError as exc:
        if exc.status in (401, 403, 404):
            unseen = " (or it does not exist)" if exc.status == 404 else ""
            return [fail(ISSUES, f"{repo}: {exc}{unseen}", ISSUES_PERMISSION)]
        if exc.status == GONE:
            return [fail(ISSUES, f"{repo}: {exc}", ISSUES_OFF)]
        return [fail(ISSUES, f"{repo}: {exc}")]
    finally:
        await issues.api.aclose()
    if isinstance(body, dict) and body.get("has_issues") is False:
        return [fail(ISSUES, f"{repo} has issues turned off", ISSUES_OFF)]
    opens = "opened when none is found" if settings.github_issues_open else "linked, not opened"
    return [ok(ISSUES, f"{repo}: {len(listed)} open {AREA_LABEL} issues; the alert's is {opens}")]


async def probe_app(settings: Settings) -> list[Finding]:
    """The App's installation token, and whether what it was granted covers what the
    configured readers need (a permission added to an App waits for the installation's owner
    to approve it)."""
    auth = github_auth(settings)
    if not isinstance(auth, AppInstallationToken):
        return []
    try:
        await auth.token()
    except BackendError as exc:
        fix = APP_KEY_FIX if exc.status == 401 else ""
        if exc.status == 404:
            fix = "install the App there (its page: Install App), or set GITHUB_APP_INSTALLATION_ID"
        return [fail(APP, str(exc), fix)]
    grant = auth.grant
    assert grant is not None
    detail = _granted(grant)
    missing = [
        f'"{page}" ({level}, for {why})'
        for name, level, page, why in app_needs(settings)
        if LEVELS.get(grant.permissions.get(name, ""), 0) < LEVELS[level]
    ]
    if missing:
        return [
            fail(
                APP,
                f"{detail}; missing {', '.join(missing)}",
                f"give the App {', '.join(missing)} (its settings: Permissions & events), then "
                "approve the new permissions on the installation",
            )
        ]
    return [ok(APP, detail)]


def app_needs(settings: Settings) -> list[tuple[str, str, str, str]]:
    """What the configured readers need of the App: (permission, level, the App settings
    page's name for it, who needs it)."""
    needs = []
    github = settings.metrics_backend is MetricsBackend.GITHUB
    if github and settings.github_org:
        needs.append(("organization_self_hosted_runners", "read", "Self-hosted runners",
                      "GITHUB_ORG's runners"))  # fmt: skip
    elif github:
        needs.append(("administration", "read", "Administration", "the repositories' runners"))
    if (github or settings.jobs_backend is JobsBackend.GITHUB) and settings.github_repos:
        needs.append(("actions", "read", "Actions", "the queued jobs"))
    if settings.github_issues_repo:
        needs.append(("issues", "write", "Issues", "GITHUB_ISSUES_REPO"))
    return needs


def _granted(grant: Grant) -> str:
    which = "all its repositories" if grant.repository_selection == "all" else "some repositories"
    permissions = ", ".join(f"{n}: {level}" for n, level in sorted(grant.permissions.items()))
    return f"installation {grant.installation_id} ({which}) granted {permissions or 'nothing'}"


async def probe_hud(settings: Settings) -> list[Finding]:
    metrics = build_metrics(settings)
    jobs = build_jobs_source(settings, metrics)
    now = datetime.now(UTC)
    findings = []
    try:
        if isinstance(metrics, HudMetrics):
            snapshot = await metrics.read(now=now)
            types = len(snapshot.runner_types)
            findings.append(
                ok(HUD, f"{settings.hud_query}: {types} runner types with jobs queued now")
            )
        if isinstance(jobs, HudMetrics):
            listing = await jobs.queued_jobs(now=now)
            findings.append(ok(HUD, f"queued_jobs: {len(listing.jobs)} jobs queued now"))
    except BackendError as exc:
        fix = "set HUD_URL to the HUD's base URL (https://hud.pytorch.org), reachable from here"
        if exc.status in (401, 403):
            fix = "set HUD_TOKEN to the HUD's bot key (sent as x-hud-internal-bot)"
        findings.append(fail(HUD, str(exc), fix))
    finally:
        await _close(metrics, jobs)
    return findings


async def _close(*backends: object) -> None:
    for backend in {id(b): b for b in backends if b is not None}.values():
        close = getattr(backend, "aclose", None)
        if close is not None:
            await close()


async def _github(settings: Settings, api: GithubApi) -> list[Finding]:
    try:
        body, _ = await api.get("/rate_limit")
    except BackendError as exc:
        accepted = APP_KEY_FIX if settings.github_app else "set GITHUB_TOKEN to a token it accepts"
        fix = accepted if exc.status == 401 else ""
        fix = fix or "set GITHUB_API_URL to GitHub's API (https://api.github.com), reachable"
        return [fail(SUBJECT, f"GET /rate_limit: {exc}", fix)]
    reads: list[Awaitable[Finding]] = []
    if settings.metrics_backend is MetricsBackend.GITHUB:
        if settings.github_org:
            reads.append(_read(api, f"/orgs/{settings.github_org}", ORG_RUNNERS))
        else:
            reads += [_read(api, f"/repos/{r}", REPO_RUNNERS) for r in settings.github_repos]
    reads += [_runs(api, repo) for repo in settings.github_repos]
    # At once: the probe's deadline is one call's, however many repositories are listed.
    return [_quota(body), *await asyncio.gather(*reads)]


def _quota(body: object) -> Finding:
    core = body.get("resources", {}).get("core") if isinstance(body, dict) else None
    if not isinstance(core, dict):
        return ok(SUBJECT, "the token works (GET /rate_limit)")
    left, limit = int(core.get("remaining", 0)), int(core.get("limit", 0))
    quota = f"{left} of {limit} API calls left this hour"
    if limit and left < LOW_QUOTA * limit:
        return warn(
            SUBJECT,
            f"the token works, but {quota}: something else spends its quota",
            "give queuepilot a token of its own",
        )
    return ok(SUBJECT, f"the token works: {quota}")


async def _read(api: GithubApi, owner: str, permission: str) -> Finding:
    try:
        body, _ = await api.get(f"{owner}/actions/runners?per_page=1")
    except BackendError as exc:
        return _refused(exc, f"{owner}/actions/runners", permission)
    total = body.get("total_count", "?") if isinstance(body, dict) else "?"
    return ok(SUBJECT, f"{owner}: {total} self-hosted runners listed")


async def _runs(api: GithubApi, repo: str) -> Finding:
    path = f"/repos/{repo}/actions/runs"
    try:
        body, _ = await api.get(f"{path}?status=queued&per_page=1")
    except BackendError as exc:
        return _refused(exc, path, REPO_RUNS)
    total = body.get("total_count", "?") if isinstance(body, dict) else "?"
    return ok(SUBJECT, f"{repo}: workflow runs listed ({total} queued)")


def _refused(exc: BackendError, path: str, permission: str) -> Finding:
    if exc.status in (403, 404):
        # GitHub answers 404 for what the token may not see, as for what does not exist.
        unseen = " (or it does not exist: check the name)" if exc.status == 404 else ""
        return fail(SUBJECT, f"GET {path}: {exc}{unseen}", permission)
    return fail(SUBJECT, f"GET {path}: {exc}")
