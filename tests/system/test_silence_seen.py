"""A silence made from Slack is read back before its reply is posted: the reply says what the
backend showed (a real Alertmanager; Grafana's API as it answers a read), never "done" on an
answer it could not read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.silence_api import FakeSilenceApi
from tests.actions.test_silence import (
    am_settings,
    choose_silence,
    grafana_settings,
    open_am_incident,
)
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, recorded_root, run_bot
from tests.support.servers import Alertmanager
from tests.support.slack import Slack, thread_texts


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[Alertmanager]:
    server = Alertmanager("http://127.0.0.1:9/nowhere")  # only its silence API is used
    server.start()
    yield server
    server.stop()


async def silence_reply(running: RunningBot, slack: Slack, root: Any) -> str:
    await choose_silence(running, root, 3600)
    [reply] = await eventually(
        lambda: [t for t in thread_texts(slack, root.ts) if "Silenced for" in t],
        what="the silence's reply",
    )
    return reply


@pytest.mark.slow
async def test_the_silences_reply_says_alertmanager_shows_it_active_and_matching(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager
) -> None:
    async with run_bot(am_settings(settings_for, alertmanager)) as running:
        root = await open_am_incident(running, slack, group=f"Seen{time.time_ns()}")
        reply = await silence_reply(running, slack, root)
        incident = await running.bot.store.get("1")
        assert incident is not None and incident.silence is not None
        until = f"<!date^{int(incident.silence.until.timestamp())}^{{time}}|"
        assert "🔕 Silenced for 1 h in Alertmanager until " in reply
        assert f"✅ active in Alertmanager until {until}" in reply
        assert reply.endswith('matching the alert", "verbatim": true}}]')
        said = [t for t in thread_texts(slack, root.ts) if "Alertmanager" in t]
        assert said == [reply], "said in the silence's own reply, not a new one"
        timeline = await running.bot.store.events("1")
        assert any(e.kind == "silence_seen" and "matching the alert" in e.text for e in timeline)


async def test_a_read_back_grafana_refuses_is_said_as_not_known(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    grafana.fail_next(500, "database is locked", method="GET")
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        reply = await silence_reply(running, slack, await recorded_root(running, slack))
        assert "❔ not known: Grafana answered 500: database is locked" in reply
        assert "matching" not in reply and "✅" not in reply
        assert len(grafana.silences) == 1, "the silence stands: only its reading failed"


async def test_a_silence_grafana_no_longer_knows_is_a_warning(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    grafana.fail_next(404, "silence not found", method="GET")
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        reply = await silence_reply(running, slack, await recorded_root(running, slack))
        assert "⚠️ Grafana does not know it" in reply
