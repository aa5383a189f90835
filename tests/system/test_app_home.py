"""The App Home end to end: two replicas, incidents in two channels, and people opening the Home
tab as Slack tells the app (`app_home_opened`, a signed Events API request to /slack/events, or
the page's Home tab through the emulator). Each person's Home lists every open incident with its
channel, owner and thread; a change of state reaches every open Home once (across replicas); time
passing and the numbers moving within `HOME_NUMBERS_SECONDS` publish nothing; every publish is one
Slack takes (100 blocks, its text limits) in views.publish's turn; a failed publish never fails
the event's answer and is made by a later round."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sandbox.slack_interactions import Person, app_home_opened, event_callback
from tests.support.payloads import as_group
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, SIGNING_SECRET, Slack, click, signed

TEAM = "C0TEAMQ"
ROUTES = [{"match": ["team=rocm"], "channel": TEAM}]
ALICE, BOB = Person("U0ALICE", "alice"), Person("U0BOB", "bob")


async def open_home(running: RunningBot, person: Person, slack: Slack) -> httpx.Response:
    """Slack's `app_home_opened` for `person`'s Home tab, with the view they see if any."""
    event = app_home_opened(person, tab="home", view=slack.emulator.home(person.id))
    body = json.dumps(event_callback(event))
    headers = {**signed(body), "Content-Type": "application/json"}
    return await running.http.post("/slack/events", content=body, headers=headers)


def home_text(slack: Slack, user: str) -> str:
    return json.dumps(slack.emulator.home(user) or {}, ensure_ascii=False)


def publishes(slack: Slack, user: str | None = None) -> list[Any]:
    calls = slack.emulator.calls("views.publish")
    return [c for c in calls if user is None or c.params.get("user_id") == user]


@pytest.fixture
async def replicas(settings_for: Any, slack: Slack) -> AsyncIterator[tuple[RunningBot, RunningBot]]:
    slack.emulator.add_channel(TEAM)
    settings = settings_for(slack_routes=json.dumps(ROUTES), home_numbers_seconds=3600)
    async with run_bot(settings) as first, run_bot(settings) as second:
        yield first, second


async def rounds_ended(*running: RunningBot) -> None:
    """Two more rounds of the leader's Home ended (the second began after this was asked): a
    publish still to come would have been made by then. Only the leader runs rounds."""
    [leader] = [r for r in running if r.bot.leadership.fence.held is not None]
    home = leader.bot.home
    assert home is not None
    started = home.rounds
    await eventually(
        lambda: home.rounds >= started + 2, what="two more rounds of the leader", timeout=30
    )


async def two_incidents(running: RunningBot, slack: Slack) -> Any:
    """The default alert in CHANNEL, the ROCm team's in TEAM; the default one's root."""
    for payload in (as_group("default"), as_group("rocm", team="rocm")):
        assert (await running.send("grafana", payload)).status_code == 202
    await eventually(
        lambda: all(slack.emulator.channel_messages(c) for c in (CHANNEL, TEAM)),
        what="a root in each channel",
        timeout=20,
    )
    root = slack.emulator.channel_messages(CHANNEL)[0]
    # The roots are recorded (and their permalinks known) once Slack answered their posts.
    for channel in (CHANNEL, TEAM):
        ts = slack.emulator.channel_messages(channel)[0].ts
        await eventually(
            lambda c=channel, t=ts: running.bot.core.incident_of_message(c, t),
            what=f"the root in {channel} recorded",
        )
    return root


async def test_a_home_lists_both_channels_incidents_and_each_change_reaches_every_home_once(
    replicas: tuple[RunningBot, RunningBot], slack: Slack
) -> None:
    first, second = replicas
    root = await two_incidents(first, slack)

    started = time.monotonic()
    answers = [await open_home(first, ALICE, slack), await open_home(second, BOB, slack)]
    assert [a.status_code for a in answers] == [200, 200]
    assert time.monotonic() - started < 2, "acknowledged before the work"
    for person in (ALICE, BOB):
        await eventually(
            lambda p=person: (
                "#1 · " in home_text(slack, p.id) and "#2 · " in home_text(slack, p.id)
            ),
            what=f"{person.name}'s Home with both incidents",
            timeout=15,
        )
    text = home_text(slack, ALICE.id)
    assert f"in <#{CHANNEL}>" in text and f"in <#{TEAM}>" in text
    assert f"/archives/{CHANNEL}/p" in text and f"/archives/{TEAM}/p" in text, "thread links"
    assert "nobody has acknowledged it" in text
    assert "<@" not in text, "names, never mentions"
    # Until something changes, the rounds of both replicas publish nothing more.
    await rounds_ended(first, second)
    before = len(publishes(slack))
    assert before == 2

    assert (await click(first, root, "incident_ack")).status_code == 200
    for person in (ALICE, BOB):
        await eventually(
            lambda p=person: "*alice* is on it" in home_text(slack, p.id),
            what=f"{person.name}'s Home showing the owner",
            timeout=15,
        )
    await rounds_ended(first, second)
    after = publishes(slack)[before:]
    assert sorted(c.params["user_id"] for c in after) == [ALICE.id, BOB.id], "once each"
    assert all(c.ok for c in publishes(slack)), [c.refusal for c in publishes(slack)]

    # Opening the Home again, when it shows all there is, publishes nothing.
    await open_home(second, ALICE, slack)
    await rounds_ended(first, second)
    assert len(publishes(slack)) == before + 2


async def test_a_failed_publish_never_fails_the_answer_and_a_later_round_makes_it(
    replicas: tuple[RunningBot, RunningBot], slack: Slack
) -> None:
    first, _ = replicas
    await two_incidents(first, slack)
    slack.emulator.fail_next("views.publish", status=500)
    slack.emulator.fail_next("views.publish", status=429, retry_after=1)

    answer = await open_home(first, ALICE, slack)
    assert answer.status_code == 200
    await eventually(
        lambda: "#2 · " in home_text(slack, ALICE.id), what="the Home published", timeout=15
    )
    calls = publishes(slack, ALICE.id)
    assert [c.status for c in calls[:2]] == [500, 429]
    # The 429's Retry-After was waited out, on every replica.
    assert calls[2].at - calls[1].at >= 0.9


async def test_the_page_opens_the_home_tab_and_sees_what_the_bot_published(
    replicas: tuple[RunningBot, RunningBot], slack: Slack
) -> None:
    first, _ = replicas
    await two_incidents(first, slack)
    slack.emulator.connect_app(f"{first.url}/slack/events", SIGNING_SECRET)
    async with httpx.AsyncClient(base_url=slack.server.url) as page:
        told = (await page.post("/_page/home", json={})).json()
        assert told == {"ok": True}
        home = await eventually(
            lambda: slack.emulator.home(ALICE.id), what="alice's Home", timeout=15
        )
        state = (await page.get("/_page/state")).json()
    assert state["home"]["id"] == home["id"] and state["home"]["type"] == "home"
    shown = json.dumps(state["home"], ensure_ascii=False)
    assert "#1 · " in shown and "#2 · " in shown
