"""The `sqs` scaler: PyTorch-style scale-up Lambdas (terraform-aws-github-runner) read
`workflow_job` "queued" messages, one runner each, as operators send them by hand; `+N` sends N.
The Lambda still honours each type's `max_available`."""

from __future__ import annotations

import json
import uuid
from typing import Any

from bot.backends.errors import BackendError
from bot.backends.http import Counted, uncounted
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult
from bot.backends.scale.aws import call, client
from bot.config import Settings

BATCH = 10  # SendMessageBatch takes at most ten entries
MAX_BODY = 2048  # the queue's maximum message size in terraform-aws-github-runner
CALLBACK = "MANUAL SCALE EVENT"  # what the manual helper sends; scale-up never reads it


class SqsScaler(Scaler):
    name = "the scale-up queue"
    cannot_undo = (
        "each message asks the scale-up Lambda for one runner, and the Lambda scales idle "
        "runners down on its own"
    )

    def __init__(
        self, config: Settings, sqs: Any | None = None, *, counted: Counted = uncounted
    ) -> None:
        self._counted = counted
        self._url = config.scaler_sqs_queue_url or ""
        self._config = config
        self._sqs = sqs

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        sqs = self._sqs = self._sqs or client("sqs", self._config, region=queue_region(self._url))
        bodies = [self._body(scale.target.target) for _ in range(scale.delta)]
        sent, refused = 0, []
        for start in range(0, len(bodies), BATCH):
            batch = bodies[start : start + BATCH]
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(batch)]
            answer = await call(
                "SQS", self._counted, sqs.send_message_batch, QueueUrl=self._url, Entries=entries
            )
            sent += len(answer.get("Successful") or [])
            refused += [str(f.get("Code") or "error") for f in answer.get("Failed") or []]
        if sent == 0:
            raise BackendError(f"SQS refused every message ({', '.join(refused)})", retryable=True)
        queue = self._url.rstrip("/").rpartition("/")[2]
        detail = f"{sent} scale-up message{'s' if sent != 1 else ''} sent to {queue}"
        if refused:
            detail += f"; {len(refused)} refused ({refused[0]})"
        return ScaleResult(detail)

    def _body(self, label: str) -> str:
        owner, _, repository = self._config.scaler_sqs_repository.partition("/")
        installation: int | str = self._config.scaler_sqs_installation_id
        if isinstance(installation, str) and installation.isdigit():
            installation = int(installation)
        body = json.dumps(
            {
                "id": str(uuid.uuid4()),
                "eventType": "workflow_job",
                "repositoryName": repository,
                "repositoryOwner": owner,
                "installationId": installation or 0,
                "runnerLabels": [label],
                "callbackUrl": CALLBACK,
            },
            separators=(",", ":"),
        )
        if len(body.encode()) > MAX_BODY:
            raise BackendError(f"a scale-up message would pass {MAX_BODY} bytes", retryable=False)
        return body


def queue_region(url: str) -> str | None:
    """`https://sqs.us-east-1.amazonaws.com/…` -> us-east-1."""
    host = url.split("//", 1)[-1].split("/", 1)[0]
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "sqs" else None
