"""The pilot's state in Redis, per runner type: what the leader last decided, who paused it (one
writer each), and a claim per act, so one act is made once whatever fails over mid-act."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from bot.domain.scale.pilot import Paused, Piloted
from bot.storage.keys import Records, claim_once

STATE_S = 86_400  # the leader rewrites it at every reading while the type has an incident
# A pause lasts until someone resumes it: the leader renews it at every look, so only a bot
# stopped this long lets it lapse.
PAUSE_S = 30 * 86_400
ACT_CLAIM_S = 7 * 86_400  # longer than any incident the act belongs to stays open


class PilotStore(Records):
    async def states(self, types: list[str]) -> dict[str, tuple[Piloted, Paused | None]]:
        if not types:
            return {}
        k = self.keys
        raws = await self._redis.mget(
            [key for t in types for key in (k.pilot(t), k.pilot_paused(t))]
        )
        return {
            t: (_read(Piloted, state) or Piloted(), _read(Paused, paused))
            for t, state, paused in zip(types, raws[0::2], raws[1::2], strict=True)
        }

    async def save(self, runner_type: str, state: Piloted) -> None:
        await self._redis.set(self.keys.pilot(runner_type), state.model_dump_json(), ex=STATE_S)

    async def pause(self, runner_type: str, paused: Paused) -> None:
        key = self.keys.pilot_paused(runner_type)
        await self._redis.set(key, paused.model_dump_json(), ex=PAUSE_S)

    async def kept_paused(self, runner_type: str) -> None:
        await self._redis.expire(self.keys.pilot_paused(runner_type), PAUSE_S)

    async def resume(self, runner_type: str, at: datetime) -> bool:
        """Whether it was paused; when, kept: a failure someone resumed it after is theirs."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.pilot_paused(runner_type))
            pipe.set(self.keys.pilot_resumed(runner_type), at.isoformat(), ex=PAUSE_S)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def resumed(self, runner_type: str) -> datetime | None:
        raw = await self._redis.get(self.keys.pilot_resumed(runner_type))
        try:
            return datetime.fromisoformat(raw) if raw else None
        except (TypeError, ValueError):
            return None

    async def paused(self, runner_type: str) -> Paused | None:
        return _read(Paused, await self._redis.get(self.keys.pilot_paused(runner_type)))

    async def claim_act(self, incident_id: str, runner_type: str, act: str) -> bool:
        """Whether this is the first claim of the incident's act `act` on the type."""
        key = self.keys.pilot_act(incident_id, runner_type, act)
        return await claim_once(self._redis, key, ACT_CLAIM_S * 1000)

    async def act_claimed(self, incident_id: str, runner_type: str, act: str) -> bool:
        """Whether the act `act` was claimed and not released since: begun, perhaps made."""
        return bool(await self._redis.exists(self.keys.pilot_act(incident_id, runner_type, act)))

    async def release_act(self, incident_id: str, runner_type: str, act: str) -> None:
        """An act that changed nothing may be made again."""
        await self._redis.delete(self.keys.pilot_act(incident_id, runner_type, act))


M = TypeVar("M", bound=BaseModel)


def _read(model: type[M], raw: str | None) -> M | None:
    """None for none, or one unreadable (a state read as none only starts the hold again; a pause,
    someone must pause again)."""
    try:
        return model.model_validate_json(raw) if raw else None
    except ValidationError:
        return None
