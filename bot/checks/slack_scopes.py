"""The Slack bot-token scopes queuepilot's features need, each with what breaks without it.
`auth.test`, `chat.getPermalink` and `views.*` need none; the manifests list `DEFAULT`, and a test
keeps them equal."""

from __future__ import annotations

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


def needed(
    *, public_channels: bool = True, private_channels: bool = False, user_groups: bool = False
) -> dict[str, str]:
    """Scope -> the feature that needs it."""
    scopes = dict(ALWAYS)
    if public_channels:
        scopes |= PUBLIC_CHANNELS
    if private_channels:
        scopes |= PRIVATE_CHANNELS
    if user_groups:
        scopes[USER_GROUPS] = USER_GROUPS_WHY
    return scopes


# What the manifests ask for: the defaults (public channels, no user groups).
DEFAULT = tuple(needed())
