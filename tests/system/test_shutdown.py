"""A replica stopped with SIGTERM, as Kubernetes stops a pod (after its preStop pause): it takes
no new connection, answers the requests it is serving, and then stops its work in order; a
client that never finishes its request holds it up for SHUTDOWN_GRACE_SECONDS at most. What it
logs on the way, from its start, is JSON.

Requests are written by hand over a socket so that one is, for certain, half-sent when the signal
arrives."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.processes import BotProcess
from tests.support.running import WEBHOOK_TOKEN, eventually
from tests.support.slack import CHANNEL, Slack
from tests.system.test_faults import group, incidents_shown

DRAINING = "Waiting for connections to close"  # uvicorn, once it waits for requests in flight


@asynccontextmanager
async def half_sent(
    bot: BotProcess, payload: dict[str, object]
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]]:
    """A webhook whose headers and all but the last bytes of its body are sent; the rest is
    the caller's to send (or not)."""
    body = json.dumps(payload).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", bot.port)
    head = (
        f"POST /alerts/grafana HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {WEBHOOK_TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body[:-10])
    await writer.drain()
    client_port = writer.get_extra_info("sockname")[1]
    await eventually(
        lambda: server_read_all(bot.port, client_port), what="the server reading what was sent"
    )
    try:
        yield reader, writer, body[-10:]
    finally:
        writer.close()


def server_read_all(server_port: int, client_port: int) -> bool:
    """Whether the server's end of the loopback connection from `client_port` has taken in all
    the client sent (its receive queue empty, in the kernel's /proc/net/tcp): a loaded server
    may not have accepted it yet, and a SIGTERM then finds no request in flight."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
        ports = int(local.split(":")[1], 16), int(remote.split(":")[1], 16)
        if ports == (server_port, client_port) and state == "01":  # ESTABLISHED
            return int(queues.split(":")[1], 16) == 0
    return False


def logged(bot: BotProcess) -> list[dict[str, str]]:
    """Every whole line the process wrote, each a JSON object (or the test fails)."""
    output = bot.output()
    whole = output if output.endswith("\n") else output.rpartition("\n")[0]
    return [json.loads(line) for line in whole.splitlines()]


async def stopping(bot: BotProcess) -> None:
    bot.signal(signal.SIGTERM)
    await eventually(lambda: DRAINING in bot.output(), what="the drain", timeout=15)


async def refused(bot: BotProcess) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            await http.get(f"{bot.url}/healthz")
    except httpx.ConnectError:
        return True
    return False


@pytest.mark.slow
async def test_a_notification_in_flight_at_sigterm_is_answered_and_not_lost(
    redis_url: str, slack: Slack, tmp_path: Path
) -> None:
    # Two replicas, as a Deployment runs them: the other one carries on.
    bot = BotProcess(slack, redis_url, tmp_path, "stopping")
    other = BotProcess(slack, redis_url, tmp_path, "other")
    try:
        await asyncio.gather(bot.wait_healthy(), other.wait_healthy())
        async with half_sent(bot, group("in-flight")) as (reader, writer, rest):
            await stopping(bot)
            assert await refused(bot), "a new connection goes to another replica"
            writer.write(rest)
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), timeout=15)
        assert status_line.startswith(b"HTTP/1.1 202"), status_line
        await eventually(lambda: bot.process.poll() is not None, what="the exit", timeout=30)
        assert "queuepilot stopped cleanly" in bot.output()
        # Applied before the exit, or handed back to the stream for the other replica.
        await eventually(lambda: len(incidents_shown(slack)) == 1, what="its root")

        # Every line from the start to the exit is JSON (Bolt's and uvicorn's too), and the
        # root's post names its incident and channel (logged once Slack has answered it).
        def posted() -> list[dict[str, str]]:
            lines = logged(bot) + logged(other)
            return [line for line in lines if "opened thread" in line["message"]]

        await eventually(posted, what="the post's log line")
        assert [(line["incident"], line["channel"]) for line in posted()] == [("1", CHANNEL)]
        assert any(line["logger"].startswith("uvicorn") for line in logged(bot))
        assert any(line["logger"] == "slack_bolt" for line in logged(bot))
    finally:
        for process in (bot, other):
            process.kill()
            print(f"--- {process.name} ---\n{process.output()[-4000:]}")


@pytest.mark.slow
async def test_a_request_that_never_finishes_holds_the_stop_up_for_the_grace_only(
    redis_url: str, slack: Slack, tmp_path: Path
) -> None:
    bot = BotProcess(slack, redis_url, tmp_path, "stalled", SHUTDOWN_GRACE_SECONDS="1")
    try:
        await bot.wait_healthy()
        async with half_sent(bot, group("stalled")):
            await stopping(bot)
            # Far less than a pod's grace: without a bound it would wait for the client forever.
            await eventually(lambda: bot.process.poll() is not None, what="the exit", timeout=10)
        output = bot.output()
        assert "timeout graceful shutdown exceeded" in output
        assert "queuepilot stopped cleanly" in output, "the work was still stopped in order"
    finally:
        bot.kill()
        print(bot.output()[-4000:])
