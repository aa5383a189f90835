"""The image `make image` built (QUEUEPILOT_IMAGE), its filesystem mounted from buildah's store."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.image.container import Image, mounted


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    name = os.environ.get("QUEUEPILOT_IMAGE")
    if not name:
        pytest.skip("no image named: `make image` builds one and runs these tests on it")
    if os.geteuid() != 0:
        pytest.fail("buildah's store and runc need root: run `make image` as root")
    with mounted(name) as built:
        yield built
