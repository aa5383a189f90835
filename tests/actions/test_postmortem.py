"""`/queue postmortem [ID]` and the summary's Postmortem button, through the real stack: Slack's
request to the bot, the action core on a real Redis, the channel's sender, and the Markdown file
as the Slack emulator shows it in the incident's thread."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from bot.actions.commands import HELP, Command, parse_command, run_command
from bot.actions.flow import Actor
from bot.domain.incident.incidents import resolve_manually
from bot.storage.incident_store import Commit, IncidentStore
from tests.support.cores import action_core
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, open_incident
from tests.support.slack import (
    CHANNEL,
    Slack,
    block_action,
    button_value,
    ephemeral_texts,
    post_event,
    slash,
)
from tests.support.store import opened

RESOLVED = "grafana/queue-alert-resolved.json"
ANSWER = "The postmortem is on its way to the thread."


def files_in_thread(slack: Slack, ts: str) -> list[tuple[str, str]]:
    """(file name, its text) of every file shared in the thread, oldest first."""
    shared = []
    for message in slack.emulator.thread(CHANNEL, ts)[1:]:
        for file in message.files:
            data = slack.emulator.file_bytes(file["id"]) or b""
            shared.append((str(file["name"]), data.decode()))
    return shared


async def queue_sent(running: RunningBot) -> bool:
    return await running.bot.redis.zcard(running.bot.queue.keys.posts(CHANNEL)) == 0


def summary_of(slack: Slack, ts: str) -> Any:
    """The thread's closing summary: the reply that carries the Postmortem button."""
    for message in slack.emulator.thread(CHANNEL, ts)[1:]:
        buttons = [e for b in message.blocks for e in b.get("elements", []) if "action_id" in e]
        if any(b["action_id"] == "incident_postmortem" for b in buttons):
            return message
    return None


def press(message: Any, action_id: str) -> str:
    """A click on one of `message`'s buttons, as Slack delivers it (a new `action_ts`)."""
    action = {"type": "button", "action_id": action_id, "value": button_value(message, action_id)}
    return block_action(action, message_ts=message.ts)


async def test_the_summarys_button_shares_the_write_up_in_the_thread_once(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    await running_bot.send("grafana", fixture_json(RESOLVED))
    summary = await eventually(lambda: summary_of(slack, root.ts), what="the summary's button")

    click = press(summary, "incident_postmortem")
    assert (await post_event(running_bot.http, click)).status_code == 200
    [(name, markdown)] = await eventually(
        lambda: files_in_thread(slack, root.ts), what="the postmortem file"
    )
    assert re.fullmatch(r"postmortem-1-[0-9]+\.md", name), name
    assert markdown.startswith("# Postmortem: incident 1 · P2 · Jobs queueing in autoscaled")
    assert "The incident is resolved." in markdown
    for heading in ("## Summary", "## Impact", "## Timeline", "## Diagnosis", "## Questions"):
        assert f"\n{heading}" in markdown, heading
    assert "| Alert resolved |" in markdown, "the timeline holds the alert's resolve"
    assert "Peak longest wait: **114 min**" in markdown, "the summary's peak, not another"
    assert "Jobs and workflows affected: not known (no jobs source is configured" in markdown
    assert "<@" not in markdown, "a file pings nobody"
    await eventually(lambda: ANSWER in ephemeral_texts(slack), what="the answer")

    # Slack delivering the same click again (a retry) shares nothing more.
    await post_event(running_bot.http, click)
    await eventually(lambda: ephemeral_texts(slack).count(ANSWER) == 2, what="the same answer")
    # What a second write-up would have left by now: its event, before the answer, and its file
    # once the channel's queue is sent.
    events = await running_bot.bot.store.events("1")
    assert [e.kind for e in events].count("postmortem") == 1, [e.kind for e in events]
    await eventually(lambda: queue_sent(running_bot), what="the channel's queue sent")
    assert len(files_in_thread(slack, root.ts)) == 1


async def test_queue_postmortem_drafts_an_open_incident_then_writes_up_the_resolved_one(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    await post_event(running_bot.http, slash("postmortem"))
    [(_, draft)] = await eventually(lambda: files_in_thread(slack, root.ts), what="the draft")
    assert "**Draft: the incident is still firing**" in draft
    assert "| Ended | still firing |" in draft

    await running_bot.send("grafana", fixture_json(RESOLVED))
    await eventually(lambda: summary_of(slack, root.ts), what="the summary")
    # None open any more: without an ID, the most recent incident, resolved.
    await post_event(running_bot.http, slash("postmortem"))
    shared = await eventually(
        lambda: (f := files_in_thread(slack, root.ts)) and len(f) == 2 and f,
        what="the write-up of the resolved incident",
    )
    final = shared[1][1]
    assert "The incident is resolved." in final
    assert "| Postmortem draft (still firing) | alice |" in final, "the draft is on the timeline"
    assert ephemeral_texts(slack).count(ANSWER) == 2


async def test_without_an_incident_the_command_says_so(redis: Redis) -> None:
    core = action_core(redis, IncidentStore(redis, "qp"))
    outcome = await run_command(core, Actor("U1", "al"), "postmortem")
    assert (outcome.ok, outcome.message) == (
        False,
        "No incident to write up yet. `/queue incidents` lists recent ones.",
    )
    unknown = await core.postmortem(Actor("U1", "al"), "99")
    assert not unknown.ok and "no longer known to queuepilot" in unknown.message


def test_the_command_is_parsed_and_in_the_help() -> None:
    assert parse_command("postmortem") == Command("postmortem")
    assert parse_command("postmortem #7") == Command("postmortem", incident_ref="7")
    assert parse_command("POSTMORTEM 12") == Command("postmortem", incident_ref="12")
    assert "*`/queue postmortem [ID]`*" in HELP


async def test_without_an_id_the_incident_that_resolved_last_is_written_up(redis: Redis) -> None:
    """Not the one changed last: writing incident 1 up again must not make it the default."""
    store = IncidentStore(redis, "qp")
    core = action_core(redis, store)
    # Within the retention of the incidents' index, which is by the time of the last change.
    start = datetime.now(UTC) - timedelta(hours=3)
    for incident_id, hours in (("1", 1), ("2", 2)):
        new = await opened(store, incident_id, opened_at=start)
        done = resolve_manually(new, by="U1", name="al", now=start + timedelta(hours=hours))
        assert await store.commit(Commit(done, version=1))
    assert (await core.postmortem(Actor("U1", "al"), "1")).ok  # incident 1 changed last now

    assert (await run_command(core, Actor("U1", "al"), "postmortem")).ok
    written = {
        incident_id: [e.kind for e in await store.events(incident_id)].count("postmortem")
        for incident_id in ("1", "2")
    }
    assert written == {"1": 1, "2": 1}
