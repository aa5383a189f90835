"""Slack, through slack_sdk's client built as the bot builds it: the bot token, its scopes (the
`x-oauth-scopes` header, as Bolt reads them), the channels it posts to, the app-level token.

The scopes' map says what breaks without each. `auth.test`, `chat.getPermalink` and `views.*`
need none; the manifests list `DEFAULT`, and a test keeps them equal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.checks import Finding, fail, ok, warn
from bot.config import Settings
from bot.outbound.gateway import FIX, INVITE, build_client, why_cannot_post

SUBJECT = "slack"
TOKEN_REFUSED = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
ADD_SCOPE = (
    "add {scope} under OAuth & Permissions → Bot Token Scopes (or to slack-manifest.yaml), then "
    "reinstall the app to the workspace"
)
APP_TOKEN_FIX = (
    "generate an app-level token with the connections:write scope (Basic Information → "
    "App-Level Tokens) and set it as SLACK_APP_TOKEN"
)

# Each bot-token scope a feature needs, with what breaks without it.
ALWAYS = {
    "chat:write": "incident threads are posted and edited (chat.postMessage, chat.update)",
    "commands": "the slash command (/queue)",
    "users:read": "people's names on the timeline and in summaries (users.info)",
    "files:write": "postmortems shared into the thread as a file, and charts as pictures "
    "(files.upload v2)",
}
PUBLIC_CHANNELS = {
    "channels:read": "the check that the app is in SLACK_CHANNEL and every route's channel "
    "(conversations.info)",
    "channels:history": "a post whose answer was lost is looked up before it is sent again "
    "(conversations.history); without it, it may show twice",
}
PRIVATE_CHANNELS = {
    "groups:read": "a private channel's membership check (conversations.info)",
    "groups:history": "the lookup of a lost post in a private channel",
}
USER_GROUPS = "usergroups:read"
USER_GROUPS_WHY = "SCALE_ALLOWED_USERS names a user group: its members (usergroups.users.list)"
OPTIONAL = (*PRIVATE_CHANNELS, USER_GROUPS)
# What the manifests ask for: the defaults (public channels, no user groups).
DEFAULT = (*ALWAYS, *PUBLIC_CHANNELS)


@dataclass(frozen=True)
class Answer:
    data: Mapping[str, Any]
    headers: Mapping[str, Any]
    error: str = ""  # Slack's error code, or why there was no answer


async def ask(request: Awaitable[AsyncSlackResponse]) -> Answer:
    try:
        response = await request
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        status = getattr(exc.response, "status_code", 0)
        return Answer(data, exc.response.headers or {}, str(data.get("error") or f"http_{status}"))
    except (ClientError, TimeoutError) as exc:
        return Answer({}, {}, f"no answer ({type(exc).__name__})")
    data = response.data if isinstance(response.data, dict) else {}
    return Answer(data, response.headers or {})


async def probe(settings: Settings) -> list[Finding]:
    client = build_client(settings)
    identity = await ask(client.auth_test())
    if identity.error:
        return [_refused_token(identity.error, settings.slack_api_url)]
    findings = [_identity(identity.data)]
    if not identity.data.get("bot_id"):
        return findings
    uses = settings.channel_uses
    seen = await asyncio.gather(*(_channel(client, c, use) for c, use in uses.items()))
    findings += [*_scopes(settings, identity.headers, seen), *(finding for finding, _, _ in seen)]
    if settings.slack_app_token is not None:
        findings.append(await _app_token(client, settings.slack_app_token.get_secret_value()))
    return findings


def _refused_token(error: str, api_url: str) -> Finding:
    if error in TOKEN_REFUSED:
        fix = "set SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-…) under OAuth & "
        fix += "Permissions of the app installed in your workspace"
        return fail(SUBJECT, f"auth.test refused SLACK_BOT_TOKEN: {error}", fix)
    if error == "ratelimited":
        return warn(SUBJECT, "auth.test was rate-limited: not checked", "run the check again")
    fix = "SLACK_API_URL must be Slack's Web API (https://slack.com/api/), reachable from here"
    return fail(SUBJECT, f"auth.test at {api_url}: {error}", fix)


def _identity(data: Mapping[str, Any]) -> Finding:
    who = f"@{data.get('user', '?')} ({data.get('user_id', '?')})"
    if not data.get("bot_id"):
        said = f"SLACK_BOT_TOKEN is {who}'s user token, not the app's bot token"
        fix = "use the Bot User OAuth Token (xoxb-…) under OAuth & Permissions"
        return fail(SUBJECT, said, fix)
    return ok(SUBJECT, f"auth.test: {who} in {data.get('team', '?')} ({data.get('team_id', '?')})")


async def _channel(client: AsyncWebClient, channel: str, use: str) -> tuple[Finding, bool, str]:
    """Its finding, whether it is private, and the scope Slack said it needs to read it."""
    answer = await ask(client.conversations_info(channel=channel))
    named = f"channel {channel} [{use}]"
    if answer.error == "missing_scope":
        needs = str(answer.data.get("needed") or "channels:read")
        said, fix = f"{named} not checked: Slack needs the {needs} scope to read it", ADD_SCOPE
        return fail(SUBJECT, said, fix.format(scope=needs)), needs.startswith("groups:"), needs
    if answer.error == "channel_not_found":
        fix = (
            "use the channel's ID (C…, at the bottom of its details in Slack), not its name; "
            "a private channel is found once the app is invited (/invite @queuepilot)"
        )
        return fail(SUBJECT, f"{named} not found", fix), False, ""
    if answer.error:
        return warn(SUBJECT, f"{named} not checked: {answer.error}"), False, ""
    info = answer.data.get("channel")
    info = info if isinstance(info, dict) else {}
    shown = f"#{info['name']} ({channel})" if info.get("name") else channel
    private = bool(info.get("is_private"))
    if (problem := why_cannot_post(info)) is not None:
        what = "archived" if problem == "is_archived" else "the app is not in it"
        return fail(SUBJECT, f"{shown} [{use}]: {what}", FIX.get(problem, INVITE)), private, ""
    kind = "private channel" if private else "channel"
    return ok(SUBJECT, f"in {kind} {shown} [{use}]"), private, ""


def _scopes(
    settings: Settings, headers: Mapping[str, Any], seen: Sequence[tuple[Finding, bool, str]]
) -> list[Finding]:
    """Every scope the settings and the channels `seen` need, but those their findings named."""
    scopes = [value for name, value in headers.items() if name.lower() == "x-oauth-scopes"]
    if not scopes:
        return [warn(SUBJECT, "Slack sent no x-oauth-scopes header: scopes not checked")]
    text = scopes[0][0] if isinstance(scopes[0], list | tuple) else scopes[0]
    granted = {part.strip() for part in str(text).split(",") if part.strip()}
    private, groups = {is_private for _, is_private, _ in seen}, settings.scale_allowed_groups
    why = dict(ALWAYS)
    if False in private:
        why |= PUBLIC_CHANNELS
    if True in private:
        why |= PRIVATE_CHANNELS
    if groups:
        why[USER_GROUPS] = f"{USER_GROUPS_WHY}; SCALE_ALLOWED_USERS has {', '.join(groups)}"
    reported = {needs for _, _, needs in seen}
    if all(scope in granted for scope in why):
        names = ", ".join(why)
        return [ok(SUBJECT, f"scopes: the {len(why)} the settings need are granted ({names})")]
    return [
        fail(SUBJECT, f"scope {scope} missing: {why[scope]}", ADD_SCOPE.format(scope=scope))
        for scope in why
        if scope not in granted and scope not in reported
    ]


async def _app_token(client: AsyncWebClient, token: str) -> Finding:
    """`apps.connections.open`, as the Socket Mode client starts: it answers a websocket URL and
    opens nothing until that is connected to (`auth.test` refuses app-level tokens)."""
    error = (await ask(client.apps_connections_open(app_token=token))).error
    if not error:
        return ok(SUBJECT, "Socket Mode: the app-level token opens connections")
    said = {
        "not_allowed_token_type": "SLACK_APP_TOKEN is not an app-level token (xapp-…)",
        "missing_scope": "SLACK_APP_TOKEN lacks the connections:write scope",
    }
    refused = " refused SLACK_APP_TOKEN" if error in TOKEN_REFUSED else ""
    return fail(SUBJECT, said.get(error, f"apps.connections.open{refused}: {error}"), APP_TOKEN_FIX)
