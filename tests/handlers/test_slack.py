"""What a responder sees when Slack delivers their click or command to `/slack/events`."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from typing import Any

import httpx

from sandbox.transcript import mrkdwn_to_text
from tests.support.payloads import fixture_json, stating_thresholds
from tests.support.running import RunningBot, eventually, open_incident, run_bot
from tests.support.slack import (
    CHANNEL,
    USER,
    Slack,
    block_action,
    button_value,
    click,
    ephemeral_texts,
    post_event,
    signed,
    slash,
)


async def test_acknowledge_button_marks_the_root_with_the_owner(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    response = await click(running_bot, root, "incident_ack")
    assert response.status_code == 200

    def acknowledged() -> bool:
        current = slack.emulator.channel_messages(CHANNEL)[0]
        return (
            f"<@{USER}>" in json.dumps(current.blocks)
            and "acknowledged" in json.dumps(current.blocks).lower()
        )

    await eventually(acknowledged, what="root shows who acknowledged")
    await eventually(lambda: any("acknowledged" in t for t in ephemeral_texts(slack)), what="reply")
    # The thread reply goes out on the posts' budget, the root edit on the edits': either first.
    await eventually(
        lambda: any(
            f"<@{USER}>" in m.text + json.dumps(m.blocks)
            for m in slack.emulator.thread(CHANNEL, root.ts)[1:]
        ),
        what="the acknowledge reply mentioning the new owner",
    )


async def test_resolve_while_jobs_still_queue_asks_once_in_its_dialog_then_resolves(
    running_bot: RunningBot, slack: Slack
) -> None:
    """The root's Resolve asks once: its confirm dialog says what is still live; confirmed (the
    click Slack sends), it resolves, with no second question."""
    await running_bot.send("grafana", stating_thresholds(queued=11, size=0, wait_mins=180))
    root = (await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root"))[0]
    [resolve] = [
        e
        for b in root.blocks
        for e in b.get("elements", [])
        if e.get("action_id") == "incident_resolve"
    ]
    assert resolve["confirm"]["text"]["text"] == (
        "Still live: 11 jobs still queued (the alert's threshold is 0), and the alert is still "
        "firing. Resolving anyway closes the incident and stops its status updates. If the alert "
        "fires again, it reopens."
    )
    assert resolve["confirm"]["confirm"]["text"] == "Resolve anyway"

    assert (await click(running_bot, root, "incident_resolve")).status_code == 200
    await eventually(
        lambda: "resolved" in slack.emulator.channel_messages(CHANNEL)[0].text.lower(),
        what="root resolved",
    )
    thread = await eventually(
        lambda: [
            m
            for m in slack.emulator.thread(CHANNEL, root.ts)[1:]
            if "alice" in m.text + json.dumps(m.blocks)
        ],
        what="summary naming who resolved",
    )
    said = json.dumps([m.blocks for m in thread], ensure_ascii=False)
    assert "Resolved manually with 11 jobs still queued" in said, "the thread says what was left"
    assert not any("<@" in m.text + json.dumps(m.blocks) for m in thread), "a summary pings nobody"
    await eventually(
        lambda: "You resolved incident 1 with 11 jobs still queued." in ephemeral_texts(slack),
        what="the answer",
    )
    assert not any("Resolve it anyway?" in t for t in ephemeral_texts(slack)), "asked once"
    # Grafana's resolved notification arriving afterwards changes nothing and posts nothing twice.
    await running_bot.send("grafana", fixture_json("grafana/queue-alert-resolved.json"))
    await eventually(lambda: _drained(running_bot), what="notification processed")
    summaries = [m for m in slack.emulator.thread(CHANNEL, root.ts) if "summary" in m.text.lower()]
    assert len(summaries) <= 1


async def test_queue_resolve_while_jobs_still_queue_asks_once_then_its_button_resolves(
    running_bot: RunningBot, slack: Slack
) -> None:
    """`/queue resolve` has no dialog: it asks once, with what is still live, and *Resolve
    anyway* under the question resolves."""
    await running_bot.send("grafana", stating_thresholds(queued=11, size=0, wait_mins=180))
    await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    assert (await post_event(running_bot.http, slash("resolve"))).status_code == 200

    [asked] = await eventually(lambda: slack.emulator.ephemerals(CHANNEL), what="the question")
    assert mrkdwn_to_text(asked.text) == (
        "Incident 1 is still live: 11 jobs still queued (the alert's threshold is 0) and the "
        "alert is still firing. Resolve it anyway? The button below, or "
        "`/queue resolve 1 anyway`."
    )
    assert "resolved" not in slack.emulator.channel_messages(CHANNEL)[0].text.lower()

    anyway = {
        "type": "button",
        "action_id": "incident_resolve_anyway",
        "value": button_value(asked, "incident_resolve_anyway"),
    }
    body = block_action(anyway, message_ts=asked.ts, ephemeral=True)
    assert (await post_event(running_bot.http, body)).status_code == 200
    await eventually(
        lambda: "resolved" in slack.emulator.channel_messages(CHANNEL)[0].text.lower(),
        what="root resolved",
    )


async def _drained(running: RunningBot) -> bool:
    return await running.bot.stream.backlog() == 0


async def test_unsigned_or_stale_requests_are_refused(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    action = {
        "type": "button",
        "action_id": "incident_resolve",
        "value": button_value(root, "incident_resolve"),
    }
    body = block_action(action, message_ts=root.ts)
    forged = await post_event(running_bot.http, body, secret="not-the-secret")
    stale = await post_event(running_bot.http, body, at=time.time() - 600)
    assert forged.status_code == 401
    assert stale.status_code == 401
    not_utf8 = await running_bot.http.post(
        "/slack/events", content=b"payload=\xff\xfe", headers=signed("x")
    )
    assert not_utf8.status_code == 401  # signed for another body
    assert "resolved" not in slack.emulator.channel_messages(CHANNEL)[0].text.lower()


async def test_a_signed_click_that_names_no_user_does_nothing_and_says_so(
    running_bot: RunningBot, slack: Slack
) -> None:
    # Slack names the user of every interaction; one that does not (a hand-made request with
    # the secret) must not act anonymously.
    root = await open_incident(running_bot, slack)
    action = {
        "type": "button",
        "action_id": "incident_ack",
        "value": button_value(root, "incident_ack"),
    }
    payload = json.loads(
        urllib.parse.parse_qs(block_action(action, message_ts=root.ts))["payload"][0]
    )
    del payload["user"]
    answer = await post_event(
        running_bot.http, urllib.parse.urlencode({"payload": json.dumps(payload)})
    )
    assert answer.status_code == 200
    said = await eventually(
        lambda: [
            c for c in slack.emulator.calls() if "did not say who asked" in json.dumps(c.params)
        ],
        what="the refusal said",
    )
    assert said
    assert "Acknowledged" not in json.dumps(slack.emulator.channel_messages(CHANNEL)[0].blocks)


async def test_queue_command_shows_status_and_acts_on_the_latest_incident(
    running_bot: RunningBot, slack: Slack
) -> None:
    root = await open_incident(running_bot, slack)
    response = await post_event(running_bot.http, slash(""))
    assert response.status_code == 200
    await eventually(
        lambda: any("Jobs queueing" in t and "114" in t for t in ephemeral_texts(slack)),
        what="status overview",
    )
    await post_event(running_bot.http, slash("ack"))
    await eventually(
        lambda: f"<@{USER}>" in json.dumps(slack.emulator.channel_messages(CHANNEL)[0].blocks),
        what="acknowledged through the command",
    )
    await post_event(running_bot.http, slash("silence forever"))
    await eventually(
        lambda: any("not a duration" in t for t in ephemeral_texts(slack)), what="usage error"
    )
    await post_event(running_bot.http, slash("help"))
    await eventually(lambda: any("/queue scale" in t for t in ephemeral_texts(slack)), what="help")
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1
    assert slack.emulator.thread(CHANNEL, root.ts)


async def test_help_and_usage_show_their_placeholders_in_slack(
    running_bot: RunningBot, slack: Slack
) -> None:
    """`<duration>` unescaped is a link to nowhere that Slack does not show: the help read
    "/queue silence  [ID]". What Slack shows of the answers (`mrkdwn_to_text`) keeps them."""

    def shown() -> list[str]:
        return [mrkdwn_to_text(t) for t in ephemeral_texts(slack)]

    await post_event(running_bot.http, slash("help"))
    [help_shown] = await eventually(shown, what="the help")
    await post_event(running_bot.http, slash("scale"))
    usage_shown = (await eventually(lambda: shown()[1:], what="the usage"))[0]
    assert "/queue silence <duration> [ID]" in help_shown
    assert "/queue scale <runner-type> <+N> [ID] [max] [keep]" in help_shown
    assert usage_shown.startswith("usage: `/queue scale <runner-type> <+N> [ID] [max] [keep]`")


async def test_an_oversized_request_is_refused_before_it_is_read(
    running_bot: RunningBot, slack: Slack
) -> None:
    body = "payload=" + "x" * (2 * 1024 * 1024)
    response = await post_event(running_bot.http, body)
    assert response.status_code == 413


async def test_after_an_acknowledge_only_its_own_reply_mentions_the_owner(
    settings_for: Any, slack: Slack
) -> None:
    """Status replies and the summary name the owner; only the acknowledge reply pings them."""
    async with run_bot(settings_for(status_interval_seconds=1)) as running:
        root = await open_incident(running, slack)
        await click(running, root, "incident_ack")

        def replies() -> list[Any]:
            return slack.emulator.thread(CHANNEL, root.ts)[1:]

        def statuses_naming_the_owner() -> int:
            # A quiet status edits the previous one in place: count what the thread shows now.
            texts = [m.text + json.dumps(m.blocks) for m in replies()]
            return sum("Status update" in t and "acknowledged by" in t for t in texts)

        await eventually(
            lambda: statuses_naming_the_owner() >= 1, what="a status naming the owner", timeout=8
        )
        await running.send("grafana", fixture_json("grafana/queue-alert-resolved.json"))
        await eventually(
            lambda: any("resolved" in m.text for m in replies()[-1:]), what="the summary"
        )

    texts = [m.text + json.dumps(m.blocks) for m in replies()]
    mentioning = [t for t in texts if "<@" in t]
    assert len(mentioning) == 1 and "Acknowledged" in mentioning[0], mentioning
    assert sum("alice" in t for t in texts) >= 2, "later replies name the owner instead"


async def test_a_burst_of_clicks_at_once_is_each_answered_and_done(
    running_bot: RunningBot, slack: Slack
) -> None:
    """A crowd clicking at once (150 clicks in one moment) needs more Redis connections at once
    than a pool of 100 has: each click's work waits for a connection instead of failing."""
    root = await open_incident(running_bot, slack)
    clicks = 200
    action = {"type": "button", "action_id": "incident_ack"}
    action["value"] = button_value(root, "incident_ack")
    bodies = [block_action(action, message_ts=root.ts) for _ in range(clicks)]
    crowd = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=running_bot.http.base_url, limits=crowd) as http:
        responses = await asyncio.gather(*(post_event(http, body) for body in bodies))
    assert [r.status_code for r in responses] == [200] * clicks
    await eventually(
        lambda: len(ephemeral_texts(slack)) >= clicks, what="every click answered", timeout=30
    )
    answers = ephemeral_texts(slack)
    assert len(answers) == clicks
    assert answers.count("You acknowledged incident 1.") == 1, set(answers)
    assert answers.count("You already own incident 1.") == clicks - 1, set(answers)
