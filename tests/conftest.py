"""Shared fixtures: a real redis-server, the Slack emulator over HTTP, and running bots."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from bot.app import Bot, build_app, build_bot
from bot.config import Settings, load_settings
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.servers import RedisServer, free_port

FIXTURES = Path(__file__).parent / "fixtures"
BOT_TOKEN = "xoxb-queuepilot-test"
SIGNING_SECRET = "test-signing-secret"
CHANNEL = "C0QUEUE"
WEBHOOK_TOKEN = "test-webhook-token"


def fixture_json(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flush()
    return redis_server.url


@dataclass
class Slack:
    """The emulator and where it listens."""

    emulator: SlackEmulator
    server: RunningServer

    @property
    def api_url(self) -> str:
        return f"{self.server.url}/api/"


@pytest.fixture(scope="session")
def _slack_session() -> Iterator[Slack]:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,))
    server = serve_in_thread(emulator.app)
    yield Slack(emulator, server)
    server.stop()


@pytest.fixture
def slack(_slack_session: Slack) -> Slack:
    _slack_session.emulator.reset()
    return _slack_session


@pytest.fixture
def settings_for(redis_url: str, slack: Slack) -> Callable[..., Settings]:
    """Settings for a bot wired to this test's Redis and the emulator, fast cadences."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            # Explicit, so nothing in the developer's environment (a SLACK_APP_TOKEN would mean
            # Socket Mode against real Slack) reaches a test bot.
            "slack_app_token": None,
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": SIGNING_SECRET,
            "slack_api_url": slack.api_url,
            "slack_channel": CHANNEL,
            "redis_url": redis_url,
            "alert_webhook_token": WEBHOOK_TOKEN,
            "slack_post_interval_ms": 20,
            "slack_update_interval_ms": 20,
            "status_tick_seconds": 0.1,
            "intake_reclaim_idle_ms": 500,
        }
        values.update(overrides)
        return load_settings(_env_file=None, **values)

    return make


@dataclass
class RunningBot:
    bot: Bot
    url: str
    http: httpx.AsyncClient

    async def send(
        self, source: str, payload: dict[str, Any] | bytes, *, token: str | None = WEBHOOK_TOKEN
    ) -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return await self.http.post(f"/alerts/{source}", content=body, headers=headers)


@asynccontextmanager
async def run_bot(settings: Settings, *, port: int | None = None) -> AsyncIterator[RunningBot]:
    """A real bot: uvicorn on a loopback port, with its lifespan (consumer, scheduler)."""
    bot = build_bot(settings)
    port = port or free_port()
    config = uvicorn.Config(
        build_app(bot), host="127.0.0.1", port=port, lifespan="on", log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="bot started")
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        try:
            yield RunningBot(bot, url, http)
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, timeout=15)


@pytest.fixture
async def running_bot(settings_for: Callable[..., Settings]) -> AsyncIterator[RunningBot]:
    async with run_bot(settings_for()) as running:
        yield running


async def eventually(
    check: Callable[[], Any] | Callable[[], Awaitable[Any]],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - a polling deadline, not a cancellation scope
    what: str = "condition",
) -> Any:
    """Poll until `check` returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
        except AssertionError as exc:
            last_error = exc
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}") from last_error
