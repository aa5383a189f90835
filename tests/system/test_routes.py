"""SLACK_ROUTES end to end: two replicas, three channels. Each alert group's incident opens in its
team's channel once, `/queue` answers for the channel it is typed in, and a route to a channel
the app is not in is a clear error naming the channel, never a silent drop."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from tests.support.payloads import as_group
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack, post_event, slash

ROCM, PAGE, OUTSIDE = "C0ROCMQ", "C0PAGEQ", "C0NOTINQ"
ROUTES = [
    {"match": ["team=rocm"], "channel": ROCM},
    {"match": ["alertname=Lost runners"], "channel": OUTSIDE},
    {"match": ["severity=page"], "channel": PAGE},
]


@pytest.fixture
def channels(slack: Slack) -> None:
    slack.emulator.add_channel(ROCM)
    slack.emulator.add_channel(PAGE)
    slack.emulator.add_channel(OUTSIDE, member=False)  # the app was never invited there


async def test_a_route_to_a_channel_the_app_is_not_in_is_an_error_at_start(
    settings_for: Any, slack: Slack, channels: None, caplog: pytest.LogCaptureFixture
) -> None:
    slack.emulator.add_channel("C0GONEQ")
    slack.emulator.archive("C0GONEQ")
    routes = [*ROUTES, {"match": ["team=gone"], "channel": "C0GONEQ"}]
    caplog.set_level(logging.WARNING, logger="bot.outbound.membership")
    async with run_bot(settings_for(slack_routes=json.dumps(routes))):
        # Before any alert: the operator deploying it reads which route cannot post, and why.
        # (Slack has the fifth call before the bot has its answer and logs it: both waited for.)
        def logged() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.name == "bot.outbound.membership" and r.levelno == logging.ERROR
            ]

        errors = await eventually(
            lambda: (
                logged()
                if len(slack.emulator.calls("conversations.info")) == 5 and len(logged()) >= 2
                else None
            ),
            what="every channel checked and both refusals logged",
            timeout=15,
        )
    assert len(errors) == 2
    assert any(
        OUTSIDE in e and "route 2: alertname" in e and "not_in_channel" in e and "/invite" in e
        for e in errors
    )
    assert any("C0GONEQ" in e and "is_archived" in e and "unarchive it" in e for e in errors)
    assert not any(channel in " ".join(errors) for channel in (ROCM, PAGE, CHANNEL))


async def test_each_team_channel_gets_its_own_incidents_from_either_replica(
    settings_for: Any, slack: Slack, channels: None, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(slack_routes=json.dumps(ROUTES))
    rocm, paged = as_group("rocm", team="rocm"), as_group("paged", severity="page")
    default, lost = as_group("other"), as_group("lost", alertname="Lost runners")
    caplog.set_level(logging.ERROR, logger="bot.outbound")
    async with run_bot(settings) as first, run_bot(settings) as second:
        answers = await asyncio.gather(
            *(
                bot.send("grafana", p)
                for p in (rocm, paged, default, lost)
                for bot in (first, second)
            )
        )
        assert {a.status_code for a in answers} == {202}

        def roots(channel: str) -> list[Any]:
            return slack.emulator.channel_messages(channel)

        await eventually(
            lambda: all(len(roots(c)) == 1 for c in (ROCM, PAGE, CHANNEL)),
            what="a root in each team channel",
            timeout=20,
        )
        # Each in its own channel, once, although both replicas took every notification.
        placed = {}
        for channel in (ROCM, PAGE, CHANNEL):
            ts = roots(channel)[0].ts
            # The sender records the root's ts once Slack answered the post: shortly after the
            # message shows.
            incident_id = await eventually(
                lambda c=channel, t=ts: first.bot.core.incident_of_message(c, t),
                what=f"the root in {channel} recorded",
                timeout=10,
            )
            incident = (await first.bot.store.load(incident_id)).incident
            assert incident is not None
            placed[incident.group_key] = channel
        assert placed == {"rocm": ROCM, "paged": PAGE, "other": CHANNEL}

        # The route to a channel the app is not in: a clear error naming it, and a record.
        await eventually(
            lambda: any(
                r.name == "bot.outbound.messages"
                and OUTSIDE in r.getMessage()
                and "invite" in r.getMessage()
                for r in caplog.records
            ),
            what="the error naming the channel",
            timeout=20,
        )
        # Recorded; twice when the group's second copy (sent to the other replica) came after
        # the refusal: a notification of an incident without a root tries its root again.
        refused = await first.bot.redis.xrange(first.bot.store.keys.undeliverable)
        assert 1 <= len(refused) <= 2, refused
        assert {fields["error"] for _, fields in refused} == {"not_in_channel"}

        # `/queue` in the ROCm channel lists its incident, and says where the others are.
        before = len(slack.emulator.ephemerals(ROCM))
        response = await post_event(first.http, slash("", channel=ROCM))
        assert response.status_code == 200
        [answer] = await eventually(
            lambda: slack.emulator.ephemerals(ROCM)[before:], what="the answer", timeout=15
        )
        incidents = [line for line in answer.text.splitlines() if line.startswith("*#")]
        assert len(incidents) == 1
        assert "3 open in other channels" in answer.text
        assert f"<#{PAGE}>" in answer.text and f"<#{CHANNEL}>" in answer.text
