"""GitHub's workflow_job webhook, as the deliveries recorded in Redis tell it: which kinds came in
the last hour and when the last did. Nothing heard is a warning, not a failure: a quiet
repository sends nothing, and readings still come from polling."""

from __future__ import annotations

import time
from datetime import timedelta

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.checks import Finding, ok, warn
from bot.config import Settings
from bot.domain.queue_cost.workflow_jobs import ENDPOINT, PING, is_job_kind
from bot.domain.units import duration
from bot.storage.keys import Keys
from bot.storage.workflow_jobs import WorkflowJobs

SUBJECT = "github webhook"
SET_UP = (
    f"in the org's or repository's Settings > Webhooks: payload URL https://<host>{ENDPOINT}, "
    "the secret of GITHUB_WEBHOOK_SECRET, individual events: Workflow jobs"
)


async def probe(settings: Settings, redis: Redis) -> list[Finding]:
    now = time.time()
    try:
        heard = await WorkflowJobs(redis, Keys(settings.redis_prefix)).heard(now)
    except RedisError as exc:
        return [warn(SUBJECT, f"cannot read the deliveries heard: {exc}")]
    return findings(heard, now)


def findings(heard: dict[str, tuple[int, float]], now: float) -> list[Finding]:
    """What `heard` (each kind: how many in the last hour, when the last came) says."""
    found = []
    if heard:
        kinds = ", ".join(
            f"{kind} {count} (last {duration(timedelta(seconds=now - last))} ago)"
            for kind, (count, last) in sorted(heard.items())
        )
        found.append(ok(SUBJECT, f"in the last hour: {kinds}"))
    if not any(is_job_kind(kind) for kind in heard):
        said = "no workflow_job delivery in the last hour: is the webhook on the org or repo, "
        found.append(warn(SUBJECT, f"{said}sending Workflow jobs, to {ENDPOINT}?", SET_UP))
    others = sorted(kind for kind in heard if kind != PING and not is_job_kind(kind))
    if others:
        said = f"subscribed to more than queuepilot reads: {', '.join(others)} (only "
        said += "workflow_job is read; the rest is answered and ignored)"
        fix = "in the webhook's settings, let it send individual events: Workflow jobs only"
        found.append(warn(SUBJECT, said, fix))
    return found
