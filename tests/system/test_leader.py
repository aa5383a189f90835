"""One active replica: every replica takes requests, the one holding the lease does the work.

Two real `python -m bot serve` processes on one redis-server and one Slack (the emulator), as
two pods of a Deployment: what an operator sees on `/readyz` and `/metrics`, and what a channel
sees when the leader is killed or stalls past its lease.
"""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.processes import BotProcess
from tests.support.running import eventually
from tests.support.slack import CHANNEL, Slack
from tests.system.test_faults import group, incidents_shown

LEASE_MS = 2000


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="qp-leader-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def name_of(bot: BotProcess) -> str:
    return f"{socket.gethostname()}-{bot.process.pid}"


async def ready(bot: BotProcess) -> dict[str, object]:
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"{bot.url}/readyz")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def leader_gauge(bot: BotProcess) -> float:
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{bot.url}/metrics")).text
    for family in text_string_to_metric_families(text):
        if family.name == "queuepilot_leader":
            return family.samples[0].value
    raise AssertionError("no queuepilot_leader in /metrics")


async def the_leader(replicas: list[BotProcess]) -> BotProcess:
    async def found() -> BotProcess | None:
        leading = [bot for bot in replicas if (await ready(bot))["leads"]]
        return leading[0] if len(leading) == 1 else None

    return await eventually(found, what="one replica leading", timeout=20)


@pytest.fixture
async def replicas(redis_url: str, slack: Slack, workdir: Path) -> AsyncIterator[list[BotProcess]]:
    """Two healthy replicas on one Redis and one Slack. Their logs are printed at teardown,
    which pytest shows only for a test that failed."""
    started = [
        BotProcess(slack, redis_url, workdir, name, LEADER_LEASE_MS=str(LEASE_MS))
        for name in ("one", "two")
    ]
    try:
        for bot in started:
            await bot.wait_healthy()
        yield started
    finally:
        for bot in started:
            bot.kill()
            print(f"--- {bot.name} ---\n{bot.output()[-6000:]}")


@pytest.mark.slow
async def test_every_replica_takes_requests_and_one_does_the_work(
    replicas: list[BotProcess], slack: Slack
) -> None:
    leader = await the_leader(replicas)
    follower = next(bot for bot in replicas if bot is not leader)
    for bot in replicas:
        assert (await ready(bot))["leader"] == name_of(leader), "both say who leads"
    assert await leader_gauge(leader) == 1
    assert await leader_gauge(follower) == 0

    assert (await follower.send(group("to-the-follower"))).status_code == 202
    await eventually(lambda: len(incidents_shown(slack)) == 1, what="its root")
    assert f"leader: {name_of(follower)} leads" not in follower.output()


@pytest.mark.slow
async def test_a_killed_leader_is_replaced_and_nothing_is_lost(
    replicas: list[BotProcess], slack: Slack
) -> None:
    leader = await the_leader(replicas)
    survivor = next(bot for bot in replicas if bot is not leader)
    assert (await survivor.send(group(1))).status_code == 202
    await eventually(lambda: len(incidents_shown(slack)) == 1, what="the first root")

    leader.kill()
    # Accepted while nobody leads: it waits in the stream for the next leader.
    assert (await survivor.send(group(2))).status_code == 202
    # How soon (within one lease) is `make bench`'s failover goal, measured unloaded.
    await eventually(lambda: ready_leads(survivor), what="the survivor leading", timeout=15)
    await eventually(lambda: len(incidents_shown(slack)) == 2, what="the second root")
    assert (await survivor.send(group(3))).status_code == 202
    await eventually(lambda: len(incidents_shown(slack)) == 3, what="the third root")
    shown = incidents_shown(slack)
    assert len(set(shown)) == 3, "nothing shown twice"
    assert (await ready(survivor))["leader"] == name_of(survivor)


async def ready_leads(bot: BotProcess) -> bool:
    return bool((await ready(bot))["leads"])


@pytest.mark.slow
async def test_a_leader_stalled_past_its_lease_stands_down_when_it_resumes(
    replicas: list[BotProcess], slack: Slack
) -> None:
    """Paused (SIGSTOP) past its lease, the leader is replaced; resumed, it finds the lease
    another's, stops working and posts nothing twice, and both replicas agree who leads."""
    stalled = await the_leader(replicas)
    other = next(bot for bot in replicas if bot is not stalled)
    stalled.signal(signal.SIGSTOP)
    for n in range(5):
        assert (await other.send(group(n))).status_code == 202
    await eventually(lambda: ready_leads(other), what="the other leading", timeout=15)
    await eventually(lambda: len(incidents_shown(slack)) == 5, what="5 roots", timeout=20)

    stalled.signal(signal.SIGCONT)
    await eventually(lambda: "lost the lease" in stalled.output(), what="standing down", timeout=15)
    assert not (await ready(stalled))["leads"]
    assert await leader_gauge(stalled) == 0
    for n in range(5, 8):
        assert (await stalled.send(group(n))).status_code == 202
    await eventually(lambda: len(incidents_shown(slack)) == 8, what="8 roots", timeout=20)
    assert len(set(incidents_shown(slack))) == 8, "nothing posted twice"
    assert not [m for m in slack.emulator.channel_messages(CHANNEL) if "Traceback" in m.text]
