"""No import circles among bot's and handlers' modules: every import counts, also one under
`if TYPE_CHECKING:` or inside a function, since a reader follows it all the same. Two files that
import each other are one concept split in two, or share a type that belongs lower down."""

from __future__ import annotations

import ast
from pathlib import Path

import bot
import handlers

ROOTS = (Path(bot.__file__).parent, Path(handlers.__file__).parent)


def module_of(path: Path) -> str:
    """bot/outbound/send.py -> bot.outbound.send; bot/outbound/__init__.py -> bot.outbound."""
    parts = path.relative_to(ROOTS[0].parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def graph() -> dict[str, set[str]]:
    """Each module, with the modules of this project it imports."""
    paths = {module_of(p): p for root in ROOTS for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from bot.outbound import edits` imports the module bot.outbound.edits.
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                    for a in node.names
                ]
            else:
                continue
            edges[name] |= {t for t in targets if t in paths and t != name}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    found = circles(graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_a_circle_is_found() -> None:
    """A loop of three is one circle; a chain is none."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
