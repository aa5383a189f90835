"""Running bots: uvicorn on a loopback port with the bot's lifespan, the webhook's side of it, and
waiting for what the bot does in the background."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import uvicorn
from redis.exceptions import RedisError

from bot.app import Bot, build_app, build_bot
from bot.config import Settings, load_settings
from bot.domain.reading.judgement import DIRECTION_READINGS
from sandbox.serve import StoppingServer, serve_in_thread
from tests.support.payloads import fixture_json
from tests.support.servers import RedisServer, free_port
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack

WEBHOOK_TOKEN = "test-webhook-token"


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
    server = StoppingServer(config)
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="bot started")
    # State changes are the leader's alone: a test goes on once some replica leads (this one,
    # unless another already did), so its first commit is not refused for want of a leader.
    await eventually(lambda: _someone_leads(bot), what="a replica leading")
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        try:
            yield RunningBot(bot, url, http)
        finally:
            server.stop_soon()
            await asyncio.wait_for(task, timeout=15)


async def _someone_leads(bot: Bot) -> bool:
    try:
        return (await bot.leadership.role())["leader"] is not None
    except RedisError:
        return True  # Redis is away: there is no lead to wait for


async def leader_of(*running: RunningBot) -> RunningBot:
    """The one of these replicas that leads: the one whose commits and jobs take effect."""
    return await eventually(
        lambda: next((r for r in running if r.bot.leadership.fence.held), None),
        what="the leader among the replicas",
    )


async def read_after(running: RunningBot, moment: datetime) -> bool:
    """Whether the bot's latest fleet reading was taken after `moment`: readings come every
    METRICS_INTERVAL_SECONDS, so a test counts them by time."""
    reading = await running.bot.readings.stored()
    return reading is not None and reading.tried_at > moment


async def direction_known(running: RunningBot) -> None:
    """Until the bot has read the fleet often enough to tell the queue's direction (three
    readings): an alert fired then opens on advice that holds while the queue does, as on a
    bot that has long watched its fleet. Fired earlier, its first status would carry advice
    with no direction yet, and the direction's arrival is news a status waits a minute for."""

    async def known() -> bool:
        readings = running.bot.readings
        return readings is not None and len(await readings.history()) >= DIRECTION_READINGS

    await eventually(known, what="three readings of the fleet")


async def eventually(
    check: Callable[[], Any] | Callable[[], Awaitable[Any]],
    *,
    timeout: float = 30.0,  # noqa: ASYNC109 - a polling deadline, not a cancellation scope
    what: str = "condition",
) -> Any:
    """Poll until `check` returns something truthy; fail with `what` after `timeout`. The
    default is generous: a wait ends as soon as its condition holds, and the suite must pass on
    a 2-core machine with other work beside it, where a click's effect can take several seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    pause = 0.02
    while time.monotonic() < deadline:
        try:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
        except AssertionError as exc:
            last_error = exc
        await asyncio.sleep(pause)
        # A check (reading a thread off the emulator, a stored reading) shares the interpreter
        # with the bot it waits on: polled at a slowing pace, it leaves a loaded bot the CPU.
        pause = min(pause * 1.5, 0.25)
    raise AssertionError(f"timed out waiting for {what}") from last_error


async def open_incident(running: RunningBot, slack: Slack) -> Any:
    await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
    return await recorded_root(running, slack)


async def recorded_root(running: RunningBot, slack: Slack, *, last: bool = False) -> Any:
    """The channel's first (or `last`) root once the bot has recorded it: Slack shows a post
    before the sender records its answer, and a click naming only its message (a select, whose
    value is no incident's) finds the incident through that record."""
    roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    root = roots[-1] if last else roots[0]
    await eventually(
        lambda: running.bot.core.incident_of_message(CHANNEL, root.ts), what="the root recorded"
    )
    return root


class Tracebacks(logging.Handler):
    """Collects every log record that carries a traceback, from any thread of the process."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.records.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def served_bot(
    redis: RedisServer, slack: Slack, prefix: str, **overrides: Any
) -> Iterator[tuple[httpx.Client, Tracebacks]]:
    """A bot over HTTP on the session's redis-server and emulator, with every traceback it logs
    collected; it must still serve once the caller is done with it. `overrides`: more settings."""
    settings_ = load_settings(
        _env_file=None,
        slack_app_token=None,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.api_url,
        slack_channel=CHANNEL,
        redis_url=redis.url,
        redis_prefix=prefix,
        alert_webhook_token=WEBHOOK_TOKEN,
        slack_post_interval_ms=0,
        # Its periodic jobs idle (every five minutes): it serves requests for property tests,
        # and APScheduler's jitter draws from the `random` module, which Hypothesis takes for a
        # strategy using it (HypothesisDeprecationWarning) when it lands mid-draw.
        status_tick_seconds=300,
        **overrides,
    )
    tracebacks = Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    try:
        with (
            serve_in_thread(build_app(build_bot(settings_)), port=free_port()) as served,
            httpx.Client(base_url=served.url, timeout=10) as http,
        ):
            yield http, tracebacks
            assert http.get("/healthz").status_code == 200, "still serving after all of it"
    finally:
        logging.getLogger().removeHandler(tracebacks)
