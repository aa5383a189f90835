"""Fixtures shared by the handler tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.serve import serve_in_thread
from tests.support.fakes.scale_receiver import ScaleReceiver


@pytest.fixture
def receiver() -> Iterator[ScaleReceiver]:
    """The `webhook` scaler's target, served over HTTP; a hanging one is let go at the end."""
    fake = ScaleReceiver()
    with serve_in_thread(fake.app) as server:
        fake.url = f"{server.url}/scale"  # type: ignore[attr-defined]
        yield fake
        if fake.hanging is not None:
            fake.hanging.set()
