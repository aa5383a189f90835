"""What an operator's Prometheus reads of the bot itself on `/metrics`: which build runs, the
process's memory, CPU and files, and every backend call by backend and outcome, counted where
the calls are made into the app's own registry (the tests run several apps in one process)."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.backends.http import BackendError, outcome_of
from bot.backends.silence import grafana_silencer
from bot.telemetry import queuepilot_version
from sandbox.serve import serve_in_thread
from sandbox.silence_api import FakeSilenceApi
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, recorded_root, run_bot
from tests.support.servers import free_port
from tests.support.slack import Slack, post_event, slash


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, frozenset(labels.items())), 0.0)


async def scrape(running: RunningBot) -> str:
    response = await running.http.get("/metrics")
    assert response.status_code == 200
    return response.text


async def test_metrics_say_which_build_runs_and_what_the_process_uses(
    running_bot: RunningBot,
) -> None:
    text = await scrape(running_bot)

    build = {"version": queuepilot_version(), "python": platform.python_version()}
    assert value(text, "queuepilot_build_info", **build) == 1
    assert value(text, "process_resident_memory_bytes") > 10 * 2**20
    assert value(text, "process_open_fds") > 0
    assert value(text, "process_start_time_seconds") > 1.7e9
    assert ("process_cpu_seconds_total", frozenset()) in samples(text)
    assert value(text, "python_info", version=platform.python_version(), **python_parts()) == 1


def python_parts() -> dict[str, str]:
    major, minor, patch = platform.python_version_tuple()
    impl = platform.python_implementation()
    return {"implementation": impl, "major": major, "minor": minor, "patchlevel": patch}


@pytest.fixture
def grafana() -> Iterator[FakeSilenceApi]:
    api = FakeSilenceApi()
    with serve_in_thread(api.app) as server:
        api.url = server.url  # type: ignore[attr-defined]
        yield api


async def test_every_backend_answer_is_counted_by_backend_and_outcome(
    running_bot: RunningBot, grafana: FakeSilenceApi
) -> None:
    """The silencer stands for every HTTP backend: they all call through one function, and
    count where the app that built them told them to."""
    counted = running_bot.bot.telemetry.backend_called
    before = await scrape(running_bot)
    url = grafana.url  # type: ignore[attr-defined]
    silencer = grafana_silencer(url, grafana.token, timeout_s=5, counted=counted)
    grafana.fail_next(503, "unavailable")
    grafana.fail_next(429, "too many requests")
    grafana.fail_next(403, "Permissions needed: alert.silences:read")
    for _ in range(3):
        with pytest.raises(BackendError):
            await silencer.state("a-silence")
    assert await silencer.state("a-silence") is None  # Grafana's 404: no such silence
    await silencer.aclose()
    nowhere = grafana_silencer(f"http://127.0.0.1:{free_port()}", "t", timeout_s=5, counted=counted)
    with pytest.raises(BackendError, match="unreachable"):
        await nowhere.state("a-silence")
    await nowhere.aclose()

    after = await scrape(running_bot)
    counted = {
        outcome: value(after, "queuepilot_backend_calls_total", backend="grafana", outcome=outcome)
        - value(before, "queuepilot_backend_calls_total", backend="grafana", outcome=outcome)
        for outcome in ("server_error", "rate_limited", "refused", "unreachable", "ok")
    }
    assert counted == {
        "server_error": 1,
        "rate_limited": 1,
        "refused": 1,
        "unreachable": 1,
        "ok": 1,  # Grafana's 404: an answer (no such silence), not a failure
    }


async def test_two_apps_in_one_process_count_only_their_own_backend_calls(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    """A silence made through one bot is on its /metrics, and not on another's beside it."""
    silencing = settings_for(
        redis_prefix="one",
        silence_backend="grafana",
        grafana_url=grafana.url,  # type: ignore[attr-defined]
        grafana_token=grafana.token,
    )
    async with run_bot(silencing) as one, run_bot(settings_for(redis_prefix="other")) as other:
        await one.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        await recorded_root(one, slack)
        assert (await post_event(one.http, slash("silence 2h"))).status_code == 200
        await eventually(
            lambda: [method for method, _, _ in grafana.requests] == ["POST", "GET"],
            what="the silence made and read back",
        )
        mine, theirs = await scrape(one), await scrape(other)

    calls = "queuepilot_backend_calls_total"
    assert value(mine, calls, backend="grafana", outcome="ok") == 2
    assert not [name for name, _ in samples(theirs) if name == calls]


def test_a_rate_limit_answered_as_a_403_counts_as_rate_limited() -> None:
    """GitHub answers its limits with 403 and a rate limit's headers."""
    limited = httpx.Response(403, headers={"x-ratelimit-remaining": "0"})
    assert outcome_of(limited) == "rate_limited"
    assert outcome_of(httpx.Response(403, headers={"retry-after": "60"})) == "rate_limited"
    assert outcome_of(httpx.Response(403), expect=(200, 403)) == "refused"
    assert outcome_of(httpx.Response(404), expect=(200, 404)) == "ok"
    assert outcome_of(httpx.Response(404)) == "refused"
    assert outcome_of(httpx.Response(304)) == "ok"
