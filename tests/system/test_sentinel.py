"""High-availability Redis: a real Sentinel failover in the middle of a storm, and the settings
that point queuepilot at Sentinel (or refuse Redis Cluster)."""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.config import Settings, SettingsError, check_serve
from bot.domain.alerting.alerts import parse_json_body, parse_notification
from bot.storage.connection import (
    RedisSetupError,
    SentinelTarget,
    parse_sentinel_url,
    parse_sentinels,
    refuse_cluster,
)
from bot.storage.keys import Keys
from bot.storage.streams import NotificationStream, NotReplicated
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.sentinel import MASTER_NAME, SentinelSet
from tests.support.servers import free_port, require_binary, wait_until
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
PREFIX = "qp"


def named_group(n: int) -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json(FIRING))
    name = f"Failover group {n:03d}"
    payload["groupKey"] = f"{payload['groupKey']}/failover-{n}"
    payload["groupLabels"] = {"alertname": name}
    payload["commonLabels"]["alertname"] = name
    for alert in payload["alerts"]:
        alert["labels"]["alertname"] = name
    return payload


@pytest.fixture
def sentinel_set() -> Iterator[SentinelSet]:
    servers = SentinelSet()
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


async def deliver(
    running: RunningBot, payload: dict[str, Any], log: list[tuple[float, int]]
) -> None:
    """Like Alertmanager: retry a 503 until the notification is accepted."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status = (await running.send("grafana", payload)).status_code
        except Exception:
            status = 0
        log.append((time.monotonic(), status))
        if status == 202:
            return
        assert status in (0, 503), f"answered {status}"
        await asyncio.sleep(0.2)
    raise AssertionError("never accepted")


async def test_a_master_killed_mid_storm_costs_at_most_503s_for_the_failover_and_loses_nothing(
    settings_for: Callable[..., Settings], slack: Slack, sentinel_set: SentinelSet
) -> None:
    settings = settings_for(
        redis_url="redis://ignored-with-sentinels/0",
        redis_sentinels=sentinel_set.sentinels,
        redis_sentinel_master=MASTER_NAME,
        intake_reclaim_idle_ms=2000,
    )
    assert settings.wait_replicas == 1, "with Sentinel, 202 waits for a replica by default"
    log: list[tuple[float, int]] = []
    names = [f"Failover group {n:03d}" for n in range(40)]
    async with run_bot(settings) as running:
        sends = []
        for n in range(40):
            sends.append(asyncio.create_task(deliver(running, named_group(n), log)))
            if n == 15:
                await asyncio.gather(*sends)  # these 16 were acknowledged before the kill
                killed_at = time.monotonic()
                sentinel_set.kill(sentinel_set.master_port)
            await asyncio.sleep(0.05)
        await asyncio.gather(*sends)
        assert sentinel_set.master_port_now() == sentinel_set.replica_port, "failed over"

        def shown() -> str:
            return "".join(m.text + str(m.blocks) for m in slack.emulator.channel_messages(CHANNEL))

        await eventually(
            lambda: all(name in shown() for name in names), timeout=40, what="every group shown"
        )

    # The 24 sent after the kill could only be accepted by the promoted replica. Whether any was
    # answered 503 first depends on timing: the client's retries may ride out the whole failover.
    failures = [at for at, status in log if status != 202]
    assert all(at - killed_at < 30 for at in failures), "503s only for the failover window"
    assert [status for _, status in log if status not in (0, 202, 503)] == []
    roots = [m.text for m in slack.emulator.channel_messages(CHANNEL) if "storm" not in m.text]
    assert len(roots) == len(set(roots)), "no group shown twice"


# -- settings --------------------------------------------------------------------------------


def test_sentinels_are_read_from_the_environment_form_and_the_url_form(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(
        redis_url="redis://:s3cret@ignored:6379/3",
        redis_sentinels="10.0.0.1:26379, sentinel-b:26380,[::1]:5000,sentinel-c",
        redis_sentinel_master="queues",
    )
    assert settings.sentinel() == SentinelTarget(
        (("10.0.0.1", 26379), ("sentinel-b", 26380), ("::1", 5000), ("sentinel-c", 26379)),
        "queues",
        3,
        "s3cret",
    )
    url = settings_for(redis_url="redis+sentinel://:pw@a:1,b:2/queues/2")
    assert url.sentinel() == SentinelTarget((("a", 1), ("b", 2)), "queues", 2, "pw")
    assert url.wait_replicas == 1
    assert settings_for().sentinel() is None and settings_for().wait_replicas == 0


@pytest.mark.parametrize(
    "sentinels",
    ["", " , ", "host:0", "host:99999", "host:port", "::1:26379", "a/b:1", "[::1]x"],
)
def test_unusable_sentinels_stop_serve_with_a_clear_message(
    settings_for: Callable[..., Settings], sentinels: str
) -> None:
    # Refused as the value is read, or by serve's checks: either way before anything runs, and
    # the message names the variable.
    with pytest.raises(SettingsError, match=r"(?i)sentinel") as refused:
        check_serve(settings_for(redis_sentinels=sentinels or " "))
    assert "REDIS_SENTINELS" in str(refused.value)


@given(st.text(max_size=80))
def test_any_sentinel_list_parses_or_is_refused_clearly(value: str) -> None:
    try:
        found = parse_sentinels(value)
    except RedisSetupError as exc:
        assert str(exc)
        return
    assert found and all(host and 0 < port < 65536 for host, port in found)


@given(st.text(max_size=120))
def test_any_sentinel_url_parses_or_is_refused_clearly(tail: str) -> None:
    try:
        target = parse_sentinel_url("redis+sentinel://" + tail)
    except RedisSetupError as exc:
        assert str(exc)
        return
    assert target.master and target.sentinels and 0 <= target.db <= 15


def test_a_redis_cluster_node_is_refused_at_startup_with_what_to_use(tmp_path: Path) -> None:
    for attempt in range(5):
        port = cluster_port()
        process = cluster_node(port, tmp_path / str(attempt))
        try:
            if process.poll() is not None:
                continue  # its bus port (port + 10000) was taken meanwhile: another port
            with pytest.raises(RedisSetupError, match=r"Redis Cluster.*REDIS_SENTINELS"):
                refuse_cluster(f"redis://127.0.0.1:{port}/0", None)
            return
        finally:
            process.kill()
            process.wait(5)
    pytest.fail("no cluster node started in 5 tries (its port or bus port was taken)")


def cluster_node(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    """A Redis Cluster node on `port`, once it answers or has exited."""
    workdir.mkdir()
    command = [require_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    command += ["--cluster-enabled", "yes", "--save", "", "--dir", str(workdir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: process.poll() is not None or answers(port), what="cluster node")
    return process


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        port = free_port()
        if port <= 55_000 and free(port + 10_000):
            return port


def free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def answers(port: int) -> bool:
    try:
        return bool(SyncRedis(port=port, socket_timeout=1).ping())
    except RedisError:
        return False


def test_a_plain_or_unreachable_redis_is_not_refused(redis_url: str) -> None:
    refuse_cluster(redis_url, None)
    refuse_cluster(f"redis://127.0.0.1:{free_port()}/0", None)  # starts, answers 503 till up


async def test_a_notification_is_acknowledged_only_once_a_replica_has_it(
    sentinel_set: SentinelSet,
) -> None:
    """With Sentinel an append waits for the replica (`WAIT`): once accepted, the entry is on
    the replica; with the replica frozen (still connected, confirming nothing), the append is
    refused, and the sender's retry is what counts."""
    master = Redis(port=sentinel_set.master_port, decode_responses=True)
    replica = Redis(port=sentinel_set.replica_port, decode_responses=True)
    source, body = "grafana", json.dumps({**fixture_json(FIRING), "groupKey": "replicated"})
    notification = parse_notification(source, parse_json_body(body.encode()))
    try:
        stream = NotificationStream(master, PREFIX, wait_replicas=1)
        entry_id = await stream.append(notification, body.encode(), time.time())
        assert await replica.xrange(Keys(PREFIX).stream, entry_id, entry_id), "on the replica"

        frozen = sentinel_set.processes[sentinel_set.replica_port]
        frozen.send_signal(signal.SIGSTOP)
        try:
            stream = NotificationStream(master, PREFIX, wait_replicas=1, wait_ms=300)
            with pytest.raises(NotReplicated):
                await stream.append(notification, body.encode(), time.time())
        finally:
            frozen.send_signal(signal.SIGCONT)
    finally:
        await master.aclose()
        await replica.aclose()
