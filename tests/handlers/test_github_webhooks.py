"""What GitHub (or anyone else) sees when it POSTs to `/webhooks/github`, against a running bot
and a real redis-server: signed workflow_job deliveries recorded, as JSON and as the settings
page's default form encoding; everything else refused with its 4xx and a message, and nothing
recorded. No answer here is a 5xx but the one for Redis down (503, so GitHub's redelivery works).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.config import Settings
from bot.storage.keys import Keys
from bot.storage.workflow_jobs import KINDS_KEPT, SLOT_S
from tests.support.github_webhook import (
    FORM,
    JOB_ID,
    PATH,
    SECRET,
    as_form,
    delivery,
    headers_for,
)
from tests.support.mutations import JSON as ANY_JSON
from tests.support.mutations import SENDABLE_HEADER, mangled_bytes, mutated
from tests.support.running import RunningBot, Tracebacks, run_bot, served_bot
from tests.support.servers import RedisServer
from tests.support.slack import Slack


async def _never_500(response: httpx.Response) -> None:
    assert response.status_code < 500, f"{PATH} answered {response.status_code}: {response.text}"


@dataclass
class Github:
    running: RunningBot
    http: httpx.AsyncClient

    async def deliver(self, body: bytes | dict[str, Any], **headers: Any) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.http.post(PATH, content=raw, headers=headers_for(raw, **headers))

    async def live(self) -> list[dict[str, Any]]:
        return await self.running.bot.workflow_jobs.live()

    async def heard(self) -> dict[str, tuple[int, float]]:
        return await self.running.bot.workflow_jobs.heard(time.time())


@asynccontextmanager
async def github_for(settings: Settings) -> AsyncIterator[Github]:
    async with (
        run_bot(settings) as running,
        httpx.AsyncClient(
            base_url=running.url, timeout=10, event_hooks={"response": [_never_500]}
        ) as http,
    ):
        yield Github(running, http)


@pytest.fixture
async def github(settings_for: Callable[..., Settings]) -> AsyncIterator[Github]:
    async with github_for(settings_for(github_webhook_secret=SECRET)) as gh:
        yield gh


def refusal(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    data = response.json()
    assert data["status"] == "rejected", data
    return str(data["error"])


# --- deliveries recorded ------------------------------------------------------------------------


async def test_a_signed_json_delivery_is_recorded_and_live(github: Github) -> None:
    response = await github.deliver(delivery("queued"))
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "recorded"}
    [job] = await github.live()
    assert (job["id"], job["status"], job["labels"]) == (JOB_ID, "queued", ["linux.4xlarge"])
    assert job["repository"] == "pytorch/pytorch"


async def test_a_signed_form_delivery_is_recorded_and_moves_the_job_forward(
    github: Github,
) -> None:
    assert (await github.deliver(as_form(delivery("queued")), content_type=FORM)).json() == {
        "status": "recorded"
    }
    started = delivery("in_progress", started_at="2026-11-30T02:25:00Z", runner_name="i-0abc")
    response = await github.deliver(as_form(started), content_type=f"{FORM}; charset=utf-8")
    assert response.json() == {"status": "recorded"}
    [job] = await github.live()
    assert (job["status"], job["runner_name"]) == ("in_progress", "i-0abc")


async def test_the_same_delivery_twice_is_refused_the_second_time_and_kept_once(
    github: Github, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="handlers.webhooks")
    body = json.dumps(delivery("queued")).encode()
    first = await github.deliver(body, delivery_id="d-replayed")
    assert first.status_code == 200, first.text
    again = await github.deliver(body, delivery_id="d-replayed")
    error = refusal(again, 409)
    assert "d-replayed" in error and "already recorded" in error and "nothing changed" in error
    assert len(await github.live()) == 1
    logged = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert any("d-replayed" in line for line in logged), logged
    assert not any("linux.4xlarge" in line for line in logged), "the body is never logged"
    # Replayed under a fresh ID (the header is not signed): the same body, refused the same way.
    fresh = refusal(await github.deliver(body, delivery_id="d-fresh"), 409)
    assert "d-fresh" in fresh and "already recorded" in fresh
    assert len(await github.live()) == 1


async def test_a_state_older_than_the_day_kept_is_stale(github: Github) -> None:
    old = delivery("queued", created_at="2020-01-01T00:00:00Z", started_at="2020-01-01T00:00:00Z")
    assert "older than the day" in refusal(await github.deliver(old), 422)
    assert await github.live() == []


async def test_ping_is_answered_and_heard(github: Github) -> None:
    response = await github.deliver({"zen": "Design for failure.", "hook_id": 1}, event="ping")
    assert (response.status_code, response.json()) == (200, {"status": "pong"})
    assert "ping" in await github.heard()


async def test_another_event_is_ignored_and_heard(github: Github) -> None:
    response = await github.deliver({"ref": "refs/heads/main"}, event="push")
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == "ignored" and "only workflow_job" in data["reason"]
    assert "push" in await github.heard()
    assert await github.live() == []


async def test_a_signed_ping_replayed_under_fresh_ids_and_events_is_refused(
    github: Github,
) -> None:
    body = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    assert (await github.deliver(body, event="ping")).json() == {"status": "pong"}
    # Neither header is signed: the same body under another ID, or named another event, is a
    # replay, and adds no kind to what `check` says was heard.
    for event in ("ping", "invented_1", "invented_2"):
        assert "already recorded" in refusal(await github.deliver(body, event=event), 409)
    assert set(await github.heard()) == {"ping"}


async def test_the_kinds_heard_stay_at_their_cap_whatever_events_are_named(
    settings_for: Callable[..., Settings], redis: Redis
) -> None:
    settings = settings_for(github_webhook_secret=SECRET, github_webhook_rate=10_000)
    keys, sent = Keys(settings.redis_prefix), KINDS_KEPT + 20
    first_slot = int(time.time() // SLOT_S)
    async with github_for(settings) as github:
        for n in range(sent):
            response = await github.deliver({"n": n}, event=f"invented_{n}")
            assert response.json()["status"] == "ignored", response.text
    assert await redis.zcard(keys.github_events) == KINDS_KEPT
    counted = 0
    for slot in range(first_slot, int(time.time() // SLOT_S) + 1):
        kinds = await redis.hgetall(keys.github_events_slot(slot))
        assert len(kinds) <= KINDS_KEPT + 1, "the cap, and 'other'"
        counted += sum(int(n) for n in kinds.values())
    assert counted == sent, "every delivery counted, past the cap as 'other'"


async def test_an_action_queuepilot_does_not_read_is_ignored(github: Github) -> None:
    response = await github.deliver(delivery("archived"))
    assert response.status_code == 200
    assert response.json()["status"] == "ignored" and "archived" in response.json()["reason"]
    assert await github.live() == []


# --- refused, nothing recorded ------------------------------------------------------------------


async def test_with_no_secret_every_delivery_is_refused(
    settings_for: Callable[..., Settings],
) -> None:
    async with github_for(settings_for()) as github:
        error = refusal(await github.deliver(delivery("queued")), 401)
        assert "GITHUB_WEBHOOK_SECRET" in error
        assert await github.live() == []


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        ({"signed": None}, 401, "missing X-Hub-Signature-256"),
        ({"signed": "not-the-secret"}, 401, "signature mismatch"),
        ({"event": None}, 400, "missing X-GitHub-Event"),
        ({"content_type": "text/plain"}, 415, "got text/plain"),
        ({"content_type": None}, 415, "got none"),
    ],
    ids=["unsigned", "forged", "no-event", "text-plain", "no-content-type"],
)
async def test_refused_deliveries_record_nothing(
    github: Github, headers: dict[str, Any], status: int, said: str
) -> None:
    assert said in refusal(await github.deliver(delivery("queued"), **headers), status)
    assert await github.live() == []
    assert await github.heard() == {}


async def test_a_delivery_without_its_id_is_refused(github: Github) -> None:
    body = json.dumps(delivery("queued")).encode()
    sent = headers_for(body)
    del sent["X-GitHub-Delivery"]
    response = await github.http.post(PATH, content=body, headers=sent)
    assert "X-GitHub-Delivery" in refusal(response, 400)
    assert await github.live() == []


async def test_a_body_over_the_limit_is_refused(settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(github_webhook_secret=SECRET, alert_max_body_bytes=4096)
    async with github_for(settings) as github:
        big = delivery("queued", name="x" * 5000)
        assert "4096-byte limit" in refusal(await github.deliver(big), 413)
        assert await github.live() == []


@pytest.mark.parametrize(
    "body",
    [b"{", b"[]", json.dumps({"action": "queued"}).encode(), b"payload=1"],
    ids=["not-json", "a-list", "no-job", "form-as-json"],
)
async def test_a_signed_body_github_never_sends_is_refused(github: Github, body: bytes) -> None:
    assert refusal(await github.deliver(body), 400)
    assert await github.live() == []


async def test_redis_down_is_a_503_for_github_to_redeliver(
    settings_for: Callable[..., Settings],
) -> None:
    own = RedisServer()
    own.start()
    try:
        settings = settings_for(github_webhook_secret=SECRET, redis_url=own.url)
        async with run_bot(settings) as running:
            body = json.dumps(delivery("queued")).encode()
            own.stop()
            response = await running.http.post(PATH, content=body, headers=headers_for(body))
            assert "redeliver" in refusal(response, 503)
    finally:
        own.stop()


# --- hostile requests ---------------------------------------------------------------------------

HOSTILE = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def served(redis_server: RedisServer, _slack_session: Slack) -> Any:
    with served_bot(redis_server, _slack_session, "ghfuzz", github_webhook_secret=SECRET) as got:
        yield got


@st.composite
def github_request(draw: st.DrawFn) -> tuple[bytes, dict[str, str], bool]:
    """A body (GitHub's delivery mutated in shape or bytes, or any JSON), as JSON or a form,
    with headers signed, forged or garbled; and whether it is correctly signed."""
    shape = draw(st.sampled_from(["as is", "mutated", "bytes", "json"]))
    payload: Any = delivery(draw(st.sampled_from(["queued", "in_progress", "completed"])))
    if shape == "mutated":
        payload = draw(mutated(payload))
    elif shape == "json":
        payload = draw(ANY_JSON)
    form = draw(st.booleans())
    body = as_form(payload) if form else json.dumps(payload).encode()
    if shape == "bytes":
        body = draw(mangled_bytes(body))
    signing = draw(st.sampled_from(["signed", "forged", "garbled", "none"]))
    headers = headers_for(
        body,
        event=draw(st.sampled_from(["workflow_job", "workflow_job", "ping", "push", None])),
        content_type=draw(st.sampled_from(["application/json", FORM, "text/plain", None]))
        if draw(st.booleans())
        else (FORM if form else "application/json"),
        signed=SECRET if signing == "signed" else ("forged" if signing == "forged" else None),
    )
    if signing == "garbled":
        headers["X-Hub-Signature-256"] = draw(SENDABLE_HEADER)
    if draw(st.booleans()):
        headers["X-GitHub-Delivery"] = draw(SENDABLE_HEADER)
    return body, headers, signing == "signed"


@HOSTILE
@given(request=github_request())
def test_any_request_is_a_2xx_only_when_signed_and_never_a_5xx(
    served: tuple[httpx.Client, Tracebacks], request: tuple[bytes, dict[str, str], bool]
) -> None:
    http, tracebacks = served
    body, headers, signed = request
    response = http.post(PATH, content=body, headers=headers)
    assert response.status_code < 500, (response.status_code, response.text, body[:200])
    if response.status_code < 300:
        assert signed, (response.text, headers)
    else:
        assert response.json()["error"], "a 4xx says what is wrong"
    assert tracebacks.records == []
