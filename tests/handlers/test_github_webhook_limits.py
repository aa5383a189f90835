"""`/webhooks/github`'s limits as a sender meets them, served over HTTP on a real redis-server:
past GITHUB_WEBHOOK_RATE a 429 with Retry-After, before the body is read and with nothing
written to Redis, and taken again once the interval has passed (on a clock the test moves);
past GITHUB_WEBHOOK_CONCURRENCY a 503 at once while the deliveries in progress are held
mid-body; and the refusals counted each, logged once a minute, never a line each."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn
from redis.asyncio import Redis
from starlette.applications import Starlette

from bot.config import Settings
from bot.pacing import Pacing
from bot.storage.keys import Keys
from bot.storage.workflow_jobs import WorkflowJobs
from bot.telemetry import Telemetry
from handlers.webhooks import GithubWebhooks, WebhookRoutes
from sandbox.serve import StoppingServer
from tests.support.github_webhook import PATH, SECRET, delivery, headers_for, signature
from tests.support.running import eventually
from tests.support.servers import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def served(github: GithubWebhooks) -> AsyncIterator[httpx.AsyncClient]:
    """The endpoint as the bot routes it, under uvicorn on a loopback port."""
    app = WebhookRoutes(Starlette(), {PATH: github.answer})
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    server = StoppingServer(config)
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="the endpoint served")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            yield http
    finally:
        server.stop_soon()
        await asyncio.wait_for(task, timeout=15)


def endpoint(
    settings: Settings,
    redis: Redis,
    telemetry: Telemetry,
    clock: Clock | None = None,
    **more: float,
) -> GithubWebhooks:
    jobs = WorkflowJobs(redis, Keys(settings.redis_prefix))
    pacing = Pacing(clock) if clock is not None else None
    return GithubWebhooks(jobs, telemetry, config=settings, pacing=pacing, **more)


def body_of(job_id: int) -> bytes:
    return json.dumps(delivery("queued", job_id=job_id)).encode()


async def post(http: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await http.post(PATH, content=body, headers=headers_for(body))


def refused(telemetry: Telemetry, reason: str) -> float:
    labels = {"source": "github", "outcome": reason}
    return telemetry.registry.get_sample_value("queuepilot_notifications_total", labels) or 0.0


async def answer_to_headers_alone(http: httpx.AsyncClient, body: bytes) -> tuple[int, str]:
    """(status, Retry-After) of a delivery whose body is never sent: only an endpoint that
    answers before reading the body can answer it."""
    url = http.base_url
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        sent = {**headers_for(body), "Content-Length": str(len(body)), "Host": url.host}
        head = "".join(f"{name}: {value}\r\n" for name, value in sent.items())
        writer.write(f"POST {PATH} HTTP/1.1\r\n{head}\r\n".encode())
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    finally:
        writer.close()
    status_line, *lines = answer.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines if ": " in line)
    return int(status_line.split()[1]), headers.get("retry-after", "")


async def test_over_the_rate_is_a_429_with_retry_after_writing_nothing_then_taken_again(
    settings_for: Callable[..., Settings], redis: Redis
) -> None:
    settings = settings_for(github_webhook_secret=SECRET, github_webhook_rate=2)
    telemetry, clock = Telemetry(), Clock()
    keys = Keys(settings.redis_prefix)
    async with served(endpoint(settings, redis, telemetry, clock)) as http:
        for job_id in (1, 2):  # a second's worth at once
            assert (await post(http, body_of(job_id))).json() == {"status": "recorded"}
        written = await redis.dbsize()

        over = await post(http, body_of(3))
        assert over.status_code == 429, over.text
        assert over.headers["retry-after"] == "1"
        error = over.json()["error"]
        assert over.json() == {"status": "rejected", "error": error}
        assert "GITHUB_WEBHOOK_RATE" in error and "2 deliveries a second" in error
        assert await answer_to_headers_alone(http, body_of(4)) == (429, "1")
        assert await redis.dbsize() == written
        assert not await redis.exists(keys.github_delivery(signature(body_of(3))))
        assert refused(telemetry, "rate_limited") == 2

        clock.now += 0.5  # an interval on: one more
        assert (await post(http, body_of(3))).json() == {"status": "recorded"}
        assert (await post(http, body_of(5))).status_code == 429
    live = await WorkflowJobs(redis, keys).live()
    assert sorted(job["id"] for job in live) == [1, 2, 3]


async def test_past_the_concurrency_a_delivery_is_refused_at_once_while_others_are_held(
    settings_for: Callable[..., Settings], redis: Redis
) -> None:
    settings = settings_for(
        github_webhook_secret=SECRET, github_webhook_rate=1000, github_webhook_concurrency=2
    )
    release = asyncio.Event()

    async def held(body: bytes) -> AsyncIterator[bytes]:
        yield body[:100]
        await release.wait()
        yield body[100:]

    async with served(endpoint(settings, redis, Telemetry())) as http:
        bodies = [body_of(1), body_of(2)]
        holding = [
            asyncio.create_task(http.post(PATH, content=held(body), headers=headers_for(body)))
            for body in bodies
        ]

        async def busy() -> httpx.Response | None:
            # Unsigned: refused 401 until both held deliveries are in progress, recording nothing.
            probe = await http.post(PATH, content=b"{}", headers=headers_for(b"{}", signed="x"))
            return probe if probe.status_code == 503 else None

        answer = await eventually(busy, what="a delivery refused while two are held")
        assert not any(task.done() for task in holding), "answered without waiting for them"
        assert answer.headers["retry-after"] == "1"
        assert answer.json()["status"] == "rejected"
        assert "GITHUB_WEBHOOK_CONCURRENCY: 2 deliveries" in answer.json()["error"]

        release.set()
        for task in holding:
            assert (await task).json() == {"status": "recorded"}
        assert (await post(http, body_of(3))).json() == {"status": "recorded"}


async def test_refusals_over_the_limits_are_counted_each_and_logged_once_a_minute(
    settings_for: Callable[..., Settings], redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = settings_for(github_webhook_secret=SECRET, github_webhook_rate=1)
    telemetry, clock = Telemetry(), Clock()
    async with served(endpoint(settings, redis, telemetry, clock)) as http:
        assert (await post(http, body_of(1))).status_code == 200
        for job_id in range(2, 42):
            assert (await post(http, body_of(job_id))).status_code == 429
        clock.now += 60
        assert (await post(http, body_of(50))).status_code == 200
        assert (await post(http, body_of(51))).status_code == 429
    assert refused(telemetry, "rate_limited") == 41
    said = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(said) == 2, said
    assert "deliveries refused in the last 0 s: 1 over GITHUB_WEBHOOK_RATE" in said[0]
    assert "deliveries refused in the last 60 s: 40 over GITHUB_WEBHOOK_RATE" in said[1]


async def test_a_body_that_does_not_come_gives_its_place_back_and_a_large_one_is_refused(
    settings_for: Callable[..., Settings], redis: Redis
) -> None:
    """A sender that holds its body past the deadline is answered 408 and its place is free
    again; a body past GitHub's own cap (a workflow_job delivery is tens of KB) is refused 413
    unread, whatever ALERT_MAX_BODY_BYTES allows."""
    settings = settings_for(
        github_webhook_secret=SECRET, github_webhook_rate=1000, github_webhook_concurrency=1
    )
    async with served(endpoint(settings, redis, Telemetry(), body_wait_s=0.5)) as http:
        body = body_of(1)
        url = http.base_url
        reader, writer = await asyncio.open_connection(url.host, url.port)
        try:
            sent = {**headers_for(body), "Content-Length": str(len(body)), "Host": url.host}
            head = "".join(f"{name}: {value}\r\n" for name, value in sent.items())
            writer.write(f"POST {PATH} HTTP/1.1\r\n{head}\r\n".encode() + body[:100])
            answer = b""
            while not answer.endswith(b"}"):  # the refusal's JSON, however the writes split
                chunk = await asyncio.wait_for(reader.read(4096), timeout=10)
                assert chunk, f"closed without an answer: {answer!r}"
                answer += chunk
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"the body did not arrive within 0.5 s" in answer
        assert (await post(http, body_of(2))).json() == {"status": "recorded"}

        large = json.dumps({**delivery("queued", job_id=3), "padding": "x" * 300_000}).encode()
        assert settings.alert_max_body_bytes > len(large)
        refused_large = await post(http, large)
        assert refused_large.status_code == 413, refused_large.text
        assert "262144-byte limit" in refused_large.json()["error"]
