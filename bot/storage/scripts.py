"""Every Lua script, from `bot/storage/lua/<name>.lua`, each after the one prelude that defines
what several share: the channel queue's scores and the check that a lease is still its holder's.

The score constants are defined here once and handed to the prelude, so the scripts and the
Python that reads scores (the storm rule's count of waiting roots) cannot differ.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

# A reply's score is its band * BAND + its sequence number, a new root's its severity rank * RANK
# + its sequence number, so every root scores up to ROOTS_END and goes first.
BAND = 1 << 40
RANK = 1 << 34
ROOTS_END = BAND - 1


@cache
def lua(name: str) -> str:
    folder = resources.files("bot.storage") / "lua"
    constants = f"local BAND = {BAND}\nlocal RANK = {RANK}\n"
    return constants + (folder / "prelude.lua").read_text() + (folder / f"{name}.lua").read_text()


def script(redis: Redis, name: str) -> AsyncScript:
    """`lua(name)` registered with `redis`: loaded on first use."""
    return redis.register_script(lua(name))
