"""The caches' sizes follow the memory the process is given: MEMORY_LIMIT_MIB, else its cgroup's
limit (v2's memory.max, v1's memory.limit_in_bytes, as /proc/self/cgroup places it), else the
chart's 320 MiB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config.memory import (
    DEFAULT_LIMIT_MIB,
    MIB,
    RESERVED_MIB,
    cache_bytes,
    cgroup_files,
    described,
    limit_mib,
    memory_limit,
)

V2 = "0::/kubepods.slice/pod-1.slice/cri-containerd-2.scope\n"
V1 = "12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n"


def test_a_small_limit_gives_small_caches_and_a_larger_one_more() -> None:
    """At 128 MiB (under what the process needs at rest and busy) every cache keeps its floor;
    the chart's 320 MiB gives the readings 9.6 MiB; each cache grows with the limit."""
    small, chart, large = cache_bytes(128), cache_bytes(320), cache_bytes(1024)
    assert sum(small.values()) <= 4 * MIB
    assert chart["github_readings"] == pytest.approx(9.6 * MIB, rel=0.01)
    assert sum(chart.values()) < (320 - RESERVED_MIB) * MIB / 10  # the rest is headroom
    assert all(small[c] <= chart[c] < large[c] for c in chart)


def test_the_setting_wins_over_the_cgroup(tmp_path: Path) -> None:
    proc = _file(tmp_path / "proc", V2)
    _file(tmp_path / "kubepods.slice/pod-1.slice/cri-containerd-2.scope/memory.max", "536870912")
    assert memory_limit(700, root=tmp_path, proc=proc).mib == 700
    found = memory_limit(None, root=tmp_path, proc=proc)
    assert found.mib == 512 and "memory.max" in found.source
    assert "github_readings 21.1 MiB" in described(found)


def test_a_parent_slices_smaller_limit_is_the_processs(tmp_path: Path) -> None:
    """A container without a limit of its own in a pod (or a systemd slice) that has one: the
    smallest limit of its cgroup and its ancestors holds it."""
    proc = _file(tmp_path / "proc", V2)
    _file(tmp_path / "kubepods.slice/pod-1.slice/cri-containerd-2.scope/memory.max", "max\n")
    _file(tmp_path / "kubepods.slice/pod-1.slice/memory.max", "402653184\n")
    _file(tmp_path / "kubepods.slice/memory.max", "8589934592\n")
    found = memory_limit(None, root=tmp_path, proc=proc)
    assert found.mib == 384 and "pod-1.slice/memory.max" in found.source


def test_a_container_sees_its_own_cgroup_at_the_mounts_root(tmp_path: Path) -> None:
    """With a cgroup namespace /proc/self/cgroup says `0::/` and the limit is at the root; on
    cgroup v1 the memory controller's mount holds it."""
    _file(tmp_path / "memory.max", "268435456\n")
    assert memory_limit(None, root=tmp_path, proc=_file(tmp_path / "p2", "0::/\n")).mib == 256
    _file(tmp_path / "memory/memory.limit_in_bytes", "1073741824\n")
    assert memory_limit(None, root=tmp_path, proc=_file(tmp_path / "p1", V1)).mib == 1024


@pytest.mark.parametrize("written", ["max\n", "9223372036854771712\n", "", None])
def test_no_limit_sizes_the_caches_as_the_charts_default(
    tmp_path: Path, written: str | None
) -> None:
    """`max` (v2), v1's page-aligned 2^63 and a missing file are no limit."""
    if written is not None:
        _file(tmp_path / "memory.max", written)
    found = memory_limit(None, root=tmp_path, proc=_file(tmp_path / "proc", "0::/\n"))
    assert found.mib == DEFAULT_LIMIT_MIB and "chart" in found.source


@given(st.text(max_size=40))
def test_any_limit_file_reads_as_a_limit_or_none(text: str) -> None:
    found = limit_mib(text)
    assert found is None or (found >= 1 and text.strip().isascii())


@given(st.integers(min_value=0, max_value=1 << 62))
def test_a_number_of_bytes_reads_as_whole_mib(size: int) -> None:
    found = limit_mib(f"{size}\n")
    assert found == (size // MIB if MIB <= size < 1 << 60 else None)


@given(st.text(max_size=200))
def test_any_proc_cgroup_text_names_only_files_under_the_mount(text: str) -> None:
    root = Path("/sys/fs/cgroup")
    for path in cgroup_files(text, root):
        assert path.is_relative_to(root) and ".." not in path.parts
        assert path.name in ("memory.max", "memory.limit_in_bytes")


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_the_served_bot_sizes_its_github_caches_from_memory_limit_mib(
    settings_for: Any,
) -> None:
    """MEMORY_LIMIT_MIB, resolved once by the serving bot, sizes the readings' pages."""
    from bot.app import build_bot
    from bot.backends.metrics.github import GithubMetrics

    settings = settings_for(
        metrics_backend="github",
        github_token="ghp-1",
        github_repos=("pytorch/pytorch",),
        memory_limit_mib=1024,
    )
    bot = build_bot(settings)
    try:
        assert bot.memory.mib == 1024 and bot.memory.source == "MEMORY_LIMIT_MIB"
        metrics = bot.readings.metrics
        assert isinstance(metrics, GithubMetrics)
        assert metrics.api.etags.max_bytes == cache_bytes(1024)["github_readings"]
    finally:
        await bot.readings.metrics.aclose()
        await bot.redis.aclose()
