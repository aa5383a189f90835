"""`queuepilot check`'s line for GitHub's webhook: the deliveries a running bot answered in the
last hour, by kind, as the operator reads them; a warning when none came or when GitHub sends
more than queuepilot reads; no line without GITHUB_WEBHOOK_SECRET."""

from __future__ import annotations

import json
from collections.abc import Callable

from bot.checks import Finding, Verdict
from bot.checks.github_webhook import SUBJECT, findings
from bot.checks.run import probe_all
from bot.config import Settings
from tests.support.github_webhook import PATH, SECRET, delivery, headers_for
from tests.support.running import run_bot

NOW = 1_764_300_000.0


def of(found: list[Finding]) -> list[tuple[Verdict, str]]:
    return [(f.verdict, f.detail) for f in found if f.subject == SUBJECT]


async def test_the_deliveries_a_bot_answered_are_said_by_kind_with_other_events_warned(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(github_webhook_secret=SECRET)
    async with run_bot(settings) as running:
        sent = [
            ("workflow_job", delivery("queued", job_id=1)),
            ("workflow_job", delivery("queued", job_id=2)),
            ("ping", {"zen": "Keep it logically awesome."}),
            ("push", {"ref": "refs/heads/main"}),
        ]
        for event, payload in sent:
            body = json.dumps(payload).encode()
            response = await running.http.post(
                PATH, content=body, headers=headers_for(body, event=event)
            )
            assert response.status_code == 200, response.text
        [(said, heard), (warned, more)] = of(await probe_all(settings, {}))
    assert said is Verdict.OK
    assert heard.startswith("in the last hour: ping 1 (last ")
    assert "push 1 (last " in heard and "workflow_job.queued 2 (last " in heard
    assert warned is Verdict.WARN
    assert more.startswith("subscribed to more than queuepilot reads: push")


async def test_nothing_heard_asks_where_the_webhook_is(
    settings_for: Callable[..., Settings],
) -> None:
    [finding] = [
        f
        for f in await probe_all(settings_for(github_webhook_secret=SECRET), {})
        if f.subject == SUBJECT
    ]
    assert finding.verdict is Verdict.WARN
    assert finding.detail == (
        "no workflow_job delivery in the last hour: is the webhook on the org or repo, sending "
        "Workflow jobs, to /webhooks/github?"
    )
    assert "payload URL https://<host>/webhooks/github" in finding.fix
    assert "Workflow jobs" in finding.fix


async def test_no_line_without_the_secret(settings_for: Callable[..., Settings]) -> None:
    assert of(await probe_all(settings_for(), {})) == []


def test_only_pings_still_warn_that_no_job_came() -> None:
    found = findings({"ping": (1, NOW - 90)}, NOW)
    assert [(f.verdict, f.detail) for f in found] == [
        (Verdict.OK, "in the last hour: ping 1 (last 1 min ago)"),
        (Verdict.WARN, found[1].detail),
    ]
    assert found[1].detail.startswith("no workflow_job delivery in the last hour")


def test_workflow_jobs_alone_are_one_ok_line() -> None:
    heard = {"workflow_job.queued": (120, NOW - 5), "workflow_job.completed": (80, NOW - 30)}
    assert of(findings(heard, NOW)) == [
        (
            Verdict.OK,
            "in the last hour: workflow_job.completed 80 (last 30 s ago), "
            "workflow_job.queued 120 (last 5 s ago)",
        )
    ]
