"""Every Lua script loads after the one prelude, and none lives outside bot/storage/lua."""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path

import pytest
from redis.asyncio import Redis

import bot
from bot.storage.keys import lua

FOLDER = resources.files("bot.storage") / "lua"
NAMES = sorted(p.name.removesuffix(".lua") for p in FOLDER.iterdir() if p.name.endswith(".lua"))


@pytest.mark.parametrize("name", [n for n in NAMES if n != "prelude"])
async def test_each_script_compiles_after_the_prelude(redis: Redis, name: str) -> None:
    assert await redis.script_load(lua(name))


def test_no_module_carries_a_script_of_its_own() -> None:
    inline = [
        str(path.relative_to(Path(bot.__file__).parent.parent))
        for path in Path(bot.__file__).parent.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if "redis.call(" in node.value
    ]
    assert inline == []
