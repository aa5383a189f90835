"""Who may do what: one hook every action passes through before anything is called.

Acknowledge, silence, diagnose and resolve are open to everyone in the channel (they are how an
on-call works). Scaling costs money and capacity, so it is refused unless the person is listed in
`SCALE_ALLOWED_USERS`, directly (`U…`, `W…`) or through a Slack user group (`S…`), whose members
are read with `usergroups.users.list` and kept for a few minutes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.mrkdwn import escape

log = logging.getLogger(__name__)

RESTRICTED = frozenset({"scale"})
GROUP_CACHE_S = 300.0
# The check runs before a modal opens, within Slack's 3-second trigger: a slow lookup allows
# nobody this time rather than losing the modal.
GROUP_LOOKUP_S = 1.5


@dataclass(frozen=True)
class Rules:
    scale_allowed: tuple[str, ...] = ()

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(entry for entry in self.scale_allowed if entry.startswith("S"))


class Authorizer:
    def __init__(
        self,
        rules: Rules,
        *,
        group_members: Callable[[str], Awaitable[Sequence[str]]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rules = rules
        self._group_members = group_members
        self._clock = clock
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    async def refusal(self, user_id: str, action: str) -> str | None:
        """None when `user_id` may do `action`; else what to tell them, including how to be
        allowed."""
        if action not in RESTRICTED:
            return None
        allowed = self._rules.scale_allowed
        if not allowed:
            return (
                "Scaling from Slack is turned off: nobody is allowed yet. An operator allows "
                "people by listing their Slack user IDs or user-group IDs in "
                "`SCALE_ALLOWED_USERS`."
            )
        if user_id in allowed:
            return None
        for group in self._rules.groups:
            if user_id in await self._members(group):
                return None
        return (
            f"You are not allowed to scale runners. An operator can add your Slack user ID "
            f"(`{escape(user_id)}`) or one of your user groups to `SCALE_ALLOWED_USERS`."
        )

    async def _members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(group)
        now = self._clock()
        if cached is not None and now - cached[0] < GROUP_CACHE_S:
            return cached[1]
        try:
            members = frozenset(await asyncio.wait_for(self._group_members(group), GROUP_LOOKUP_S))
        except Exception as exc:  # an unreadable group allows nobody, and is asked again soon
            log.warning("user group %s: members unreadable (%s)", group, exc)
            return cached[1] if cached is not None else frozenset()
        self._groups[group] = (now, members)
        return members
