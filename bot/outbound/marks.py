"""What a post carries so it can be found again, and the digest of what a message shows.

Every post the sender makes carries `metadata` naming its incident, the incident's UID and the
item; after an uncertain failure the sender looks the message up by it before posting again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from bot.domain.message import Rendered

METADATA_EVENT = "queuepilot_message"


def digest_of(rendered: Rendered) -> str:
    payload = json.dumps({"text": rendered.text, "blocks": rendered.blocks}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def metadata(incident_id: str, uid: str, item: str) -> dict[str, Any]:
    """What every post carries, so it can be found again after an uncertain failure."""
    return {
        "event_type": METADATA_EVENT,
        "event_payload": {"incident": incident_id, "uid": uid, "item": item},
    }


def carries(message: dict[str, Any], uid: str, item: str) -> bool:
    payload = (message.get("metadata") or {}).get("event_payload") or {}
    return payload.get("uid") == uid and payload.get("item") == item
