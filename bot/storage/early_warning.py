"""Early warnings in Redis, one per runner type. `version` counts the changes and `shown` the one
Slack shows, so a change made while a post is on its way is edited next; an ended warning is kept
a while, so a flapping forecast edits one message and a dismissal holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

from redis.asyncio import Redis

from bot.domain.reading.early_warning import WarningState
from bot.storage.connection import wait_bell
from bot.storage.incident_store import ATTEMPTS, BAND_EVENT
from bot.storage.keys import Keys, Records, claim_once

KEEP_S = 6 * 3600  # an ended warning is remembered this long
# The ts of a warning Slack refused for good (not in the channel, say): it is not posted again
# while it lasts, and nothing edits it.
REFUSED = "-"
READING_CLAIM_S = 3600


class WarningStore(Records):
    def __init__(self, redis: Redis, keys: Keys, *, bells: Redis | None = None) -> None:
        super().__init__(redis, keys)
        self._bells = bells or redis  # where `wait_for_edits` blocks, as `SendQueue`'s

    async def claim_reading(self, reading_at: float) -> bool:
        """Whether this is the first claim of a reading: its warnings are decided once."""
        key = self.keys.warning_reading(repr(reading_at))
        return await claim_once(self._redis, key, READING_CLAIM_S * 1000)

    async def all(self) -> dict[str, WarningState]:
        types = sorted(cast(set[str], await self._redis.smembers(self.keys.warnings)))  # type: ignore[misc]
        if not types:
            return {}
        k = self.keys
        raws = await self._redis.mget(
            [key for t in types for key in (k.warning(t), k.warning_scaled(t))]
        )
        found = {
            t: WarningState.load(raw, scaled)
            for t, raw, scaled in zip(types, raws[0::2], raws[1::2], strict=True)
        }
        if gone := [t for t, state in found.items() if state is None]:
            await self._redis.srem(self.keys.warnings, *gone)  # type: ignore[misc]
        return {t: state for t, state in found.items() if state is not None}

    async def get(self, runner_type: str) -> WarningState | None:
        k = self.keys
        raw, scaled = await self._redis.mget(k.warning(runner_type), k.warning_scaled(runner_type))
        return WarningState.load(raw, scaled)

    async def save(self, state: WarningState) -> bool:
        """Keep `state` and queue its post or edit; False when a newer version is stored."""
        k, channel = self.keys, state.channel
        per_channel = (k.posts, k.posts_bell, k.warning_edits, k.warning_bell, k.in_flight)
        keys = [k.warning(state.runner_type), k.warnings, k.send_seq]
        keys += [f(channel) for f in per_channel]
        keys.append(k.warning_scaled(state.runner_type))
        args = [state.dump(), state.runner_type, state.member, KEEP_S, BAND_EVENT, REFUSED]
        args.append(state.dump_scaled())
        return bool(await self._run("save_warning", keys, args))

    async def save_fresh(
        self, runner_type: str, change: Callable[[WarningState | None], WarningState | None]
    ) -> WarningState | Literal[False] | None:
        """Save what `change` makes of the warning as it is now: the state saved, None where the
        last attempt's `change` made nothing to save, False when the warning kept changing."""
        for _ in range(ATTEMPTS):
            changed = change(await self.get(runner_type))
            if changed is None or await self.save(changed):
                return changed
        return False

    async def record_post(self, state: WarningState, ts: str) -> None:
        k, channel = self.keys, state.channel
        per_channel = (k.posts, k.in_flight, k.warning_edits, k.warning_bell)
        keys = [k.warning(state.runner_type), *(f(channel) for f in per_channel)]
        keys.append(k.warning_scaled(state.runner_type))
        args = [state.member, state.uid, ts, state.version, state.runner_type, KEEP_S]
        await self._run("record_warning", keys, args)

    async def edits(self, channel: str) -> list[str]:
        return sorted(cast(set[str], await self._redis.smembers(self.keys.warning_edits(channel))))  # type: ignore[misc]

    async def discard_edit(self, channel: str, runner_type: str) -> None:
        await self._redis.srem(self.keys.warning_edits(channel), runner_type)  # type: ignore[misc]

    async def record_edit(self, channel: str, state: WarningState) -> None:
        k, runner_type = self.keys, state.runner_type
        keys = [k.warning(runner_type), k.warning_edits(channel), k.warning_scaled(runner_type)]
        args = [runner_type, state.uid, state.version, KEEP_S]
        await self._run("record_warning_edit", keys, args)

    async def wait_for_edits(self, channel: str, timeout_s: float) -> None:
        await wait_bell(self._bells, self.keys.warning_bell(channel), timeout_s)
