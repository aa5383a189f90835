"""Silence and unsilence from Slack: real silences in a real Alertmanager, and Grafana's API.

Every request is signed as Slack signs it and goes through `/slack/events`; what is asserted is
what a responder sees (the root, the thread, their ephemeral answer) and what the backend holds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.render.replies import SILENCE_ENDED
from sandbox.serve import serve_in_thread
from sandbox.silence_api import FakeSilenceApi
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, recorded_root, run_bot
from tests.support.servers import Alertmanager
from tests.support.slack import (
    CHANNEL,
    Slack,
    block_action,
    click,
    ephemeral_texts,
    post_event,
    slash,
    thread_texts,
)

AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[Alertmanager]:
    # Only its silence API is used here: the receiver points nowhere.
    server = Alertmanager("http://127.0.0.1:9/nowhere")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def grafana() -> Iterator[FakeSilenceApi]:
    api = FakeSilenceApi()
    server = serve_in_thread(api.app)
    api.url = server.url  # type: ignore[attr-defined]
    yield api
    if api.hanging is not None:
        api.hanging.set()
    server.stop()


def am_settings(settings_for: Any, alertmanager: Alertmanager, **extra: Any) -> Any:
    return settings_for(silence_backend="alertmanager", alertmanager_url=alertmanager.url, **extra)


def grafana_settings(settings_for: Any, grafana: FakeSilenceApi, **extra: Any) -> Any:
    values = {
        "silence_backend": "grafana",
        "grafana_url": grafana.url,  # type: ignore[attr-defined]
        "grafana_token": grafana.token,
    }
    return settings_for(**{**values, **extra})


async def open_am_incident(running: RunningBot, slack: Slack, *, group: str = "") -> Any:
    payload = fixture_json(AM_FIRING)
    if group:
        payload["groupKey"] = f'{{}}:{{alertname="{group}"}}'
        payload["groupLabels"] = {"alertname": group}
        payload["commonLabels"]["alertname"] = group
        for alert in payload["alerts"]:
            alert["labels"]["alertname"] = group
    assert (await running.send("alertmanager", payload)).status_code == 202
    return await recorded_root(running, slack, last=True)


def root_now(slack: Slack, ts: str) -> Any:
    return next(m for m in slack.emulator.channel_messages(CHANNEL) if m.ts == ts)


def action_ids(message: Any) -> set[str]:
    return {
        element.get("action_id")
        for block in message.blocks
        for element in block.get("elements", [])
        if isinstance(element, dict)
    }


async def choose_silence(
    running: RunningBot, root: Any, seconds: int, *, keep: bool = False
) -> httpx.Response:
    value = f"{seconds}:keep" if keep else str(seconds)
    action = {
        "type": "static_select",
        "action_id": "incident_silence",
        "selected_option": {"text": {"type": "plain_text", "text": "x"}, "value": value},
    }
    return await post_event(running.http, block_action(action, message_ts=root.ts))


def am_silences(alertmanager: Alertmanager) -> list[dict[str, Any]]:
    return httpx.get(f"{alertmanager.url}/api/v2/silences", timeout=5).json()


def am_silence(alertmanager: Alertmanager, silence_id: str) -> dict[str, Any]:
    return httpx.get(f"{alertmanager.url}/api/v2/silence/{silence_id}", timeout=5).json()


def am_alert(name: str, runner: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "runner_type": runner, "priority": "P2"},
        "annotations": {"summary": "queue"},
        "startsAt": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
    }


@pytest.mark.slow
async def test_silence_select_makes_a_silence_of_this_group_only_and_unsilence_expires_it(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager
) -> None:
    group = f"RunnerQueueTimeHigh{time.time_ns()}"
    # Alertmanager holds an alert of this group and one of another: only the first is silenced.
    alertmanager.post_alerts([am_alert(group, "linux.2xlarge"), am_alert("DiskFull", "x")])
    async with run_bot(am_settings(settings_for, alertmanager)) as running:
        root = await open_am_incident(running, slack, group=group)
        started = datetime.now(UTC)
        response = await choose_silence(running, root, 3600)
        assert response.status_code == 200

        shown = await eventually(
            lambda: "silenced until" in json.dumps(root_now(slack, root.ts).blocks), what="root"
        )
        assert shown
        after = root_now(slack, root.ts)
        assert "incident_unsilence" in action_ids(after), "the select became Remove silence"
        assert "incident_silence" not in action_ids(after)
        await eventually(
            lambda: any("You silenced incident" in t for t in ephemeral_texts(slack)),
            what="the clicker's answer",
        )
        assert "Silenced for 1 h in Alertmanager" in json.dumps(after.blocks), "latest actions"

        mine = [s for s in am_silences(alertmanager) if s["createdBy"] == "alice"]
        mine = [s for s in mine if s["status"]["state"] == "active"]
        assert len(mine) == 1
        silence = mine[0]
        assert silence["matchers"] == [
            {"name": "alertname", "value": group, "isRegex": False, "isEqual": True}
        ]
        ends = datetime.fromisoformat(silence["endsAt"].replace("Z", "+00:00"))
        assert timedelta(minutes=59) < ends - started < timedelta(minutes=61)
        assert "queuepilot incident #1" in silence["comment"]

        def silenced_by() -> dict[str, list[str]]:
            alerts = httpx.get(f"{alertmanager.url}/api/v2/alerts", timeout=5).json()
            return {a["labels"]["alertname"]: a["status"]["silencedBy"] for a in alerts}

        await eventually(lambda: silenced_by().get(group) == [silence["id"]], what="silenced")
        assert silenced_by().get("DiskFull") == [], "another group is not silenced"

        assert (await click(running, after, "incident_unsilence")).status_code == 200
        await eventually(
            lambda: am_silence(alertmanager, silence["id"])["status"]["state"] == "expired",
            what="silence expired in Alertmanager",
        )
        await eventually(
            lambda: "incident_silence" in action_ids(root_now(slack, root.ts)), what="select back"
        )
        assert "silenced until" not in json.dumps(root_now(slack, root.ts).blocks)
        replies = await eventually(
            lambda: (
                [t for t in thread_texts(slack, root.ts) if "Silence removed" in t]
                and thread_texts(slack, root.ts)
            ),
            what="the unsilence's reply",
        )
        [silenced] = [t for t in replies if "Silenced for" in t]
        assert "Silenced for 1 h in Alertmanager until " in silenced, "the thread records it"
        assert "<@" not in silenced, "naming alice, pinging nobody"


@pytest.mark.slow
async def test_queue_silence_and_unsilence_commands(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager
) -> None:
    async with run_bot(am_settings(settings_for, alertmanager)) as running:
        root = await open_am_incident(running, slack, group=f"Cmd{time.time_ns()}")
        assert (await post_event(running.http, slash("silence 2h"))).status_code == 200
        await eventually(
            lambda: "silenced until" in json.dumps(root_now(slack, root.ts).blocks), what="root"
        )
        incident = await running.bot.store.get("1")
        assert incident is not None and incident.silence is not None
        silence = am_silence(alertmanager, incident.silence.silence_id)
        ends = datetime.fromisoformat(silence["endsAt"].replace("Z", "+00:00"))
        starts = datetime.fromisoformat(silence["startsAt"].replace("Z", "+00:00"))
        assert abs((ends - starts) - timedelta(hours=2)) < timedelta(seconds=5)

        await post_event(running.http, slash("silence 1h 1"))
        await eventually(
            lambda: any("already silenced" in t for t in ephemeral_texts(slack)),
            what="a second silence refused",
        )
        await post_event(running.http, slash("unsilence"))
        await eventually(
            lambda: am_silence(alertmanager, silence["id"])["status"]["state"] == "expired",
            what="expired",
        )
        await eventually(
            lambda: any("removed incident 1's silence" in t for t in ephemeral_texts(slack)),
            what="answer",
        )


@pytest.mark.slow
async def test_a_silence_expired_in_alertmanager_is_noticed_and_shown(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager
) -> None:
    settings = am_settings(settings_for, alertmanager, silence_check_seconds=5)
    async with run_bot(settings) as running:
        root = await open_am_incident(running, slack, group=f"Behind{time.time_ns()}")
        await choose_silence(running, root, 1800)
        incident = await eventually(lambda: _silenced(running), what="silence recorded", timeout=10)
        silence_id = incident.silence.silence_id
        url = f"{alertmanager.url}/api/v2/silence/{silence_id}"
        await asyncio.to_thread(httpx.delete, url, timeout=5)
        await eventually(
            lambda: any(
                "Silence removed in Alertmanager, outside Slack" in t
                for t in thread_texts(slack, root.ts)
            ),
            what="the watch noticed",
            timeout=15,
        )
        await eventually(
            lambda: "incident_silence" in action_ids(root_now(slack, root.ts)), what="select back"
        )


async def _silenced(running: RunningBot) -> Any:
    incident = await running.bot.store.get("1")
    return incident if incident is not None and incident.silence is not None else None


async def test_grafana_silence_uses_grafanas_path_token_and_rule_matchers(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        await choose_silence(running, root, 7200)
        await eventually(lambda: grafana.silences, what="silence created")
        (silence,) = grafana.silences.values()
        method, path, _ = grafana.requests[0]
        assert (method, path) == ("POST", "/api/alertmanager/grafana/api/v2/silences")
        names = {m["name"]: m["value"] for m in silence["matchers"]}
        assert names["__alert_rule_uid__"] == "dez2aomgvru2oe"
        assert names["type"] == "alerting-infra"
        assert silence["createdBy"] == "alice"
        await eventually(
            lambda: "silenced until" in json.dumps(root_now(slack, root.ts).blocks), what="root"
        )


async def test_the_thread_records_who_silenced_until_when_where_and_its_removal(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    """The App Home tells newcomers the thread records what was done: a silence from the menu
    or the command, and its removal, each leave a reply naming the person, pinging nobody."""
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)

        def said(words: str) -> list[str]:
            return [t for t in thread_texts(slack, root.ts) if words in t]

        await choose_silence(running, root, 3600)
        [silenced] = await eventually(lambda: said("Silenced for"), what="the silence's reply")
        incident = await _silenced(running)
        until = f"<!date^{int(incident.silence.until.timestamp())}^"
        assert "🔕 Silenced for 1 h in Grafana until " + until in silenced
        assert "· by *alice*" in silenced and "<@" not in silenced

        await post_event(running.http, slash("unsilence"))
        [removed] = await eventually(lambda: said("Silence removed"), what="the removal's reply")
        assert "Silence removed from Grafana · by *alice*" in removed and "<@" not in removed

        await post_event(running.http, slash("silence 30m"))
        await eventually(lambda: len(said("Silenced for")) == 2, what="the command's reply")
        assert "Silenced for 30 min in Grafana until " in said("Silenced for")[1]


async def test_a_silence_that_runs_out_is_shown_as_ended(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    settings = grafana_settings(settings_for, grafana, silence_check_seconds=5)
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        await choose_silence(running, root, 1800)
        incident = await eventually(lambda: _silenced(running), what="recorded")
        grafana.run_out(incident.silence.silence_id)
        # The watch looks again at the planned end; here the backend says it is over already.
        await running.bot.store.silence_watch.schedule("1", 0)
        await eventually(
            lambda: any("Silence ended" in t for t in thread_texts(slack, root.ts)),
            what="ended",
        )


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("unreachable", "Grafana is unreachable"),
        ("400", "Grafana answered 400: bad matchers"),
        ("500", "Grafana answered 500: database is locked"),
        ("timeout", "did not answer"),
        ("token", "Grafana answered 401: invalid API key"),
    ],
)
async def test_a_failing_backend_is_told_nothing_changes_and_the_summary_keeps_the_refusal(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi, fault: str, expected: str
) -> None:
    # Only the hang waits out the timeout; the others answer at once, so a loaded machine's
    # slow first answer must not read as a timeout.
    extra: dict[str, Any] = {"backend_timeout_seconds": 0.5 if fault == "timeout" else 10}
    if fault == "unreachable":
        extra["grafana_url"] = "http://127.0.0.1:9"
    if fault == "token":
        extra["grafana_token"] = "wrong"
    if fault == "400":
        grafana.fail_next(400, "bad matchers")
    if fault == "500":
        grafana.fail_next(500, "database is locked")
    if fault == "timeout":
        grafana.hang()
    settings = grafana_settings(settings_for, grafana, **extra)
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        await choose_silence(running, root, 3600)
        answer = await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not silence" in t],
            what="the failure, told",
        )
        assert expected in answer[0] and "Nothing changed" in answer[0]
        incident = await running.bot.store.get("1")
        assert incident is not None and incident.silence is None
        assert "silenced until" not in json.dumps(root_now(slack, root.ts).blocks)
        assert not any("Silenced" in t for t in thread_texts(slack, root.ts))
        metrics = (await running.http.get("/metrics")).text
        assert 'queuepilot_actions_total{action="silence",outcome="failed"} 1.0' in metrics
        # The refusal is on the record: the summary's timeline (and the postmortem's) says it.
        await post_event(running.http, slash("resolve 1 anyway"))
        summary = await eventually(
            lambda: [t for t in thread_texts(slack, root.ts) if "What was done" in t],
            what="the summary",
        )
        assert "Silence for 1 h refused: Could not silence incident 1: " in summary[0], summary


async def test_a_hanging_backend_does_not_hold_up_the_groups_notifications(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    release = grafana.hang()
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        firing = fixture_json("grafana/queue-alert-firing.json")
        await running.send("grafana", firing)
        root = await recorded_root(running, slack)
        await choose_silence(running, root, 3600)
        # Waits of 30 s: on a loaded machine the click's work may start seconds after its ack.
        await eventually(lambda: grafana.in_flight == 1, what="the silence call hangs", timeout=30)
        worse = json.loads(json.dumps(firing))
        worse["alerts"][0]["values"]["max_queue_time_mins"] = 140
        assert (await running.send("grafana", worse)).status_code == 202
        await eventually(
            lambda: "140 min" in json.dumps(root_now(slack, root.ts).blocks),
            what="the re-notification on the root while the silence call hangs",
            timeout=30,
        )
        # The fake holds the call for 30 s at most: still in flight, the call held nothing up.
        assert grafana.in_flight == 1, "the backend call is still hanging"
        release.set()
        await eventually(
            lambda: "silenced until" in json.dumps(root_now(slack, root.ts).blocks), what="done"
        )


async def test_the_click_is_answered_while_its_backend_call_still_hangs(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    # Slack wants its 200 within 3 s whatever the backend does: the answer must not wait for
    # the work the click starts.
    release = grafana.hang()
    try:
        async with run_bot(grafana_settings(settings_for, grafana)) as running:
            await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
            root = await recorded_root(running, slack)

            answer = await asyncio.wait_for(choose_silence(running, root, 3600), timeout=3)

            assert answer.status_code == 200
            await eventually(lambda: grafana.in_flight == 1, what="the silence call under way")
            assert "silenced until" not in json.dumps(root_now(slack, root.ts).blocks)
            release.set()
            await eventually(
                lambda: "silenced until" in json.dumps(root_now(slack, root.ts).blocks),
                what="the silence shown once the backend answers",
            )
    finally:
        release.set()


async def test_two_silence_clicks_at_once_make_one_silence(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        release = grafana.hang()
        first = asyncio.create_task(choose_silence(running, root, 3600))
        second = asyncio.create_task(choose_silence(running, root, 7200))
        await asyncio.gather(first, second)
        await eventually(
            lambda: any("being silenced right now" in t for t in ephemeral_texts(slack)),
            what="the second click told",
        )
        release.set()
        await eventually(lambda: _silenced(running), what="one silence recorded")
        assert len(grafana.silences) == 1


async def test_the_same_click_delivered_twice_silences_once(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        action = {
            "type": "static_select",
            "action_id": "incident_silence",
            "selected_option": {"text": {"type": "plain_text", "text": "1h"}, "value": "3600"},
        }
        body = block_action(action, message_ts=root.ts)
        await post_event(running.http, body)
        await eventually(lambda: _silenced(running), what="silenced")
        await post_event(running.http, body)
        await eventually(lambda: len(ephemeral_texts(slack)) >= 2, what="second answer")
        assert len(grafana.silences) == 1
        assert ephemeral_texts(slack)[0] == ephemeral_texts(slack)[1], "the same answer again"


async def resolve_summary(running: RunningBot, slack: Slack, root: Any) -> str:
    # Silenced, the alert is still firing: resolving is asked once more, as it would be.
    await post_event(running.http, slash("resolve 1 anyway"))
    [summary] = await eventually(
        lambda: [t for t in thread_texts(slack, root.ts) if "resolved" in t and "Duration" in t],
        what="summary",
    )
    return summary


async def test_resolving_ends_the_silence_the_bot_made_and_the_summary_says_so(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        root, made = await silenced_from_slack(running, slack)
        silence_id = made.silence.silence_id
        summary = await resolve_summary(running, slack, root)
        # The same sentence before the watch ended it and after: an edit does not take it back.
        assert SILENCE_ENDED in summary
        assert "/queue unsilence" not in summary
        assert "Actions taken: *2*, by *alice*" in summary
        assert "Acknowledged (silenced) · by *alice*" in summary, "her silence took it on"
        await eventually(
            lambda: grafana.silences[silence_id]["status"]["state"] == "expired",
            what="Grafana's silence expired",
        )
        await eventually(
            lambda: "incident_unsilence" not in action_ids(root_now(slack, root.ts)),
            what="the resolved root no longer offers to remove a silence",
        )
        assert await _ended_at_resolve(running)


async def silenced_from_slack(
    running: RunningBot, slack: Slack, *, keep: bool = False
) -> tuple[Any, Any]:
    """The alert fired, its root posted, and alice silenced it for 1 h from its menu (`keep`:
    past the resolve); the incident once it records the silence."""
    await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
    root = await recorded_root(running, slack)
    await choose_silence(running, root, 3600, keep=keep)
    return root, await eventually(lambda: _silenced(running), what="silenced")


async def _ended_at_resolve(running: RunningBot) -> bool:
    timeline = [e.text for e in await running.bot.store.events("1")]
    return "Silence ended in Grafana at resolve" in timeline


async def test_a_silence_kept_stays_after_the_resolve_as_its_maker_chose(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    # The watch looks every 5 s (its least): it is seen to look after the resolve, and leave it.
    settings = grafana_settings(settings_for, grafana, silence_check_seconds=5)
    async with run_bot(settings) as running:
        root, made = await silenced_from_slack(running, slack, keep=True)
        until = f"<!date^{int(made.silence.until.timestamp())}^"
        said = await eventually(
            lambda: [t for t in thread_texts(slack, root.ts) if "Silenced for" in t],
            what="the silence's reply",
        )
        assert "Silenced for 1 h in Grafana, kept after the resolve" in said[0]
        summary = await resolve_summary(running, slack, root)
        assert f"🔕 Its silence stays until {until}" in summary
        assert ", as *alice* chose (Grafana silence `" in summary
        assert "`/queue unsilence 1` removes it." in summary
        await eventually(
            lambda: "incident_unsilence" in action_ids(root_now(slack, root.ts)),
            what="the resolved root still offers to remove the silence",
        )
        sid, looks = made.silence.silence_id, len(grafana.requests)
        await eventually(
            lambda: (
                ("GET", f"{grafana.prefix}/silence/{sid}")
                in [(method, path) for method, path, _ in grafana.requests[looks:]]
            ),
            what="the watch's look at the kept silence after the resolve",
            timeout=20,
        )
        assert grafana.silences[sid]["status"]["state"] == "active"
        assert "DELETE" not in {method for method, _, _ in grafana.requests}, "never expired"


async def test_ending_the_silence_is_tried_again_after_a_failure(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        root, made = await silenced_from_slack(running, slack)
        grafana.fail_next(503, "unavailable", method="DELETE")
        await resolve_summary(running, slack, root)
        await eventually(
            lambda: grafana.silences[made.silence.silence_id]["status"]["state"] == "expired",
            timeout=20,
            what="expired on the second try, after the backoff",
        )
        deletes = [r for r in grafana.requests if r[0] == "DELETE"]
        assert len(deletes) == 2


async def test_a_silence_that_cannot_be_ended_is_said_with_how_to_remove_it(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        root, made = await silenced_from_slack(running, slack)
        until = f"<!date^{int(made.silence.until.timestamp())}^"
        grafana.fail_next(400, "silence is locked", method="DELETE")
        await resolve_summary(running, slack, root)
        texts = lambda: [t for t in thread_texts(slack, root.ts) if "Could not end" in t]  # noqa: E731
        [said] = await eventually(
            lambda: [t for t in texts() if "Incident 1 resolved" not in t],
            what="the failure said in the thread",
        )
        assert "Could not end its silence in Grafana at resolve: Grafana answered 400" in said
        assert f"It stays until {until}" in said and "`/queue unsilence 1` removes it." in said
        # The summary, which said it would end, is edited to say it could not.
        await eventually(
            lambda: [t for t in texts() if "Incident 1 resolved" in t], what="the summary edited"
        )
        assert grafana.silences[made.silence.silence_id]["status"]["state"] == "active"


async def test_a_silence_racing_the_alerts_resolve_is_recorded_and_said(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        release = grafana.hang()
        await choose_silence(running, root, 3600)
        await eventually(lambda: grafana.in_flight == 1, what="the silence call is under way")
        await running.send("grafana", fixture_json("grafana/queue-alert-resolved.json"))
        await eventually(
            lambda: "Resolved" in json.dumps(root_now(slack, root.ts).blocks), what="resolved"
        )
        release.set()
        await eventually(
            lambda: any(
                "had resolved meanwhile, so it ends now, as at a resolve" in t
                for t in ephemeral_texts(slack)
            ),
            what="told",
        )
        # Recorded, so ended as any silence the bot made is at its incident's resolve.
        [silence_id] = grafana.silences
        await eventually(
            lambda: grafana.silences[silence_id]["status"]["state"] == "expired",
            what="the silence ended",
        )
        await eventually(lambda: _ended_at_resolve(running), what="its end recorded")


async def test_a_click_done_again_by_the_next_leader_leaves_one_silence(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    """The lead is lost while the backend makes the silence: the commit is refused, the next
    term does the click again, and the backend holds one silence in force, the one recorded."""
    settings = grafana_settings(settings_for, grafana, leader_lease_ms=1000)
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await recorded_root(running, slack)
        release = grafana.hang()
        try:
            await choose_silence(running, root, 3600)
            await eventually(lambda: grafana.in_flight == 1, what="the silence call under way")
            # Another replica leads for a moment: this one's next write is refused.
            leader_key = running.bot.store.keys.leader
            await running.bot.redis.set(leader_key, "999999999 elsewhere", px=1500)
        finally:
            release.set()
        incident = await eventually(lambda: _silenced(running), what="a silence recorded")
        in_force = [s for s, v in grafana.silences.items() if v["status"]["state"] == "active"]
        assert in_force == [incident.silence.silence_id], grafana.silences
        assert running.bot.leadership.fence.held, "this replica leads again"


async def test_a_silence_that_could_not_be_ended_is_ended_at_the_resolve_after_a_reopen(
    settings_for: Any, slack: Slack, grafana: FakeSilenceApi
) -> None:
    async with run_bot(grafana_settings(settings_for, grafana)) as running:
        root, made = await silenced_from_slack(running, slack)
        silence_id = made.silence.silence_id
        grafana.fail_next(400, "silence is locked", method="DELETE")
        await resolve_summary(running, slack, root)
        await eventually(
            lambda: any("Could not end" in t for t in thread_texts(slack, root.ts)),
            what="the failure said in the thread",
        )
        # The alert fires again, the incident reopens, and it resolves once more: the bot's
        # silence, still running, is ended at this resolve as at any other.
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        await eventually(
            lambda: any("reopened" in t for t in thread_texts(slack, root.ts)), what="reopened"
        )
        await post_event(running.http, slash("resolve 1 anyway"))
        await eventually(
            lambda: grafana.silences[silence_id]["status"]["state"] == "expired",
            what="Grafana's silence expired at the second resolve",
        )
        assert await eventually(lambda: _ended_at_resolve(running), what="its end recorded")
        [summary] = await eventually(
            lambda: [t for t in thread_texts(slack, root.ts) if "Reopened: *1×*" in t],
            what="the second summary",
        )
        assert SILENCE_ENDED in summary, summary
        assert "could not be ended" not in summary, "that was the first resolve's"
