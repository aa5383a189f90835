"""The throwaway redis-server shared by the demo and the tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.redis_server import RedisServer, RedisServerError, RedisServerNotFound
from tests.support.servers import require_binary


@pytest.fixture
def binary() -> str:
    return require_binary("redis-server")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket holding a port, as another process might."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def command(port: int, *words: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(b" ".join(words) + b"\r\n")
        return sock.recv(64)


def test_restart_keeps_the_port_and_forgets_the_data(binary: str) -> None:
    with RedisServer(binary=binary) as redis:
        first_dir = redis.dir
        assert command(redis.port, b"SET", b"k", b"v") == b"+OK\r\n"
        port = redis.port
        redis.stop()
        assert first_dir is not None and not first_dir.exists()
        redis.start()
        assert redis.port == port
        assert redis.url == f"redis://127.0.0.1:{port}/0"
        assert command(port, b"GET", b"k") == b"$-1\r\n"
    assert redis.process is None
    assert redis.dir is not None and not redis.dir.exists()


def test_flush_empties_redis(binary: str) -> None:
    with RedisServer(binary=binary) as redis:
        command(redis.port, b"SET", b"k", b"v")
        redis.flush()
        assert command(redis.port, b"DBSIZE") == b":0\r\n"


def test_first_start_moves_off_a_taken_port(binary: str, listener: socket.socket) -> None:
    redis = RedisServer(binary=binary)
    redis.port = listener.getsockname()[1]
    with redis:
        assert redis.port != listener.getsockname()[1]
        assert command(redis.port, b"PING") == b"+PONG\r\n"


def test_restart_on_a_taken_port_fails_clearly_and_cleans_up(binary: str) -> None:
    redis = RedisServer(binary=binary)
    redis.start()
    redis.stop()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", redis.port))
        squatter.listen()
        with pytest.raises(RedisServerError, match=r"did not start: .*in use"):
            redis.start()
    assert redis.process is None
    assert redis.dir is not None and not redis.dir.exists()


def test_a_missing_binary_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerNotFound, match=r"not found: install it \(apt-get"):
        RedisServer()
