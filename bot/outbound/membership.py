"""At start-up: is the app in every channel it will post to (`SLACK_CHANNEL`, each route's)?

Said in the log an operator reads when deploying, not when the first alert cannot be posted. Never
fatal: the other channels work, and a Slack that cannot answer now is no configuration error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.outbound.gateway import SlackError, SlackGateway

log = logging.getLogger(__name__)

CHANGE = "or change SLACK_ROUTES / SLACK_CHANNEL"
FIX = {"is_archived": f"unarchive it {CHANGE}"}  # else: not in it, or cannot see it
INVITE = f"invite it there (/invite @queuepilot) {CHANGE}"
NO_SCOPE = ("missing_scope", "not_allowed_token_type")


async def check_channels(gateway: SlackGateway, uses: Mapping[str, str]) -> dict[str, str]:
    """`uses`: channel -> what posts there ("SLACK_CHANNEL", "route 2: team=rocm"). Logs, and
    answers, each channel the app cannot post to with why."""
    problems: dict[str, str] = {}
    for channel, use in uses.items():
        try:
            info = (await gateway.call("conversations.info", channel=channel)).get("channel")
        except SlackError as exc:
            if exc.error in NO_SCOPE:
                log.warning(
                    "cannot check that queuepilot is in its channels (%s): add the "
                    "channels:read and groups:read scopes to the app",
                    exc.error,
                )
                return problems
            if exc.error != "channel_not_found":  # Slack down, rate limited: not a finding
                log.warning("channel %s (%s): not checked: %s", channel, use, exc.error)
                continue
            problems[channel] = "channel_not_found"
        else:
            problem = why_cannot_post(info)
            if problem is None:
                continue
            problems[channel] = problem
        log.error(
            "channel %s (%s): queuepilot cannot post there (%s): %s; its incidents are "
            "dropped until then",
            channel,
            use,
            problems[channel],
            FIX.get(problems[channel], INVITE),
        )
    return problems


def why_cannot_post(info: object) -> str | None:
    """Why the app cannot post in the channel `conversations.info` describes, if it cannot."""
    if not isinstance(info, dict):
        return None
    if info.get("is_archived"):
        return "is_archived"
    if info.get("is_member") is False:
        return "not_in_channel"
    return None
