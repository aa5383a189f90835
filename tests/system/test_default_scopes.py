"""The app as its manifest installs it: with only the default scopes, an incident's whole loop
(the start's channel check, the root, an acknowledgement with the person's name, the resolve and
its summary) makes no call Slack refuses for a missing scope."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.checks.slack import DEFAULT
from bot.config import Settings
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack, click

FIRING = "grafana/queue-alert-firing.json"
RESOLVED = "grafana/queue-alert-resolved.json"


def text_of(message: Any) -> str:
    return (message.text + json.dumps(message.blocks, ensure_ascii=False)).lower()


async def test_an_incident_needs_no_scope_beyond_the_manifests_defaults(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    slack.emulator.scopes = frozenset(DEFAULT)
    async with run_bot(settings_for()) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
        response = await click(running, roots[0], "incident_ack")
        assert response.status_code == 200

        def acknowledged() -> Any:
            [root] = slack.emulator.channel_messages(CHANNEL)
            return "acknowledged" in text_of(root)

        await eventually(acknowledged, what="the root says who acknowledged")
        await running.send("grafana", fixture_json(RESOLVED))

        def summary() -> Any:
            thread = slack.emulator.thread(CHANNEL, roots[0].ts)
            return len(thread) >= 2 and "resolved" in text_of(thread[-1])

        await eventually(summary, what="the summary")

    refused = [(c.method, c.error) for c in slack.emulator.calls() if c.error == "missing_scope"]
    assert refused == []
    # The calls that need the default scopes were made, and answered.
    for method in ("conversations.info", "chat.postMessage", "chat.update", "users.info"):
        assert any(c.ok for c in slack.emulator.calls(method)), method
