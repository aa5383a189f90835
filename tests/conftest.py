"""Shared fixtures: a real redis-server (and a client of it), the Slack emulator over HTTP, running
bots, and the `webhook` scaler's receiver. What the tests import (helpers, constants, fakes) is in
tests/support."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from redis.asyncio import Redis

from bot.config import Settings, load_settings
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.fakes.github_api import FakeGithub
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.jobs import queue_of_jobs
from tests.support.running import WEBHOOK_TOKEN, RunningBot, run_bot
from tests.support.servers import RedisServer
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack
from tests.support.warm_prometheus import start_spares, stop_spares

# The same examples every run: a property test fails on what changed, not on the day's draw
# (`make bench`'s fuzz is where new inputs are explored). No deadline: on a loaded 2-core machine
# an example's time says more about the machine than the code (a 200 ms deadline failed there).
hypothesis_settings.register_profile("suite", derandomize=True, deadline=None)
hypothesis_settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    """Each parallel worker (`pytest -n`, see pyproject) starts its own servers: the ports it
    picks come from its own band, below Linux's ephemeral range (32768 and up), so two workers
    never pick the same port (`sandbox.redis_server.free_port`)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        low = 10000 + 4000 * int(worker[2:])
        os.environ["QUEUEPILOT_PORT_BAND"] = f"{low}-{low + 3999}"


@pytest.hookimpl(trylast=True)  # after `-m`, `-k` and `--deselect` chose the tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each worker's share begins with its part of the long tests (`slow`: 10 s to 1.5 min).
    `--dist worksteal` hands each worker an equal, contiguous share of the collection and an
    idle one steals the back half of the longest queue: a long test at the back of a share runs
    while the others sit idle, and long tests bunched in one share run one after another there
    (with the longest files first, one worker took all of them and ran 75 s past the rest)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    slow = [item for item in items if item.get_closest_marker("slow")]
    if workers < 2 or not slow:
        return
    rest = [item for item in items if not item.get_closest_marker("slow")]
    ordered: list[pytest.Item] = []
    for k in range(workers):  # the shares as xdist cuts them: what is left over those to come
        share = (len(items) - len(ordered)) // (workers - k)
        mine = slow[k::workers]
        taken = max(share - len(mine), 0)
        ordered += mine + rest[:taken]
        rest = rest[taken:]
    items[:] = ordered + rest


@pytest.fixture(scope="session", autouse=True)
def _prometheus_spares() -> Iterator[None]:
    """The Prometheus a worker keeps started for its next test that scrapes one
    (`tests.support.warm_prometheus`): started with the session, for ARC's two listeners and
    for them with the runner pods' sources (`ArcFleet`), and stopped with it."""
    start_spares(2, 3)
    yield
    stop_spares()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flush()
    return redis_server.url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def _slack_session() -> Iterator[Slack]:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,))
    server = serve_in_thread(emulator.app)
    yield Slack(emulator, server)
    server.stop()


@pytest.fixture
def slack(_slack_session: Slack) -> Slack:
    _slack_session.emulator.reset()
    return _slack_session


@pytest.fixture
def settings_for(redis_url: str, slack: Slack) -> Callable[..., Settings]:
    """Settings for a bot wired to this test's Redis and the emulator, fast cadences."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            # Explicit, so nothing in the developer's environment (a SLACK_APP_TOKEN would mean
            # Socket Mode against real Slack) reaches a test bot.
            "slack_app_token": None,
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": SIGNING_SECRET,
            "slack_api_url": slack.api_url,
            "slack_channel": CHANNEL,
            "redis_url": redis_url,
            "alert_webhook_token": WEBHOOK_TOKEN,
            "slack_post_interval_ms": 20,
            "slack_update_interval_ms": 20,
            "status_tick_seconds": 0.1,
            "intake_reclaim_idle_ms": 500,
            # The probes' first round would take what a test scripts a stand-in to answer (a
            # failure, a hang) before the bot's own call does: on where a test looks at them.
            "probe_interval_seconds": "off",
        }
        values.update(overrides)
        return load_settings(_env_file=None, **values)

    return make


@pytest.fixture
async def running_bot(settings_for: Callable[..., Settings]) -> AsyncIterator[RunningBot]:
    async with run_bot(settings_for()) as running:
        yield running


@pytest.fixture
def receiver() -> Iterator[ScaleReceiver]:
    """The `webhook` scaler's target, served over HTTP; a hanging one is let go at the end."""
    fake = ScaleReceiver()
    with serve_in_thread(fake.app) as server:
        fake.url = f"{server.url}/scale"  # type: ignore[attr-defined]
        yield fake
        if fake.hanging is not None:
            fake.hanging.set()


@pytest.fixture
def github_jobs() -> Iterator[tuple[FakeGithub, RunningServer]]:
    """A GitHub-shaped API listing a queue's jobs (`tests.support.jobs.queue_of_jobs`)."""
    fake = FakeGithub()
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    queue_of_jobs(fake)
    try:
        yield fake, server
    finally:
        server.stop()


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    """A Kubernetes API server's AutoscalingRunnerSet routes (`FakeKubeApi`), served."""
    fake = FakeKubeApi()
    server = serve_in_thread(fake.app)
    fake.url = server.url  # type: ignore[attr-defined]
    yield fake
    server.stop()
