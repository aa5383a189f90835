"""The real alert payloads of `tests/fixtures`, read as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture_json(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())
