"""One Slack message as a value: what renderers build, the store keeps and the sender posts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class Rendered:
    """`text` is the notification/fallback text (escaped, no mentions)."""

    text: str
    blocks: list[dict[str, Any]]


def digest_of(rendered: Rendered) -> str:
    """An edit is made only when it changes."""
    payload = json.dumps({"text": rendered.text, "blocks": rendered.blocks}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class ChartStyle(StrEnum):
    """`CHART_STYLE`: a `data_visualization` block Slack draws (`block` too), or an image."""

    NATIVE = "native"
    IMAGE = "image"

    @classmethod
    def _missing_(cls, value: object) -> ChartStyle | None:
        return cls.NATIVE if isinstance(value, str) and value.lower() == "block" else None
