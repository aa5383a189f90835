"""GitHub and the HUD, read with the backends' own clients. `GET /rate_limit` is free and proves the
token; a 403 or 404 after it is a missing permission, named as GitHub's docs name it."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from datetime import UTC, datetime, timedelta

from bot.backends.github_api import AppInstallationToken, GithubApi
from bot.backends.http import BackendError
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.github_feed import RECONCILE_S
from bot.backends.metrics.hud import HudMetrics
from bot.checks import Finding, Verdict, fail, ok, warn
from bot.config import JobsBackend, MetricsBackend, Settings
from bot.domain.alerting.alert_issue import AREA_LABEL
from bot.domain.units import duration
from bot.factory import build_issues, github_auth

SUBJECT, HUD, ISSUES, APP = "github", "hud", "github issues", "github app"
GONE = 410  # GitHub's answer where a repository's issues are turned off
ISSUES_OFF = "turn issues on in the repository's settings (Features), or name another"
LOW_QUOTA = 0.1
LEVELS = {"read": 1, "write": 2, "admin": 3}  # an App's permission levels, as GitHub grants them
APP_KEY_FIX = (
    "set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY to one App's (its ID or client ID, and a key "
    "generated on its settings page), and keep this machine's clock right (NTP): GitHub refuses "
    "a JWT from a clock ahead of its own"
)


def _permission(where: str, name: str, level: str, classic: str) -> str:
    return (
        f'a fine-grained token or a GitHub App needs the {where} permission "{name}" ({level}); '
        f"a classic token the {classic}"
    )


PUBLIC_REPO = "repo scope (public_repo for a public repository)"
ORG_RUNNERS = _permission("organization", "Self-hosted runners", "read", "admin:org scope")
REPO_RUNNERS = _permission("repository", "Administration", "read", "repo scope")
REPO_RUNS = _permission("repository", "Actions", "read", PUBLIC_REPO)
ISSUES_PERMISSION = _permission("repository", "Issues", "read and write", PUBLIC_REPO)


async def probe_github(settings: Settings) -> list[Finding]:
    async with aclosing(GithubApi(settings, auth=github_auth(settings))) as api:
        try:
            body, _ = await api.get("/rate_limit")
        except BackendError as exc:
            token = APP_KEY_FIX if settings.github_app else "set GITHUB_TOKEN to a token it accepts"
            url = "set GITHUB_API_URL to GitHub's API (https://api.github.com), reachable"
            return [fail(SUBJECT, f"GET /rate_limit: {exc}", token if exc.status == 401 else url)]
        org, repos, runs = settings.github_org, settings.github_repos, "status=queued&per_page=1"
        reads = [_listed(api, f"/repos/{repo}/actions/runs", runs, REPO_RUNS) for repo in repos]
        if settings.metrics_backend is MetricsBackend.GITHUB:
            owners = [(f"/orgs/{org}", ORG_RUNNERS)] if org else []
            owners = owners or [(f"/repos/{repo}", REPO_RUNNERS) for repo in repos]
            reads[:0] = [_listed(api, f"{o}/actions/runners", "per_page=1", p) for o, p in owners]
        # At once: the probe's deadline is one call's, however many repositories are listed.
        found = [_quota(body), *await asyncio.gather(*reads)]
        listed = all(finding.verdict is not Verdict.FAIL for finding in found)
        if settings.metrics_backend is MetricsBackend.GITHUB and repos and listed:
            found.append(await _sizing(settings, api))
        return found


async def _sizing(settings: Settings, api: GithubApi) -> Finding:
    """What a reading costs on this fleet and how often GITHUB_READING_SHARE allows one."""
    try:
        size = await GithubMetrics(settings, api).sizing(now=datetime.now(UTC))
    except BackendError as exc:
        return fail(SUBJECT, f"listing the runs: {exc}")
    share, interval = settings.github_reading_share, settings.metrics_interval_seconds
    runs, first = f"{size.runs} runs queued or in progress", size.pages + size.runs
    if settings.github_webhook_secret is not None:
        said = f"{runs}: with GITHUB_WEBHOOK_SECRET the readings come from GitHub's workflow_job "
        said += f"deliveries at no request (every {interval} s); polling only reconciles, every "
        said += f"{duration(timedelta(seconds=RECONCILE_S))}, about {size.pages} listing pages "
        said += "and the runs a missed delivery left wrong (the first reads every run's jobs "
        return ok(SUBJECT, f"{said}once, {first})")
    cost = f"{runs}: a reading costs about {size.cost} requests ({size.pages} listing pages and "
    cost += "the runs that changed since the last; the first after a start reads every run's "
    cost += f"jobs, {first})"
    if size.every_s is None:
        return ok(SUBJECT, f"{cost}; GitHub states no rate limit: a reading every {interval} s")
    every = duration(timedelta(seconds=max(size.every_s, interval)))
    allows = f"GITHUB_READING_SHARE {share:g} of GitHub's hour allows a reading every {every}"
    return ok(SUBJECT, f"{cost}; {allows}")


def _quota(body: object) -> Finding:
    core = body.get("resources", {}).get("core") if isinstance(body, dict) else None
    if not isinstance(core, dict):
        return ok(SUBJECT, "the token works (GET /rate_limit)")
    left, limit = int(core.get("remaining", 0)), int(core.get("limit", 0))
    quota = f"{left} of {limit} API calls left this hour"
    if limit and left < LOW_QUOTA * limit:
        said = f"the token works, but {quota}: something else spends its quota"
        return warn(SUBJECT, said, "give queuepilot a token of its own")
    return ok(SUBJECT, f"the token works: {quota}")


async def _listed(api: GithubApi, path: str, query: str, permission: str) -> Finding:
    try:
        body, _ = await api.get(f"{path}?{query}")
    except BackendError as exc:
        if exc.status not in (403, 404):
            return fail(SUBJECT, f"GET {path}: {exc}")
        # GitHub answers 404 for what the token may not see, as for what does not exist.
        unseen = " (or it does not exist: check the name)" if exc.status == 404 else ""
        return fail(SUBJECT, f"GET {path}: {exc}{unseen}", permission)
    total = body.get("total_count", "?") if isinstance(body, dict) else "?"
    owner, _, kind = path.partition("/actions/")
    if kind == "runners":
        return ok(SUBJECT, f"{owner}: {total} self-hosted runners listed")
    return ok(SUBJECT, f"{owner.removeprefix('/repos/')}: workflow runs listed ({total} queued)")


async def probe_issues(settings: Settings) -> list[Finding]:
    """The repository and its open alert issues. Writing is not tried: a check leaves no trace."""
    issues = build_issues(settings)
    if issues is None:
        return []
    repo = issues.repo
    async with aclosing(issues.api):
        try:
            body, _ = await issues.api.get(f"/repos/{repo}")
            listed = await issues.open_issues(AREA_LABEL)
        except BackendError as exc:
            unseen = " (or it does not exist)" if exc.status == 404 else ""
            fix = ISSUES_PERMISSION if exc.status in (401, 403, 404) else ""
            fix = ISSUES_OFF if exc.status == GONE else fix
            return [fail(ISSUES, f"{repo}: {exc}{unseen}", fix)]
    if isinstance(body, dict) and body.get("has_issues") is False:
        return [fail(ISSUES, f"{repo} has issues turned off", ISSUES_OFF)]
    opens = "opened when none is found" if settings.github_issues_open else "linked, not opened"
    return [ok(ISSUES, f"{repo}: {len(listed)} open {AREA_LABEL} issues; the alert's is {opens}")]


async def probe_app(settings: Settings) -> list[Finding]:
    """The App's installation token, and whether its grant covers what the settings need (a
    permission added to an App waits for the installation's owner to approve it)."""
    auth = github_auth(settings)
    if not isinstance(auth, AppInstallationToken):
        return []
    try:
        await auth.token()
    except BackendError as exc:
        install = "install the App there (its page: Install App), or set GITHUB_APP_INSTALLATION_ID"
        return [fail(APP, str(exc), {401: APP_KEY_FIX, 404: install}.get(exc.status, ""))]
    grant = auth.grant
    assert grant is not None
    which = "all its repositories" if grant.repository_selection == "all" else "some repositories"
    permissions = ", ".join(f"{n}: {level}" for n, level in sorted(grant.permissions.items()))
    detail = f"installation {grant.installation_id} ({which}) granted {permissions or 'nothing'}"
    missing = [
        f'"{page}" ({level}, for {why})'
        for name, level, page, why in _app_needs(settings)
        if LEVELS.get(grant.permissions.get(name, ""), 0) < LEVELS[level]
    ]
    if not missing:
        return [ok(APP, detail)]
    fix = f"give the App {', '.join(missing)} (its settings: Permissions & events), then approve "
    fix += "the new permissions on the installation"
    return [fail(APP, f"{detail}; missing {', '.join(missing)}", fix)]


def _app_needs(settings: Settings) -> list[tuple[str, str, str, str]]:
    """(permission, level, its name on the App's settings page, who needs it)."""
    github, org = settings.metrics_backend is MetricsBackend.GITHUB, settings.github_org
    needs = []
    if github and org:
        needs.append(("organization_self_hosted_runners", "read", "Self-hosted runners",
                      "GITHUB_ORG's runners"))  # fmt: skip
    elif github:
        needs.append(("administration", "read", "Administration", "the repositories' runners"))
    if (github or settings.jobs_backend is JobsBackend.GITHUB) and settings.github_repos:
        needs.append(("actions", "read", "Actions", "the queued jobs"))
    if settings.github_issues_repo:
        needs.append(("issues", "write", "Issues", "GITHUB_ISSUES_REPO"))
    return needs


async def probe_hud(settings: Settings) -> list[Finding]:
    """The readings' query, and the job listing, each where the settings use it."""
    now, findings = datetime.now(UTC), []
    async with aclosing(HudMetrics(settings)) as hud:
        try:
            if settings.metrics_backend is MetricsBackend.HUD:
                types = len((await hud.read(now=now)).runner_types)
                said = f"{settings.hud_query}: {types} runner types with jobs queued now"
                findings.append(ok(HUD, said))
            if settings.jobs_backend in (JobsBackend.HUD, JobsBackend.AUTO):
                listing = await hud.queued_jobs(now=now)
                findings.append(ok(HUD, f"queued_jobs: {len(listing.jobs)} jobs queued now"))
        except BackendError as exc:
            fix = "set HUD_URL to the HUD's base URL (https://hud.pytorch.org), reachable from here"
            if exc.status in (401, 403):
                fix = "set HUD_TOKEN to the HUD's bot key (sent as x-hud-internal-bot)"
            findings.append(fail(HUD, str(exc), fix))
    return findings
