"""What the whole-bot runs share: ARC listeners scraped by a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fakes.arc_exporter import ArcFleet


@pytest.fixture
def arc_fleet() -> Iterator[ArcFleet]:
    """Two ARC listeners (one queueing, one healthy), scraped by a real Prometheus; fresh per
    test, as tests change what the listeners report."""
    fleet = ArcFleet()
    try:
        yield fleet
    finally:
        fleet.stop()
