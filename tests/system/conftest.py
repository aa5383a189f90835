"""What the whole-bot runs share: ARC listeners scraped by a real Prometheus."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support.fakes.arc_exporter import ArcFleet
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
def own_redis() -> Iterator[RedisServer]:
    """A redis-server this test may empty, stop and start (the session's is shared)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
