"""The leader killed mid-act: two `queuepilot serve` replicas on one Redis, a real Prometheus
scraping ARC's listener metrics, the scale set behind the Kubernetes stand-in. The leader's act
reaches ARC, and the leader dies before its answer. The next leader makes no second act: it
finds the act claimed and pauses the pilot for the type, saying a person should look."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.storage.keys import Keys
from bot.storage.pilot import PilotStore
from sandbox.serve import serve_in_thread
from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
from tests.support.processes import BotProcess
from tests.support.running import eventually
from tests.support.slack import USER, Slack
from tests.system.test_leader import ready, the_leader
from tests.system.test_pilot import AT_MAXIMUM, PILOT

SET = ("arc-runners", QUEUEING)
ANSWER_AFTER_S = 8.0  # the act's PATCH is applied at once and answered this late


def answered_late(app: ASGIApp) -> ASGIApp:
    """The API server applies a PATCH and answers it late: a leader killed meanwhile made the
    act and never heard so."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "PATCH":
            return await app(scope, receive, send)

        async def late(message: Message) -> None:
            if message["type"] == "http.response.start":
                await asyncio.sleep(ANSWER_AFTER_S)
            await send(message)

        return await app(scope, receive, late)

    return served


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="qp-pilot-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
async def test_a_leader_killed_mid_act_gives_exactly_one_act(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    kube = FakeKubeApi()
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    server = serve_in_thread(answered_late(kube.app))
    fleet = ArcFleet()
    fleet.queueing.set(**AT_MAXIMUM)
    target = {"target": f"arc-runners/{QUEUEING}", "cap": 20, "ceiling": 150, "pilot": PILOT}
    env: dict[str, Any] = {
        "METRICS_BACKEND": "prometheus",
        "PROMETHEUS_URL": fleet.prometheus.url,
        "PROMETHEUS_RATE_WINDOW": "30s",
        "METRICS_INTERVAL_SECONDS": "1",
        "ADVICE_RISE_WINDOW": "3s",
        "SCALER_BACKEND": "arc",
        "SCALER_KUBECONFIG": str(kube.kubeconfig(workdir, server.url)),
        "SCALER_TARGETS": json.dumps({QUEUEING: target}),
        "SCALE_ALLOWED_USERS": USER,
        "BACKEND_TIMEOUT_SECONDS": "20",
    }
    replicas = [BotProcess(slack, redis_url, workdir, name, **env) for name in ("one", "two")]
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        for bot in replicas:
            await bot.wait_healthy()
        leader = await the_leader(replicas)
        survivor = next(bot for bot in replicas if bot is not leader)
        assert (
            await survivor.send(fixture_json("grafana/queue-alert-firing.json"))
        ).status_code == 202
        await eventually(lambda: kube.written, what="the act's PATCH applied", timeout=60)
        leader.kill()
        await eventually(lambda: _leads(survivor), what="the survivor leading", timeout=20)
        pilots = PilotStore(redis, Keys("qp"))

        async def paused() -> str:
            _, pause = (await pilots.states([QUEUEING]))[QUEUEING]
            return pause.why if pause is not None else ""

        why = await eventually(paused, what="the pilot paused by the next leader", timeout=30)
        assert "stopped mid-act" in why and "look at its scale set" in why
        # The new leader goes on looking, readings still asking past the hold: still one act.
        first = (await pilots.states([QUEUEING]))[QUEUEING][0].at
        assert first is not None

        async def looked_on() -> bool:
            at = (await pilots.states([QUEUEING]))[QUEUEING][0].at
            return at is not None and (at - first).total_seconds() > 5

        await eventually(looked_on, what="5 s more of the pilot's looks", timeout=20)
        assert len(kube.written) == 1, kube.written
        assert kube.sets[SET]["spec"]["maxRunners"] == 26
    finally:
        for bot in replicas:
            bot.kill()
            print(f"--- {bot.name} ---\n{bot.output()[-6000:]}")
        await redis.aclose()
        fleet.stop()
        server.stop()


async def _leads(bot: BotProcess) -> bool:
    return bool((await ready(bot))["leads"])
