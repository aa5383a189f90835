"""bot/'s layering: every import of a bot module (also one inside a function) points down.

From the top: the composition root (app, __main__, factory) and `queuepilot check` (checks, which
probes with the root's backends) may import anything; the middle packages (intake, outbound,
actions, status) the layers below, never each other; `fleet` (the fleet reading several of them
share) the lower layers; render, storage and backends only domain; domain only itself. Anyone may
import the leaves: telemetry, logs and pacing (the one way to wait after failures, the one way to
wait for a limit). `bot.config`, the settings,
imports only domain and `bot.storage.connection`; what it configures imports it (backends, fleet,
the middle packages, the top), never storage, render or domain.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bot

TOP = 4
RANK = {
    **dict.fromkeys(("app", "__main__", "factory", "checks"), TOP),
    # Who does the work (the leader's campaign over its lease in storage) and when (its periodic
    # jobs, APScheduler and the weekly schedule): what the composition root runs.
    "leader": 3,
    **dict.fromkeys(("intake", "outbound", "actions", "status"), 3),
    "fleet": 2,
    **dict.fromkeys(("render", "storage", "backends"), 1),
    "domain": 0,
}
LEAVES = {"telemetry", "logs", "pacing"}
ROOT = Path(bot.__file__).parent
MODULES = sorted(ROOT.rglob("*.py"))


def part(module: str) -> str:
    """The package (or top module) of bot a module belongs to: bot.domain.scale.pilot -> domain."""
    return module.split(".")[1]


def imported(tree: ast.AST) -> list[str]:
    """Every bot module imported anywhere in the tree (`from bot import logs` is bot.logs)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: a relative import"
            found += [
                f"bot.{alias.name}" if node.module == "bot" else str(node.module)
                for alias in node.names
            ]
    return [name for name in found if name.startswith("bot.")]


def allowed(importer: str, target: str) -> bool:
    mine, theirs = part(importer), part(target)
    if mine == theirs or theirs in LEAVES or RANK.get(mine) == TOP:
        return True
    if theirs == "config":
        return mine not in ("storage", "render", "domain")
    if mine == "config":
        return theirs == "domain" or target == "bot.storage.connection"
    return theirs in RANK and mine in RANK and RANK[theirs] < RANK[mine]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_imports_point_down(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    if module == "bot.__init__":
        return
    assert part(module) in {*RANK, *LEAVES, "config"}, f"{module}: in no layer (add it to RANK)"
    wrong = [t for t in imported(ast.parse(path.read_text())) if not allowed(module, t)]
    assert not wrong, f"{module} imports {', '.join(sorted(set(wrong)))} against the layering"
