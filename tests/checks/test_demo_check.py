"""The demo runs `queuepilot check` against its own servers as it starts, and it passes there:
each stand-in answers as the real system would for a deployment configured right."""

from __future__ import annotations

from contextlib import ExitStack

from bot.checks import Verdict
from sandbox.stack import SandboxConfig, start_sandbox
from tests.support.servers import RedisServer


def test_the_demos_own_check_passes(redis_server: RedisServer) -> None:
    redis_server.flush()
    with ExitStack() as stack:
        sandbox = start_sandbox(stack, redis_server.url, "qpcheck", SandboxConfig(speed=30))

    subjects = {f.subject for f in sandbox.check}
    assert subjects == {
        "slack", "redis", "prometheus", "silences", "kubernetes", "hud", "github issues"
    }  # fmt: skip
    assert [f for f in sandbox.check if f.verdict is Verdict.FAIL] == []
    # The demo's Redis is a throwaway one, without persistence: the one thing worth a word.
    warned = [f for f in sandbox.check if f.verdict is Verdict.WARN]
    assert [(f.subject, f.detail.split(":")[0]) for f in warned] == [
        ("redis", "no persistence (AOF off, no RDB snapshots)")
    ]
