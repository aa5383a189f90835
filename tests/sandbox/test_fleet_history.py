"""The simulated fleet keeps what Prometheus would have scraped and answers range queries over
it as Prometheus does, so the demo's `/queue report` reads a history; the bot's `prometheus`
backend reads it through its own history path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings
from sandbox.fleet import DEMO_TYPES, Fleet
from sandbox.fleet_api import FleetApi, FleetApiConfig
from sandbox.stack import SCALE_SETS


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fleet_api() -> FleetApi:
    return FleetApi(Fleet(DEMO_TYPES, (), clock=Clock()), FleetApiConfig(rate_window="10m"))


async def test_range_queries_over_the_kept_readings() -> None:
    api = fleet_api()
    api.evaluate_all()  # one reading kept, now
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleet") as http:
        end = datetime.now(UTC) + timedelta(seconds=1)
        config = Settings(
            prometheus_url="http://fleet",
            prometheus_rate_window="10m",
            runner_scale_sets=SCALE_SETS,
            scaler_targets={spec.name: {} for spec in DEMO_TYPES},
        )
        metrics = PrometheusMetrics(config, http)
        kept = await metrics.history(start=end - timedelta(hours=1), end=end)
    # Every type read (under its runner type's name), its maximum known; the last step of the
    # hour holds the reading.
    assert sorted(kept.types) == sorted(spec.name for spec in DEMO_TYPES)
    [spec] = [spec for spec in DEMO_TYPES if spec.name == "linux.g5.4xlarge.nvidia.gpu"]
    gpu = kept.types[spec.name]
    assert list(gpu.maximum.values()) == [spec.maximum] and gpu.queued == {max(gpu.queued): 0.0}
    # The histogram quantiles are queries the fleet does not serve: said, not guessed.
    assert kept.note == (
        "Prometheus could not answer for queue time p50, queue time p90, job duration"
    )
