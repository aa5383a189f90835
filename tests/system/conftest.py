"""What the whole-bot runs share: ARC listeners scraped by a real Prometheus; for two releases'
replicas side by side, ARC's scale set, Grafana's silences and a plain Redis client."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import redis

from sandbox.serve import serve_in_thread
from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.arc_exporter import ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.servers import RedisServer


@pytest.fixture
def arc_fleet() -> Iterator[ArcFleet]:
    """Two ARC listeners (one queueing, one healthy), scraped by a real Prometheus; fresh per
    test, as tests change what the listeners report."""
    fleet = ArcFleet()
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def pods20() -> Iterator[ArcFleet]:
    """The listeners with kube-state-metrics scraped beside them, 20 runner pods running: the
    runner pods are read."""
    fleet = ArcFleet(pods=("ksm",))
    fleet.pods.set(fleet.queueing.name, running=20)
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server this test may empty, stop and start (the session's is shared)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture
def arc_kube(kube: FakeKubeApi) -> FakeKubeApi:
    """The Kubernetes fake with the recorded ARC scale set, 40 runners running."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    return kube


@pytest.fixture
def grafana() -> Iterator[FakeSilenceApi]:
    """Grafana's silences API, served."""
    api = FakeSilenceApi()
    with serve_in_thread(api.app) as server:
        api.url = server.url  # type: ignore[attr-defined]
        yield api


@pytest.fixture
def store(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client of the session's redis-server, to read what the replicas left there."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()
