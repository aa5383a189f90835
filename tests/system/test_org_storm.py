"""An alert storm across the organisation: many team channels storming at once, three replicas
on one Redis, Slack's limits enforced over HTTP. Posts are paced per channel but edits for the
whole app, so a channel's digest cannot grow by edits alone; what a user sees must still be
every group in its own channel, none twice, no channel over its limits.

It comes right after a fresh start: Redis holds no state marker, so the leader reads every
channel's history for roots of a lost state while the storm arrives (`bot.outbound.lost_state`);
the first post must not wait for more than that read."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bot.config import Settings
from tests.outbound.test_storm import send_all, shown, storm_group
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack

TEAMS, GROUPS = 20, 6  # 120 new groups; twenty channels share the app's edits
# Seconds from the storm's arrival to its first post: a new incident waits for every channel's
# newest page (about a second for twenty channels at Tier 3). `bench.storms` measures 600 groups.
FIRST_POST_S = 5.0
STORM_MARK = "Alert storm"


def team_group(team: int, n: int) -> tuple[str, dict[str, Any]]:
    """Group n of team `team`, named so no name is a prefix of another."""
    payload = storm_group(team * 100 + n)
    name = f"Queue storm t{team:02d}-g{n:02d}"
    payload["groupLabels"]["alertname"] = name
    payload["commonLabels"].update(alertname=name, team=f"t{team:02d}")
    for alert in payload["alerts"]:
        alert["labels"].update(alertname=name, team=f"t{team:02d}")
    return name, payload


def channel(team: int) -> str:
    return f"C0TEAM{team:02d}"


def seen(slack: Slack, channels: list[str]) -> dict[str, list[tuple[bool, str]]]:
    """Each channel's top-level messages as (is a digest message, what it shows): a digest's
    blocks only, as its fallback text repeats its first lines."""
    return {
        c: [
            (True, json.dumps(m.blocks)) if STORM_MARK in m.text else (False, shown(m))
            for m in slack.emulator.channel_messages(c)
        ]
        for c in channels
    }


def all_visible(slack: Slack, homes: dict[str, str]) -> bool:
    by_channel = {
        c: "".join(t for _, t in ms) for c, ms in seen(slack, sorted({*homes.values()})).items()
    }
    return all(name in by_channel[home] for name, home in homes.items())


async def test_an_org_wide_storm_shows_every_group_in_its_own_channel_once_within_limits(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    routes = [{"match": [f"team=t{t:02d}"], "channel": channel(t)} for t in range(TEAMS)]
    for route in routes:
        slack.emulator.add_channel(route["channel"])
    groups = [(t, *team_group(t, n)) for n in range(GROUPS) for t in range(TEAMS)]
    homes = {name: channel(t) for t, name, _ in groups}
    slack.emulator.enforce_rate_limits = True
    try:
        # Slack's pace, the defaults: a post a second per channel, an edit per 1.2 s for the app.
        settings = settings_for(
            slack_routes=json.dumps(routes),
            slack_post_interval_ms=1000,
            slack_update_interval_ms=1200,
        )
        async with run_bot(settings) as one, run_bot(settings) as two, run_bot(settings) as three:
            started = time.monotonic()

            async def first_post() -> float:
                await eventually(
                    lambda: any(slack.emulator.channel_messages(c) for c in {*homes.values()}),
                    timeout=30,
                    what="the storm's first post",
                )
                return time.monotonic() - started

            first_post_s, _ = await asyncio.gather(
                first_post(), send_all([one, two, three], [payload for _, _, payload in groups])
            )
            await eventually(
                lambda: all_visible(slack, homes),
                timeout=90,
                what="every group visible in its own channel",
            )
            # Then every group's own thread, at a post a second in each channel.
            await eventually(
                lambda: (
                    sum(
                        not digest
                        for ms in seen(slack, sorted({*homes.values()})).values()
                        for digest, _ in ms
                    )
                    >= len(groups)
                ),
                timeout=90,
                what="every group's root",
            )
    finally:
        slack.emulator.enforce_rate_limits = False

    assert first_post_s <= FIRST_POST_S, f"the first post after {first_post_s:.1f} s"
    everything = seen(slack, [channel(t) for t in range(TEAMS)])
    for name, home in homes.items():
        roots = [
            text for c in everything.values() for digest, text in c if not digest and name in text
        ]
        lines = sum(text.count(name) for digest, text in everything[home] if digest)
        assert len(roots) == 1, f"{name}: {len(roots)} roots"
        assert all(
            name not in text for c, ms in everything.items() if c != home for _, text in ms
        ), f"{name} shown outside {home}"
        assert lines <= 1, f"{name} listed {lines} times by the digest messages"
    limited = Counter(c.params.get("channel") for c in slack.emulator.calls() if c.status == 429)
    assert max(limited.values(), default=0) <= 10, f"429s per channel: {limited}"
    # The emulator counts edits for the whole app, as Slack does: few refused, however many
    # channels storm.
    edits_limited = sum(1 for c in slack.emulator.calls("chat.update") if c.status == 429)
    assert edits_limited <= 10, f"{edits_limited} edits answered 429"
