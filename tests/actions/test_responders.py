"""Acting on an incident makes you one of its responders, named on its root; acknowledging
makes you its owner. What is asserted is the root a channel sees after each action."""

from __future__ import annotations

import json
from collections.abc import Callable

from redis.asyncio import Redis

from bot.actions.flow import Actor
from bot.config import Settings
from bot.render.home import HomeState, Listed, render_home
from bot.render.replies import summaries
from bot.render.root import render_root
from bot.storage.incident_store import IncidentStore
from tests.support.cores import action_core
from tests.support.running import RunningBot, eventually, open_incident, run_bot
from tests.support.slack import CHANNEL, Slack, click, post_event, slash
from tests.support.store import PREFIX, T0, opened


def root_saying(slack: Slack, ts: str, words: str) -> str | None:
    """The root's blocks as JSON once they say `words`."""
    root = next(m for m in slack.emulator.channel_messages(CHANNEL) if m.ts == ts)
    text = json.dumps(root.blocks, ensure_ascii=False)
    return text if words in text else None


async def test_with_ack_on_action_off_who_ran_diagnostics_is_a_responder_until_they_acknowledge(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for(ack_on_action=False)) as running_bot:
        await _responder_until_they_acknowledge(running_bot, slack)


async def _responder_until_they_acknowledge(running_bot: RunningBot, slack: Slack) -> None:
    root = await open_incident(running_bot, slack)
    await post_event(running_bot.http, slash("diagnose 1"))
    shown = await eventually(
        lambda: root_saying(slack, root.ts, "Responders:"),
        what="the root names alice as a responder",
    )
    assert "not acknowledged · ID *1*\\nResponders: *alice*" in shown
    assert "🩺 *Likely cause:* not determined" in shown
    assert "*Latest*\\n• <!date^" in shown and "Diagnostics: likely cause not determined" in shown
    assert "<@U0ALICE>" not in shown, "a routine edit pings nobody"

    await click(running_bot, root, "incident_ack")
    owned = await eventually(
        lambda: root_saying(slack, root.ts, "acknowledged by"),
        what="the root names alice as the owner",
    )
    assert "acknowledged by <@U0ALICE>" in owned
    assert "Responders:" not in owned, "the owner is not listed again"


async def test_the_owner_taken_over_from_stays_a_responder(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    core = action_core(redis, store)
    assert (await core.diagnosing.diagnose(Actor("U0BOB", "bob"), "1")).ok
    assert (await core.acknowledge(Actor("U0ALICE", "alice"), "1")).ok

    def status() -> str:
        return str(render_root(incident, now=T0).blocks[1]["text"]["text"])

    incident = await store.get("1")
    assert incident is not None
    assert status().endswith("acknowledged by <@U0ALICE> · ID *1*\nResponders: *bob*")
    assert (await core.acknowledge(Actor("U0BOB", "bob"), "1")).ok
    incident = await store.get("1")
    assert incident is not None
    assert status().endswith("acknowledged by <@U0BOB> · ID *1*\nResponders: *alice*")


async def test_the_first_act_acknowledges_it_and_every_surface_names_who(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    await post_event(running_bot.http, slash("diagnose 1"))
    shown = await eventually(
        lambda: root_saying(slack, root.ts, "acknowledged by"),
        what="the root names alice as the owner",
    )
    assert "acknowledged by <@U0ALICE> · ID *1*" in shown
    assert "not acknowledged" not in shown and "Responders:" not in shown

    store = running_bot.bot.store
    incident = await store.get("1")
    assert incident is not None
    home = json.dumps(render_home(HomeState(incidents=(Listed(incident),)), T0), ensure_ascii=False)
    assert "*alice* is on it" in home and "nobody has acknowledged it" not in home
    summary, _ = summaries(incident, await store.events("1"), now=T0)
    said = json.dumps(summary.blocks, ensure_ascii=False)
    assert "· Acknowledged (ran diagnostics) · by *alice*" in said
    assert "Actions taken: *1*, by *alice*" in said, "the acknowledgement is part of the act"


async def test_an_act_leaves_someone_elses_acknowledgement_alone(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    await opened(store)
    core = action_core(redis, store)
    assert (await core.acknowledge(Actor("U0BOB", "bob"), "1")).ok
    assert (await core.diagnosing.diagnose(Actor("U0ALICE", "alice"), "1")).ok
    incident = await store.get("1")
    assert incident is not None and incident.acknowledged.name == "bob"
    said = json.dumps(
        summaries(incident, await store.events("1"), now=T0)[0].blocks, ensure_ascii=False
    )
    assert "Acknowledged · by *bob*" in said and "Acknowledged (" not in said
