"""`serve` says what `check` finds: a served bot on a backend that `check` fails logs it once with
its fix (not each round), its gauge reads 0 while /readyz stays ready, and once the backend is put
right, one recovery line and 1."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bot.app import build_bot
from bot.config import Settings
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import RunningBot, eventually, run_bot

ROUND_S = 0.2
SET = "mt-l-x86iavx512-8-64"


class Lines(logging.Handler):
    """What `bot.checks.watch` logs, as (level, message)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.said: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append((record.levelname, record.getMessage()))

    def about(self, probe: str) -> list[tuple[str, str]]:
        return [(level, text) for level, text in self.said if text.startswith(f"probe {probe} ")]


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("bot.checks.watch")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def probe_ok(running: RunningBot, probe: str) -> str | None:
    """The gauge's value as /metrics shows it, or None while it has none."""
    text = (await running.http.get("/metrics")).text
    prefix = f'queuepilot_probe_ok{{probe="{probe}"}} '
    return next(
        (line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)), None
    )


async def rounds(redis: Redis) -> int:
    """The probe rounds run so far: the Redis probe alone asks for CONFIG, once a round."""
    stats = await redis.info("commandstats")  # Redis 7 counts `cmdstat_config|get`
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_config"))


async def test_a_redis_that_may_evict_is_said_once_then_its_recovery_once(
    settings_for: Callable[..., Settings], evicting_redis: str, lines: Lines
) -> None:
    settings = settings_for(redis_url=evicting_redis, probe_interval_seconds=ROUND_S)
    redis = Redis.from_url(evicting_redis, decode_responses=True)
    async with run_bot(settings) as running:
        [(level, said)] = await eventually(lambda: lines.about("redis"), what="the warning")
        assert level == "WARNING"
        assert said.startswith("probe redis failing: maxmemory-policy allkeys-lru with maxmemory")
        assert "— fix: set maxmemory-policy noeviction" in said
        assert await eventually(lambda: probe_ok(running, "redis")) == "0.0"
        ready = await running.http.get("/readyz")
        assert ready.status_code == 200, "a backend's probe never makes a replica unready"

        seen = await rounds(redis)
        await eventually(lambda: _past(redis, seen + 3), what="three more rounds")
        assert len(lines.about("redis")) == 1, "said once, not each round"

        await redis.config_set("maxmemory-policy", "noeviction")
        await eventually(lambda: len(lines.about("redis")) == 2, what="the recovery")
        assert lines.about("redis")[1] == (
            "INFO",
            "probe redis recovered: queuepilot check finds nothing to fix",
        )
        assert await probe_ok(running, "redis") == "1.0"
        seen = await rounds(redis)
        await eventually(lambda: _past(redis, seen + 2), what="two more rounds")
        assert len(lines.about("redis")) == 2
    await redis.aclose()


async def _past(redis: Redis, count: int) -> bool:
    return await rounds(redis) >= count


async def test_unscraped_metrics_and_a_missing_scale_set_are_said_and_the_set_recovers(
    settings_for: Callable[..., Settings],
    empty_prometheus: str,
    kube: FakeKubeApi,
    lines: Lines,
) -> None:
    kubeconfig = kube.kubeconfig(Path(tempfile.mkdtemp(prefix="qp-kube-")), kube.url)  # type: ignore[attr-defined]
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=empty_prometheus,
        scaler_backend="arc",
        scaler_kubeconfig=str(kubeconfig),
        scaler_targets=json.dumps({"linux.big": f"arc-runners/{SET}"}),
        scale_allowed_users="U0ONCALL",
        probe_interval_seconds=ROUND_S,
    )
    async with run_bot(settings) as running:
        [(_, metrics)] = await eventually(lambda: lines.about("prometheus"), what="prometheus")
        assert metrics.startswith("probe prometheus failing: none of the ")
        assert "— fix: scrape ARC's listeners" in metrics
        [(_, scaler)] = await eventually(lambda: lines.about("kubernetes"), what="kubernetes")
        assert scaler == (
            f"probe kubernetes failing: arc-runners/{SET} (linux.big): no such "
            f'AutoscalingRunnerSet — fix: set SCALER_TARGETS["linux.big"] to an existing scale '
            "set (kubectl get autoscalingrunnersets -n arc-runners)"
        )
        assert await eventually(lambda: probe_ok(running, "kubernetes")) == "0.0"
        assert await eventually(lambda: probe_ok(running, "prometheus")) == "0.0"
        assert (await running.http.get("/readyz")).status_code == 200

        kube.add_from_fixture(minRunners=0, maxRunners=20)
        await eventually(lambda: len(lines.about("kubernetes")) == 2, what="the recovery")
        assert lines.about("kubernetes")[1][0] == "INFO"
        assert await probe_ok(running, "kubernetes") == "1.0"
        assert len(lines.about("prometheus")) == 1, "still failing: said once"


def test_off_leaves_the_probes_to_check(settings_for: Callable[..., Settings]) -> None:
    bot = build_bot(settings_for(probe_interval_seconds="off"))
    assert "probes" not in bot.ticks
    assert "probes" in build_bot(settings_for(probe_interval_seconds="5m")).ticks
