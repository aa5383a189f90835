"""Every Lua script, from `lua/<name>.lua`, after the one prelude several share. The queue's score
constants are defined here once and handed to the prelude, so Lua and Python agree on them."""

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
    return redis.register_script(lua(name))
