"""GitHub's `workflow_job` webhook deliveries, read into the job shape of GitHub's REST API, so a
job heard of and a job listed are one thing to every reader. Deliveries may arrive out of order,
so a job's state only moves forward (`RANK`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from bot.domain.alerting.alerts import PayloadError, parse_json_body, time_of

EVENT = "workflow_job"
PING = "ping"
ENDPOINT = "/webhooks/github"  # where GitHub delivers them, on every replica
# The states a job enters, in order (`waiting`: for an environment's approval); one of the same
# rank replaces it.
RANK = {"waiting": 0, "queued": 1, "in_progress": 2, "completed": 3}
# The job's fields kept, as GitHub's REST API names them; `repository` is the full name.
KEPT = (
    "id",
    "run_id",
    "run_attempt",
    "status",
    "conclusion",
    "labels",
    "runner_id",
    "runner_name",
    "created_at",
    "started_at",
    "completed_at",
    "name",
    "html_url",
    "run_url",
    "workflow_name",
    "head_branch",
)
TEXT_CAP = 500  # a job's name or branch longer than this is cut: nothing we show is longer


@dataclass(frozen=True)
class JobDelivery:
    """One delivery's job: its state (`action`), its REST-shaped fields, and when it entered it."""

    action: str
    job: dict[str, Any]
    at: datetime

    @property
    def id(self) -> int:
        return int(self.job["id"])

    @property
    def rank(self) -> int:
        return RANK[self.action]


def payload_of(body: bytes, content_type: str) -> object:
    """The delivery's JSON: GitHub sends it as the body (`application/json`) or, the default for
    a webhook made in its settings page, as the form field `payload`."""
    if content_type == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("ascii"), strict_parsing=True, max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            raise PayloadError("form body is not URL-encoded ASCII") from None
        payload = fields.get("payload", [])
        if len(payload) != 1:
            raise PayloadError("form body has no single `payload` field")
        return parse_json_body(payload[0].encode("utf-8"))
    return parse_json_body(body)


def job_delivery(payload: object) -> JobDelivery | str:
    """A `workflow_job` delivery's job, or why it is not one queuepilot reads (an action GitHub
    may add later is ignored, not refused). Raises PayloadError on a body GitHub never sends."""
    if not isinstance(payload, dict):
        raise PayloadError("a workflow_job delivery is a JSON object")
    action = payload.get("action")
    if not isinstance(action, str):
        raise PayloadError("`action` is missing or not a string")
    job = payload.get("workflow_job")
    if not isinstance(job, dict):
        raise PayloadError("`workflow_job` is missing or not an object")
    if action not in RANK:
        return f"action {action[:40]!r} is not a job state queuepilot reads"
    job_id = job.get("id")
    if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id <= 0:
        raise PayloadError("`workflow_job.id` is not a positive integer")
    labels = job.get("labels")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise PayloadError("`workflow_job.labels` is not a list of strings")
    created = time_of(job.get("created_at")) or time_of(job.get("started_at"))
    if created is None:
        raise PayloadError("`workflow_job.created_at` is not a time")
    entered_at = {"in_progress": "started_at", "completed": "completed_at"}.get(action)
    entered = time_of(job.get(entered_at)) if entered_at else None
    kept: dict[str, Any] = {
        name: value[:TEXT_CAP] if isinstance(value, str) else value
        for name in KEPT
        if isinstance(value := job.get(name), str | int | None)
    }
    kept["labels"] = [label[:TEXT_CAP] for label in labels[:20]]
    # A job `waiting` for an environment's approval waits for a person, not for a runner.
    kept["status"] = action
    kept["created_at"] = kept.get("created_at") or created.isoformat()
    repository = payload.get("repository")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    kept["repository"] = full_name[:TEXT_CAP] if isinstance(full_name, str) else ""
    return JobDelivery(action, kept, max(entered or created, created))


def listed_job(job: object, repository: str) -> JobDelivery | None:
    """A job as GitHub's REST API lists it, read as the delivery of its present state would be, so
    a listing fixes what a missed delivery left; None for one queuepilot cannot read."""
    if not isinstance(job, dict):
        return None
    repo = {"full_name": repository}
    try:
        found = job_delivery({"action": job.get("status"), "workflow_job": job, "repository": repo})
    except PayloadError:
        return None
    return found if isinstance(found, JobDelivery) else None


def kind_of(payload: object) -> str:
    """A workflow_job delivery's kind as heard and counted: `workflow_job.<action>`."""
    action = payload.get("action") if isinstance(payload, dict) else None
    return f"{EVENT}.{action}"


def is_job_kind(kind: str) -> bool:
    """Whether a kind heard is a workflow_job delivery's (not a ping, not another event)."""
    return kind.startswith(f"{EVENT}.")
