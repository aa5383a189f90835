"""The incident loop end to end: webhook, stream, incident, Slack thread, status, resolve."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from tests.support.payloads import fixture_json, refired
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
RESOLVED = "grafana/queue-alert-resolved.json"


def worse(payload: dict[str, Any], *, wait: float, queued: float) -> dict[str, Any]:
    """The same alert group re-notified with other numbers."""
    changed = copy.deepcopy(payload)
    values = changed["alerts"][0]["values"]
    values["max_queue_time_mins"] = wait
    values["max_queue_size"] = queued
    return changed


def all_text(message: Any) -> str:
    return message.text + json.dumps(message.blocks)


async def test_firing_opens_one_thread_with_the_numbers(
    running_bot: RunningBot, slack: Slack
) -> None:
    response = await running_bot.send("grafana", fixture_json(FIRING))
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "accepted"

    roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root message")
    assert len(roots) == 1
    root = all_text(roots[0])
    assert "Jobs queueing in autoscaled machines" in root
    assert "P2" in root
    assert "114" in root and "14" in root
    assert "https://hud.pytorch.org/metrics" in root
    action_ids = {
        element["action_id"]
        for block in roots[0].blocks
        if block["type"] == "actions"
        for element in block["elements"]
    }
    assert action_ids == {
        "incident_ack",
        "incident_silence",
        "incident_scale",
        "incident_diagnose",
        "incident_resolve",
    }


async def test_renotification_edits_the_root_in_place(
    running_bot: RunningBot, slack: Slack
) -> None:
    firing = fixture_json(FIRING)
    await running_bot.send("grafana", firing)
    await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root message")

    response = await running_bot.send("grafana", worse(firing, wait=171, queued=23))
    assert response.status_code == 202

    def edited() -> Any:
        roots = slack.emulator.channel_messages(CHANNEL)
        return roots if roots and "171" in all_text(roots[0]) else None

    roots = await eventually(edited, what="root edited with the new numbers")
    assert len(roots) == 1, "a re-notification must never open a second thread"
    assert roots[0].edits >= 1


async def test_resolved_posts_a_summary_and_marks_the_root(
    running_bot: RunningBot, slack: Slack
) -> None:
    await running_bot.send("grafana", fixture_json(FIRING))
    roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    await running_bot.send("grafana", fixture_json(RESOLVED))

    def summary() -> Any:
        thread = slack.emulator.thread(CHANNEL, roots[0].ts)
        return thread if len(thread) >= 2 and "resolved" in all_text(thread[-1]).lower() else None

    thread = await eventually(summary, what="summary reply")

    # Replies and root edits go out on their own budgets: the root turns green moments apart.
    def resolved_root() -> Any:
        [root] = slack.emulator.channel_messages(CHANNEL)
        return root if "resolved" in all_text(root).lower() else None

    root = await eventually(resolved_root, what="root marked resolved")
    actions = [block for block in root.blocks if block["type"] == "actions"]
    assert actions == [], "a resolved incident offers no actions"
    assert "114" in all_text(thread[-1]), "the summary reports the peak wait"
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1


async def test_firing_again_soon_after_resolving_reopens_the_same_thread(
    running_bot: RunningBot, slack: Slack
) -> None:
    await running_bot.send("grafana", fixture_json(FIRING))
    roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    await running_bot.send("grafana", fixture_json(RESOLVED))
    await eventually(lambda: len(slack.emulator.thread(CHANNEL, roots[0].ts)) >= 2, what="summary")
    await running_bot.send("grafana", refired(fixture_json(FIRING)))

    def reopened() -> Any:
        root = slack.emulator.channel_messages(CHANNEL)[0]
        return "resolved" not in root.text.lower() and any(
            b["type"] == "actions" for b in root.blocks
        )

    await eventually(reopened, what="root back to firing")
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1
    await eventually(
        lambda: any(
            "reopen" in all_text(m).lower() for m in slack.emulator.thread(CHANNEL, roots[0].ts)
        ),
        what="the reopen reply (it may follow the root's edit)",
    )


async def test_status_posts_periodically_and_stops_on_resolve(
    settings_for: Any, slack: Slack
) -> None:
    async with run_bot(settings_for(status_interval_seconds=1)) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

        def statuses_shown(root: Any = None) -> int:
            # The alert's numbers do not change: later statuses edit the first one in place.
            thread = slack.emulator.thread(CHANNEL, (root or roots[0]).ts)[1:]
            return sum(1 + m.edits for m in thread if "status" in all_text(m).lower())

        await eventually(lambda: statuses_shown() >= 2, what="two statuses", timeout=8)
        await running.send("grafana", fixture_json(RESOLVED))
        await eventually(
            lambda: "resolved" in slack.emulator.channel_messages(CHANNEL)[0].text.lower(),
            what="resolved",
        )
        settled = statuses_shown()
        incident_id = await running.bot.core.incident_of_message(CHANNEL, roots[0].ts)
        assert incident_id is not None
        assert await running.bot.store.status_due.due_at(incident_id) is None
        # Absence takes time to show: another incident, opened now, gets two statuses (two
        # intervals of the scheduler's work) while the resolved one gets none.
        witness = copy.deepcopy(fixture_json(FIRING))
        witness["groupKey"] = f"{witness['groupKey']}/witness"
        await running.send("grafana", witness)
        second = await eventually(
            lambda: (
                len(slack.emulator.channel_messages(CHANNEL)) == 2
                and slack.emulator.channel_messages(CHANNEL)[1]
            ),
            what="the witness's root",
        )
        await eventually(lambda: statuses_shown(second) >= 2, what="two witness statuses")
        assert statuses_shown() == settled


async def test_two_replicas_open_one_thread(settings_for: Any, slack: Slack) -> None:
    firing = fixture_json(FIRING)
    async with run_bot(settings_for()) as first, run_bot(settings_for()) as second:
        responses = await asyncio.gather(
            first.send("grafana", firing),
            second.send("grafana", firing),
            first.send("grafana", worse(firing, wait=120, queued=15)),
            second.send("grafana", worse(firing, wait=130, queued=16)),
        )
        assert [r.status_code for r in responses] == [202] * 4

        async def drained() -> bool:
            return await first.bot.stream.backlog() == 0

        await eventually(drained, what="every notification processed")
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
        assert len(roots) == 1


async def test_a_burst_of_renotifications_becomes_a_few_edits_showing_the_latest(
    settings_for: Any, slack: Slack
) -> None:
    # An HA Grafana pair or a flapping rule can send many notifications a second: Slack must see
    # a handful of edits ending on the latest numbers, and a new group must not queue behind them.
    firing = fixture_json(FIRING)
    async with run_bot(settings_for(root_edit_interval_ms=500)) as running:
        await running.send("grafana", firing)
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
        for wait in range(120, 150):
            await running.send("grafana", worse(firing, wait=wait, queued=20))
        other = copy.deepcopy(firing)
        other["groupKey"] = "another-group"
        await running.send("grafana", other)

        await eventually(
            lambda: len(slack.emulator.channel_messages(CHANNEL)) == 2,
            what="the other group's thread",
            timeout=5,
        )

        def latest() -> bool:
            root = slack.emulator.thread(CHANNEL, roots[0].ts)[0]
            return "149" in all_text(root)

        await eventually(latest, what="root shows the last numbers")
        edits = slack.emulator.thread(CHANNEL, roots[0].ts)[0].edits
        assert 1 <= edits <= 10, f"{edits} edits for 30 notifications"


async def test_grafana_test_button_shows_once_and_is_never_followed_up(
    settings_for: Any, slack: Slack
) -> None:
    async with run_bot(settings_for(status_interval_seconds=1)) as running:
        await running.send("grafana", fixture_json("grafana/test-notification.json"))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
        root = all_text(roots[0])
        assert "TEST" in root and "test notification" in root.lower()
        assert not [b for b in roots[0].blocks if b["type"] == "actions"]
        # Slack shows the post before the sender records its answer: wait for the record.
        incident_id = await eventually(
            lambda: running.bot.core.incident_of_message(CHANNEL, roots[0].ts),
            what="the root's thread recorded",
        )
        assert await running.bot.store.status_due.due_at(incident_id) is None
        assert await running.bot.core.open_incidents() == [], "/queue ack must not pick a test"


async def test_the_bot_posts_over_one_kept_alive_connection(
    running_bot: RunningBot, slack: Slack
) -> None:
    """Slack sees one connection, not one per call: against slack.com every new connection is
    a TLS handshake in front of the post."""
    for n in range(3):
        payload = fixture_json(FIRING)
        payload["groupKey"] = f'{{}}:{{alertname="queue-{n}"}}'
        assert (await running_bot.send("grafana", payload)).status_code == 202

    await eventually(lambda: len(slack.emulator.channel_messages(CHANNEL)) == 3, what="three roots")
    posts = [c for c in slack.emulator.calls("chat.postMessage") if c.ok]
    assert len(posts) == 3
    assert all(call.client for call in posts)
    assert len({call.client for call in posts}) == 1
