"""The Slack scopes queuepilot's features need, in one place.

`queuepilot check` compares a bot token's scopes (Slack's `x-oauth-scopes` header) with `needed`;
the app manifests (`slack-manifest.yaml`, `slack-manifest-socket-mode.yaml`) list `DEFAULT`, and a
test keeps them equal. Read from where the bot calls each Web API method:

- `chat.postMessage`, `chat.update`, `chat.postEphemeral` (`bot.outbound.gateway`): chat:write;
- the slash command: commands;
- `conversations.info` (`bot.outbound.membership`, at start): channels:read, groups:read for a
  private channel;
- `conversations.history` / `.replies` (`SlackGateway.find`, only after an uncertain post):
  channels:history, groups:history for a private channel. Without it the lookup is refused and
  the post is sent again, so it may show twice;
- `users.info` (`SlackGateway.display_name`, names on the timeline and in summaries): users:read;
- `usergroups.users.list` (`bot.actions.permissions`): usergroups:read, only when
  `SCALE_ALLOWED_USERS` names a user group (`S…`);
- `files.getUploadURLExternal` / `files.completeUploadExternal` (`SlackGateway.upload_file`):
  files:write, for every postmortem (`/queue postmortem`, the summary's button: a Markdown file
  shared into the thread) and for charts as pictures (`CHART_STYLE=image`, or a workspace that
  refused Slack's chart block);
- `auth.test`, `chat.getPermalink` and `views.*` take no scope (`views.publish` too: the App
  Home, `bot.outbound.home`, needs none; nor does its `app_home_opened` event).

Socket Mode's app-level token (`xapp-…`) carries connections:write, an app-level scope of its
own, not one of the bot token's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """A bot token scope and what goes wrong without it, as an operator reads it."""

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
    "usergroups:read",
    "SCALE_ALLOWED_USERS names a user group: its members (usergroups.users.list)",
)
OPTIONAL = (*PRIVATE_CHANNELS, USER_GROUPS)


def needed(
    *,
    public_channels: bool = True,
    private_channels: bool = False,
    user_groups: bool = False,
) -> tuple[Scope, ...]:
    """The scopes the enabled features need: public or private channels among the bot's, a user
    group in SCALE_ALLOWED_USERS."""
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
