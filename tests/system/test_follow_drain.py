"""The alert clears while the live readings still see jobs queued: a real bot reading a real
`prometheus` over ARC listeners, with Slack emulated, keeps the thread's statuses until the queue
drains, then sums the incident up once with the combined reason."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.payloads import fixture_json
from tests.support.running import eventually, read_after, run_bot
from tests.support.slack import CHANNEL, Slack
from tests.system.test_live_metrics import FIRING, LIVE_S, RESOLVED, live, text_of

FOLLOWING = "following until the queue drains"


@pytest.mark.slow
async def test_the_thread_follows_a_queue_its_alert_cleared_over_until_it_drains(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    async with run_bot(live(settings_for, arc_fleet.prometheus.url)) as running:
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()

        def summaries() -> list[Any]:
            return [m for m in thread()[1:] if "Peak by runner type" in text_of(m)]

        await eventually(
            lambda: f"{QUEUEING}: *43* queued" in text_of(thread()[0]),
            what="the root showing the live queue",
            timeout=LIVE_S,
        )

        # The alert clears with 43 jobs still queued: said once, and the incident stays open.
        await running.send("grafana", fixture_json(RESOLVED))
        said = await eventually(
            lambda: next((m for m in thread()[1:] if FOLLOWING in m.text), None),
            what="the thread told the alert cleared",
        )
        assert "The alert cleared; 43 jobs still queue over its thresholds" in said.text
        await eventually(lambda: "Alert cleared" in text_of(thread()[0]), what="the root saying so")
        # Followed, the incident is checked as a draining one is, a second apart here: three
        # readings later it is still open on its queue (a status reply for it comes on a
        # material change, a minute after the last; the drain below is found by these checks).
        cleared = (await running.bot.readings.stored()).tried_at
        await eventually(
            lambda: read_after(running, cleared + timedelta(seconds=3)),
            what="three readings after the alert cleared",
        )
        assert "Resolved" not in text_of(thread()[0])
        assert summaries() == [], "no summary while the queue is followed"

        # The queue drains: resolved once, with the alert's clearing and the drain in one reason.
        arc_fleet.queueing.set(assigned_jobs=120)
        await eventually(
            lambda: "alert cleared, queue drained" in text_of(thread()[0]),
            what="the root resolved with the combined reason",
            timeout=LIVE_S,
        )
        summary = await eventually(lambda: summaries()[:1], what="the summary")
        assert "alert cleared, queue drained" in text_of(summary[0])
        assert sum(FOLLOWING in m.text for m in thread()) == 1, "said once"

        async def sent() -> bool:
            bot = running.bot
            return await bot.stream.backlog() == 0 and await bot.queue.waiting(CHANNEL) == 0

        await eventually(sent, what="the resolve's replies sent")
        assert len(summaries()) == 1, "one summary"
