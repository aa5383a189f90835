"""A kept silence removed with `/queue unsilence` after the resolve, as the summary offers:
the summary is told anew and no longer says the silence stays."""

from __future__ import annotations

from typing import Any

from sandbox.silence_api import FakeSilenceApi
from tests.actions.test_silence import (  # noqa: F401  (fixtures)
    _silenced,
    choose_silence,
    grafana,
    grafana_settings,
    resolve_summary,
    silenced_from_slack,
)
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack, post_event, slash, thread_texts


async def test_unsilencing_a_kept_silence_after_the_resolve_edits_the_summary(
    settings_for: Any,
    slack: Slack,
    grafana: FakeSilenceApi,  # noqa: F811
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        root, made = await silenced_from_slack(running, slack, keep=True)
        summary = await resolve_summary(running, slack, root)
        assert "🔕 Its silence stays until" in summary
        await post_event(running.http, slash("unsilence 1"))
        await eventually(
            lambda: grafana.silences[made.silence.silence_id]["status"]["state"] == "expired",
            what="removed",
        )

        async def gone() -> bool:
            incident = await running.bot.store.get("1")
            return incident is not None and incident.silence is None

        await eventually(gone, what="recorded")

        def told() -> bool:
            [now] = [t for t in thread_texts(slack, root.ts) if "Incident 1 resolved" in t]
            return "Its silence stays until" not in now

        await eventually(told, what="the summary no longer saying the silence stays")
