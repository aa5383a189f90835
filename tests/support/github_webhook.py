"""GitHub's workflow_job deliveries as GitHub sends them: the fixture's body with another action
or job, signed with the webhook's secret, with GitHub's headers (each can be left out)."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import uuid
from typing import Any
from urllib.parse import urlencode

from tests.support.payloads import fixture_json

SECRET = "github-webhook-secret"
PATH = "/webhooks/github"
QUEUED = fixture_json("backends/github/workflow_job-queued.json")
JOB_ID = QUEUED["workflow_job"]["id"]
FORM = "application/x-www-form-urlencoded"


def signature(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery(action: str = "queued", job_id: int = JOB_ID, **job: Any) -> dict[str, Any]:
    payload = copy.deepcopy(QUEUED)
    payload["action"] = action
    payload["workflow_job"].update({"id": job_id, "status": action, **job})
    return payload


def headers_for(
    body: bytes,
    *,
    event: str | None = "workflow_job",
    delivery_id: str | None = None,
    content_type: str | None = "application/json",
    signed: str | None = SECRET,
) -> dict[str, str]:
    sent = {"X-GitHub-Delivery": delivery_id or str(uuid.uuid4())}
    if event is not None:
        sent["X-GitHub-Event"] = event
    if content_type is not None:
        sent["Content-Type"] = content_type
    if signed is not None:
        sent["X-Hub-Signature-256"] = signature(body, signed)
    return sent


def as_form(payload: object) -> bytes:
    """GitHub's form encoding, its settings page's default: the JSON in the `payload` field."""
    return urlencode({"payload": json.dumps(payload)}).encode()
