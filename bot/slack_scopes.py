"""The Slack bot-token scopes queuepilot's features need, and what breaks without each.

`queuepilot check` compares a token's scopes (`x-oauth-scopes`) with `needed`; the manifests list
`DEFAULT`, and a test keeps them equal. `auth.test`, `chat.getPermalink` and `views.*` (App Home
included) need no scope; Socket Mode's app-level token carries its own `connections:write`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    name: str
    feature: str


ALWAYS = (
    Scope("chat:write", "incident threads are posted and edited (chat.postMessage, chat.update)"),
    Scope("commands", "the slash command (/queue)"),
    Scope("users:read", "people's names on the timeline and in summaries (users.info)"),
    Scope(
        "files:write",
        "postmortems shared into the thread as a file, and charts as pictures (files.upload v2)",
    ),
)
PUBLIC_CHANNELS = (
    Scope(
        "channels:read",
        "the check that the app is in SLACK_CHANNEL and every route's channel (conversations.info)",
    ),
    Scope(
        "channels:history",
        "a post whose answer was lost is looked up before it is sent again "
        "(conversations.history); without it, it may show twice",
    ),
)
PRIVATE_CHANNELS = (
    Scope("groups:read", "a private channel's membership check (conversations.info)"),
    Scope("groups:history", "the lookup of a lost post in a private channel"),
)
USER_GROUPS = Scope(
    "usergroups:read", "SCALE_ALLOWED_USERS names a user group: its members (usergroups.users.list)"
)
OPTIONAL = (*PRIVATE_CHANNELS, USER_GROUPS)


def needed(
    *, public_channels: bool = True, private_channels: bool = False, user_groups: bool = False
) -> tuple[Scope, ...]:
    scopes = list(ALWAYS)
    if public_channels:
        scopes += PUBLIC_CHANNELS
    if private_channels:
        scopes += PRIVATE_CHANNELS
    if user_groups:
        scopes.append(USER_GROUPS)
    return tuple(scopes)


# What the manifests ask for: the defaults (public channels, no user groups).
DEFAULT = tuple(scope.name for scope in needed())
