"""Through a real Alertmanager: the silence the bot made ends when its incident resolves, and a
silence a person made in Alertmanager for the same alert is left as it is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.render.replies import SILENCE_ENDED
from tests.actions.test_silence import (
    am_settings,
    am_silence,
    choose_silence,
    open_am_incident,
    resolve_summary,
)
from tests.support.running import eventually, run_bot
from tests.support.servers import Alertmanager
from tests.support.slack import Slack


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[Alertmanager]:
    server = Alertmanager("http://127.0.0.1:9/nowhere")  # only its silence API is used
    server.start()
    yield server
    server.stop()


def a_persons_silence(alertmanager: Alertmanager, group: str) -> str:
    now = datetime.now(UTC)
    body = {
        "matchers": [{"name": "alertname", "value": group, "isRegex": False, "isEqual": True}],
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
        "createdBy": "bob",
        "comment": "maintenance, made in Alertmanager",
    }
    answer = httpx.post(f"{alertmanager.url}/api/v2/silences", json=body, timeout=5)
    answer.raise_for_status()
    return str(answer.json()["silenceID"])


def state(alertmanager: Alertmanager, silence_id: str) -> Any:
    return am_silence(alertmanager, silence_id)["status"]["state"]


@pytest.mark.slow
async def test_resolve_ends_the_bots_silence_and_leaves_a_persons(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager
) -> None:
    group = f"AtResolve{time.time_ns()}"
    async with run_bot(am_settings(settings_for, alertmanager)) as running:
        root = await open_am_incident(running, slack, group=group)
        persons = a_persons_silence(alertmanager, group)
        await choose_silence(running, root, 3600)
        made = await eventually(lambda: _silence_of(running), what="the bot's silence recorded")
        # Pending for the moment its start is ahead of Alertmanager's clock.
        await eventually(lambda: state(alertmanager, made) == "active", what="in force")

        summary = await resolve_summary(running, slack, root)
        assert SILENCE_ENDED in summary
        await eventually(
            lambda: state(alertmanager, made) == "expired", what="the bot's silence expired"
        )
        assert state(alertmanager, persons) == "active", "a person's silence is never touched"

        async def recorded_ended() -> bool:
            return await _silence_of(running) is None

        await eventually(recorded_ended, what="the incident records it ended")


async def _silence_of(running: Any) -> str | None:
    incident = await running.bot.store.get("1")
    return incident.silence.silence_id if incident and incident.silence else None
