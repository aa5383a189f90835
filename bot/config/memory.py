"""The memory the process is given (MEMORY_LIMIT_MIB, else the cgroup's limit, else the chart's)
and each byte-bounded cache's share of it, sized here in one place.

RESERVED_MIB does not grow with the limit: the interpreter, libraries and a quiet bot's state
(`bench.footprint`: 81-91 MiB at rest), plus a busy GitHub fleet's readings (`bench.soak --case
pages`: some 50 MiB) or a storm's charts (some 70 MiB). The caches share part of the rest; most of
it stays headroom for bigger fleets and heap fragmentation, which CPython does not give back."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MIB = 1024 * 1024
RESERVED_MIB = 160  # at rest, plus a busy fleet's readings or a storm: the chart's request
DEFAULT_LIMIT_MIB = 320  # the chart's limit: the size of a process that was given none
Cache = Literal["github_readings", "github_issues"]
# Each cache's share of the limit above RESERVED_MIB.
SHARES: dict[Cache, float] = {
    # A page asked again answers 304 from here, free of quota; at the chart's limit, 9.6 MiB: the
    # `/jobs` pages of some 200 active runs at 50 kB (older pages are of runs nobody asks for).
    "github_readings": 0.06,
    # An issue's search and comments: a few small pages per open incident.
    "github_issues": 0.01,
}
FLOOR = 2 * MIB  # a cache's least, however small the limit: the listings keep their 304s
# cgroup v1 writes "no limit" as the largest multiple of the page size; nothing real comes close.
UNLIMITED = 1 << 60
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Limit:
    mib: int
    source: str  # where it was read, for the start's log line


def cache_bytes(limit_mib: int) -> dict[Cache, int]:
    spare = max(limit_mib - RESERVED_MIB, 0) * MIB
    return {name: max(int(share * spare), FLOOR) for name, share in SHARES.items()}


# For a process that resolved no limit (`queuepilot check`, a test's client).
DEFAULT_CACHES = cache_bytes(DEFAULT_LIMIT_MIB)


def memory_limit(
    setting: int | None, *, root: Path = CGROUP_ROOT, proc: Path = PROC_CGROUP
) -> Limit:
    """The smallest limit of the process's cgroup and its ancestors (a parent slice's limit holds
    its children too), where MEMORY_LIMIT_MIB is not set."""
    if setting is not None:
        return Limit(setting, "MEMORY_LIMIT_MIB")
    found = [
        (mib, path)
        for path in cgroup_files(_read(proc), root)
        if (mib := limit_mib(_read(path))) is not None
    ]
    if found:
        mib, path = min(found)
        return Limit(mib, f"the cgroup's limit ({path})")
    return Limit(DEFAULT_LIMIT_MIB, "no limit found: the Helm chart's")


def described(limit: Limit) -> str:
    """The start's log line."""
    sizes = ", ".join(
        f"{name} {size / MIB:.1f} MiB" for name, size in cache_bytes(limit.mib).items()
    )
    return f"{limit.mib} MiB ({limit.source}); caches: {sizes}"


def limit_mib(text: str) -> int | None:
    """A cgroup's limit file (v2's memory.max, v1's memory.limit_in_bytes) in whole MiB; None for
    no limit ("max", v1's huge number), nonsense, or under a MiB."""
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,20}", text) or int(text) >= UNLIMITED or int(text) < MIB:
        return None
    return int(text) // MIB


def cgroup_files(proc_cgroup: str, root: Path) -> list[Path]:
    """Where the limit may be, most specific first: the cgroup /proc/self/cgroup names (v2's
    `0::/path`, v1's `N:memory:/path`), its ancestors, then the mount's root (the container's own
    cgroup under a cgroup namespace)."""
    found = []
    for line in proc_cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        own = Path(path.strip("/"))
        if ".." not in own.parts:
            found += [base / part / name for part in [own, *own.parents] if part != Path(".")]
        found.append(base / name)
    return list(dict.fromkeys(found))


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return ""
