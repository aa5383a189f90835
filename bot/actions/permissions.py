"""Who may do what: one hook every action passes through before anything is called. Scaling costs
money and capacity, so only `SCALE_ALLOWED_USERS` (directly or through a user group) may; the other
actions are how an on-call works, open to everyone in the channel."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from bot.config import Settings
from bot.render.mrkdwn import escape

log = logging.getLogger(__name__)

RESTRICTED = frozenset({"scale"})
GROUP_CACHE_S = 300.0
# A modal's submission waits for the check within Slack's 3 s: a slow group allows nobody this
# time rather than losing the answer; its lookup goes on for up to GROUP_FETCH_S, so the next
# try finds it cached.
GROUP_LOOKUP_S = 1.5
GROUP_FETCH_S = 10.0


class Authorizer:
    def __init__(
        self,
        config: Settings,
        *,
        group_members: Callable[[str], Awaitable[Sequence[str]]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._group_members = group_members
        self._clock = clock
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}  # group -> (read at, members)
        self._fetching: dict[str, asyncio.Task[frozenset[str] | None]] = {}

    async def refusal(self, user_id: str, action: str) -> str | None:
        """None when `user_id` may do `action`; else what to tell them, and how to be allowed."""
        if not user_id:  # Slack names the user of every request; a request that does not is refused
            return "Slack did not say who asked, so nothing was done."
        if action not in RESTRICTED:
            return None
        allowed = self._config.scale_allowed_users
        if not allowed:
            return (
                "Scaling from Slack is turned off: nobody is allowed yet. An operator allows "
                "people by listing their Slack user IDs or user-group IDs in "
                "`SCALE_ALLOWED_USERS`."
            )
        if user_id in allowed or await self._in_a_group(user_id):
            return None
        return (
            f"You are not allowed to scale runners. An operator can add your Slack user ID "
            f"(`{escape(user_id)}`) or one of your user groups to `SCALE_ALLOWED_USERS`."
        )

    async def _in_a_group(self, user_id: str) -> bool:
        """Fresh cached members answer at once; else the other groups are asked together, for
        GROUP_LOOKUP_S, and a group unread this time answers with the members it had last."""
        now, groups = self._clock(), self._config.scale_allowed_groups
        fresh = {g for g in groups if (c := self._groups.get(g)) and now - c[0] < GROUP_CACHE_S}
        if any(user_id in self._groups[g][1] for g in fresh):
            return True
        if stale := {self._fetch(group) for group in groups if group not in fresh}:
            await asyncio.wait(stale, timeout=GROUP_LOOKUP_S)
        return any(user_id in members for _, members in self._groups.values())

    def _fetch(self, group: str) -> asyncio.Task[frozenset[str] | None]:
        task = self._fetching.get(group)
        if task is None:
            task = self._fetching[group] = asyncio.ensure_future(self._members(group))
            task.add_done_callback(lambda _: self._fetching.pop(group, None))
        return task

    async def _members(self, group: str) -> frozenset[str] | None:
        """The group's members, cached; None when they could not be read (asked again soon)."""
        try:
            members = frozenset(await asyncio.wait_for(self._group_members(group), GROUP_FETCH_S))
        except Exception as exc:
            log.warning("user group %s: members unreadable (%s)", group, exc)
            return None
        self._groups[group] = (self._clock(), members)
        return members
