"""Upgrading from the previous release, as a Deployment's rolling update does it.

The previous release, 0.27.0 (commit `c5af55f`), is taken from git and run as a real replica; the
checkout is the next one. Both run `bot`'s `__main__` (`serve`) as processes of their own, each
first saying where it imported `bot` from, on one redis-server and one Slack (the emulator),
started from the same environment, as a Deployment's pods are from one ConfigMap. Both elect a
leader on the same lease: 0.27.0, up first, leads while both run (it applies notifications,
performs the clicks either takes into the requests stream, ticks and posts), and the checkout
leads once 0.27.0 stops. What is promised, checked as a channel would see it:

- what 0.27.0 wrote is carried over: the incident, its thread, who acknowledged it, the silence
  made from Slack, the scale-up to put back when it resolves, its statuses, its peak, its
  notifications counted, the incident numbers used (no loss of state is said);
- both versions serve side by side: notifications sent to either are applied once; a click or a
  command taken by either is done once (the checkout's scale-up of the incident 0.27.0 scaled,
  then 0.27.0's on top of it; 0.27.0 acknowledges an incident, the checkout resolves it),
  `/queue report` asked of each is answered once, statuses are not doubled, and only the leader
  posts to the channel;
- Slack holds 0.27.0's posts off (a new incident's root refused with a Retry-After): the
  checkout posts nothing to the channel meanwhile; it takes the removal of a silence with the
  button of the root as 0.27.0 rendered it, which the root shows at once (an edit) while the
  reply waits;
- 0.27.0 stops on SIGTERM right after accepting a notification: the checkout takes the lead,
  shows it, posts what waited (the root 0.27.0 had queued, the reply) and keeps the new
  incident's statuses coming; the resolve posts one summary (every scale-up in what was done,
  the one put-back still to come, the peak as the alert said it) and puts the three scale-ups
  back at once; the next incident takes the next number;
- no root or status is ever edited back to older numbers, no post is doubled or lost, and
  neither replica logs an error.

Going back, to 0.27.0: test_rollback.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import as_group, fixture_json
from tests.support.processes import REPO, BotProcess
from tests.support.releases import (
    AM_FIRING,
    FIRING,
    KEYS,
    REPORT,
    RESOLVED,
    applied,
    choose_silence,
    deliver,
    drained,
    dump,
    events,
    leads,
    logged_no_error,
    min_runners,
    notify,
    once_each,
    one_status_an_interval,
    press,
    ready,
    release_tree,
    renotified,
    replica,
    reports,
    root,
    roots,
    samples,
    shared_settings,
    statuses_shown,
    terminated,
    text_of,
)
from tests.support.running import eventually
from tests.support.scale import RUNNER
from tests.support.slack import CHANNEL, Slack, button_value, ephemeral_texts, slash
from tests.system.test_rollback import PREVIOUS, PREVIOUS_RELEASE

TIMELINE_1 = KEYS.timeline("1")
RENOTIFIED = 6
# Slack's Retry-After on 0.27.0's post of incident 3's root: longer than the rest of the test.
HOLD_S = 30

# Incident 1's longest waits, in the order its notifications are sent: the fixture's, the
# re-notifications while both run, one right before 0.27.0 stops, one to the checkout alone.
# Each is applied before the next is sent, so what a message shows of them only ever moves
# along this list.
OPENED_WAIT = 114
SIDE_BY_SIDE_WAITS = tuple(200 + sent for sent in range(RENOTIFIED))
LAST_OLD_WAIT, NEXT_WAIT = 150, 171
WAITS = (OPENED_WAIT, *SIDE_BY_SIDE_WAITS, LAST_OLD_WAIT, NEXT_WAIT)
# Every one of them and the resolve, each counted once on the root.
NOTIFICATIONS_1 = len(WAITS) + 1

# Incident 1's scale-ups: 0.27.0's alone, the checkout's beside it, 0.27.0's again on top of
# it (each event records it as `scale`); minRunners 0 -> 5 -> 8 -> 10, put back to 0 at once.
OLD_ADDS, NEW_ADDS, LAST_ADDS = 5, 3, 2
SCALED = OLD_ADDS + NEW_ADDS + LAST_ADDS

PUT_BACK = f"Incident 1: Put {RUNNER} back (the incident resolved and its queue stayed drained"

# What each incident's thread says besides its statuses, each exactly once (in any order: an
# action's reply follows its backend call, and those run side by side).
EVENTS_1 = (
    "Incident 1: Acknowledged",
    "Incident 1: Silenced for 1 h in Grafana",
    f"Incident 1: Scaled {RUNNER} by +{OLD_ADDS}",
    f"Incident 1: Scaled {RUNNER} by +{NEW_ADDS}",
    f"Incident 1: Scaled {RUNNER} by +{LAST_ADDS}",
    "Incident 1: Silence removed from Grafana",
    "Incident 1 resolved after",
    PUT_BACK,
)
EVENTS_2 = ("Incident 2: Acknowledged", "Incident 2 resolved after")
ANSWERS = (
    "You acknowledged incident 1.",
    "You silenced incident 1 until",
    f"You scaled `{RUNNER}` by +{OLD_ADDS}",
    f"You scaled `{RUNNER}` by +{NEW_ADDS}",
    f"You scaled `{RUNNER}` by +{LAST_ADDS}",
    "You acknowledged incident 2.",
    "You resolved incident 2.",
    "You removed incident 1's silence",
)


def scales_recorded(store: redis.Redis) -> list[int | None]:
    """Incident 1's scale-up events as its timeline keeps them, the form 0.27.0 reads: what each
    one's `scale` says was added (None for an event without one)."""
    timeline = [json.loads(item) for item in store.lrange(TIMELINE_1, 0, -1)]
    return [(e.get("scale") or {}).get("added") for e in timeline if e["kind"] == "scaled"]


@pytest.mark.slow
async def test_a_rolling_update_from_the_previous_release_carries_everything_over(
    redis_url: str,
    slack: Slack,
    arc_kube: FakeKubeApi,
    grafana: FakeSilenceApi,
    store: redis.Redis,
    tmp_path: Path,
) -> None:
    kube = arc_kube
    previous = release_tree(PREVIOUS_RELEASE, tmp_path / PREVIOUS)
    env = shared_settings(kube, grafana, tmp_path)
    # As `python -m bot serve` from the release's own directory, so it cannot import ours.
    old = replica(slack, redis_url, previous, previous, PREVIOUS, **env)
    processes = [old]
    try:
        await ready(old, previous)
        first, as_rendered = await previous_release_alone(old, slack, kube, grafana)

        (tmp_path / "next").mkdir()
        new = replica(slack, redis_url, REPO, tmp_path / "next", "next", **env)
        processes.append(new)
        await ready(new, REPO)
        assert await leads(old) and not await leads(new), "the first up leads"
        second = await side_by_side(old, new, slack, kube, store, first)

        third = await stopped_with_its_posts_held(old, new, slack, grafana, first, as_rendered)
        await next_release_alone(new, slack, kube, first, third)
        await eventually(
            lambda: f"Put {RUNNER} back" in summary_of(slack, first.ts),
            what="the summary told the put-back",
        )
        summarized(slack, first.ts)

        await eventually(lambda: drained(store), what="everything applied")
        nothing_duplicated_or_lost(slack, [first.ts, second.ts, third.ts])
        assert scales_recorded(store) == [OLD_ADDS, NEW_ADDS, LAST_ADDS], "every `scale` kept"
        assert store.xpending(KEYS.stream, "intake")["pending"] == 0
        assert store.xlen(KEYS.dead_letters) == 0
        # Every click and command taken by either was done, by whichever version led.
        assert store.xlen(KEYS.requests) == 0
        assert store.xlen(KEYS.request_dead_letters) == 0
        # The checkout finds 0.27.0's state marker: no loss said.
        assert (await samples(new))["queuepilot_state_lost_total"] == 0
        for process in processes:
            logged_no_error(process)
    except BaseException:
        dump(slack, processes)
        raise
    finally:
        for process in processes:
            process.kill()


async def previous_release_alone(
    old: BotProcess, slack: Slack, kube: FakeKubeApi, grafana: FakeSilenceApi
) -> tuple[Any, Any]:
    """Incident 1 opened, acknowledged, silenced and scaled up by 0.27.0, its statuses begun: its
    root, and the root as 0.27.0 rendered it then (silenced, with Remove silence)."""
    await notify(old, "grafana", fixture_json(FIRING))
    [first] = await eventually(lambda: roots(slack), what="incident 1's root")
    await deliver(old, press(button_value(first, "incident_ack"), "incident_ack", first.ts))
    await deliver(old, choose_silence(3600, first.ts))
    await deliver(old, slash(f"scale {RUNNER} +{OLD_ADDS}"))
    await eventually(lambda: min_runners(kube) == OLD_ADDS, what="scaled")
    as_rendered = await eventually(
        lambda: (m := root(slack, first.ts)) and "silenced until" in text_of(m) and m,
        what="the root silenced",
    )
    assert "acknowledged by" in text_of(as_rendered)
    assert [s["status"]["state"] for s in grafana.silences.values()] == ["active"]
    await eventually(lambda: statuses_shown(slack, first.ts) >= 1, what="a first status")
    return first, as_rendered


async def side_by_side(
    old: BotProcess,
    new: BotProcess,
    slack: Slack,
    kube: FakeKubeApi,
    store: redis.Redis,
    first: Any,
) -> Any:
    """Both versions serve, 0.27.0 leading: notifications and clicks to either are done once,
    statuses go on. Incident 2's root."""
    # A new group sent to both at once, twice each (an HA Alertmanager pair does): one root.
    am_firing = fixture_json(AM_FIRING)
    await asyncio.gather(*(notify(r, "alertmanager", am_firing) for r in (old, new) * 2))
    await eventually(lambda: len(roots(slack)) == 2, what="incident 2's root")
    await eventually(lambda: drained(store), what="the four applied")
    second = roots(slack)[1]

    # The checkout takes a scale-up of incident 1 (named: two are open), and 0.27.0, the
    # leader, does it and shows it on the root.
    await deliver(new, slash(f"scale {RUNNER} +{NEW_ADDS} 1"))
    await eventually(
        lambda: min_runners(kube) == OLD_ADDS + NEW_ADDS, what="scaled by the checkout"
    )
    await eventually(
        lambda: f"by +{NEW_ADDS}" in text_of(root(slack, first.ts)),
        what="the checkout's scale-up on 0.27.0's root",
    )

    # Incident 1 re-notified to each replica in turn, one at a time: each is applied once (an
    # entry a version cannot read would be dead-lettered, checked at the end), and the root
    # shows the latest.
    firing = fixture_json(FIRING)
    before = [await applied(old), await applied(new)]
    for sent, wait in enumerate(SIDE_BY_SIDE_WAITS):
        await notify((old, new)[sent % 2], "grafana", renotified(firing, wait=wait))
        await eventually(lambda: drained(store), what=f"re-notification {wait} applied")

    async def applied_since() -> float:
        return await applied(old) + await applied(new) - sum(before)

    async def all_counted() -> bool:
        return await applied_since() >= RENOTIFIED

    await eventually(all_counted, what="every re-notification counted")
    assert await applied_since() == RENOTIFIED, "each re-notification applied once"
    longest = SIDE_BY_SIDE_WAITS[-1]
    await eventually(
        lambda: f"{longest} min" in text_of(root(slack, first.ts)), what="the last shown"
    )

    # 0.27.0 scales on top of the checkout's scale-up.
    await deliver(old, slash(f"scale {RUNNER} +{LAST_ADDS} 1"))
    await eventually(lambda: min_runners(kube) == SCALED, what="scaled by 0.27.0 again")

    # Each reads every timeline for the capacity report, the other version's events included.
    for process in (old, new):
        await deliver(process, slash("report"))
    await eventually(lambda: reports(slack) == 2, what="a report from each")

    # Incident 2's statuses come while both run (incident 1's wait: it had replies since its
    # last status, whose news a new status tells no sooner than a minute after it).
    await eventually(
        lambda: statuses_shown(slack, second.ts) >= 3, what="statuses while both run", timeout=20
    )
    # 0.27.0 acknowledges incident 2, the checkout resolves it with the root's Resolve as 0.27.0
    # rendered it (its plain confirmation: resolved at once, not asked again).
    await deliver(old, press(button_value(second, "incident_ack"), "incident_ack", second.ts))
    await eventually(
        lambda: "acknowledged by" in text_of(root(slack, second.ts)), what="2 acknowledged"
    )
    resolve = button_value(root(slack, second.ts), "incident_resolve")
    await deliver(new, press(resolve, "incident_resolve", second.ts))
    await eventually(lambda: "Resolved" in text_of(root(slack, second.ts)), what="2 resolved")
    return second


async def stopped_with_its_posts_held(
    old: BotProcess,
    new: BotProcess,
    slack: Slack,
    grafana: FakeSilenceApi,
    first: Any,
    as_rendered: Any,
) -> Any:
    """0.27.0 stops right after accepting a notification, while Slack holds off its posts (a new
    incident's root refused with a Retry-After): the checkout posts nothing to the channel before
    0.27.0 is gone (it takes the removal of incident 1's silence meanwhile, with the button of the
    root as 0.27.0 rendered it; the root shows it, an edit, and the reply waits), then leads,
    shows what 0.27.0 accepted last and posts what was held. Incident 3's root."""

    def root_posts() -> list[Any]:
        calls = slack.emulator.calls("chat.postMessage")
        return [c for c in calls if not c.params.get("thread_ts")]

    posted_before = len(root_posts())
    slack.emulator.fail_next(
        "chat.postMessage", retry_after=HOLD_S, when=lambda p: not p.get("thread_ts")
    )
    await notify(old, "grafana", as_group("after-the-rollout"))
    [refused] = await eventually(
        lambda: root_posts()[posted_before:], what="incident 3's root refused for now"
    )
    assert refused.status == 429

    unsilence = button_value(as_rendered, "incident_unsilence")
    await deliver(new, press(unsilence, "incident_unsilence", first.ts))
    await eventually(
        lambda: [s["status"]["state"] for s in grafana.silences.values()] == ["expired"],
        what=f"{PREVIOUS}'s silence removed with {PREVIOUS}'s button",
    )
    await eventually(
        lambda: "silenced until" not in text_of(root(slack, first.ts)), what="the root edited"
    )
    held = [c for c in slack.emulator.calls("chat.postMessage") if c.at > refused.at]
    assert held == [], "posted beside 0.27.0, which leads and holds the channel's posts"

    await notify(old, "grafana", renotified(fixture_json(FIRING), wait=LAST_OLD_WAIT))
    signalled_at = time.monotonic()
    await terminated(old)
    await eventually(lambda: leads(new), what="the checkout leading")
    await eventually(
        lambda: f"{LAST_OLD_WAIT} min" in text_of(root(slack, first.ts)),
        what="what 0.27.0 accepted last, shown",
    )
    [posted] = await eventually(lambda: root_posts()[posted_before + 1 :], what="3's root")
    # 0.27.0 holds its posts for the whole Retry-After, so within it, after SIGTERM, the post is
    # the checkout's, from what 0.27.0 had queued.
    assert posted.ok and signalled_at < posted.at < refused.at + HOLD_S
    third = roots(slack)[2]
    assert "ID *3*" in text_of(root(slack, third.ts))
    return third


async def next_release_alone(
    new: BotProcess, slack: Slack, kube: FakeKubeApi, first: Any, third: Any
) -> None:
    """The checkout carries on: incident 1's root, the resolve's summary and the put-back of every
    scale-up; the next number; incident 3's statuses."""
    await notify(new, "grafana", renotified(fixture_json(FIRING), wait=NEXT_WAIT))
    await eventually(lambda: f"{NEXT_WAIT} min" in text_of(root(slack, first.ts)), what="shown")
    assert "acknowledged by" in text_of(root(slack, first.ts))
    assert min_runners(kube) == SCALED, "incident 1's scale-ups hold"
    await notify(new, "grafana", fixture_json(RESOLVED))
    await eventually(lambda: "Resolved" in text_of(root(slack, first.ts)), what="1 resolved")
    await eventually(lambda: min_runners(kube) == 0, what="the scale-ups put back")
    await eventually(lambda: len(events(slack, first.ts)) == len(EVENTS_1), what="all said")
    [put_back] = [text for text in events(slack, first.ts) if text.startswith(PUT_BACK)]
    assert f"minRunners {SCALED} → 0" in put_back, "every scale-up went back at once"

    # A new alert group: the number after 0.27.0's, never one of theirs again.
    await notify(new, "grafana", as_group("after-0.27"))
    await eventually(lambda: len(roots(slack)) == 4, what="incident 4's root")
    for number, message in enumerate(roots(slack), 1):
        assert f"ID *{number}*" in text_of(root(slack, message.ts))
    # Incident 3's statuses, due on 0.27.0's schedule, come in its thread: the first posted, the
    # next (nothing new) editing it in place.
    await eventually(lambda: statuses_shown(slack, third.ts) >= 2, what="3's statuses")


def summary_of(slack: Slack, first_ts: str) -> str:
    [summary] = [
        m
        for m in slack.emulator.thread(CHANNEL, first_ts)
        if m.text.startswith("Incident 1 resolved after")
    ]
    return text_of(summary)


def summarized(slack: Slack, first_ts: str) -> None:
    """Incident 1's summary, by the checkout from what both wrote: every scale-up among what was
    done, the one put-back of them, edited in once it was made (it no longer says it is to
    come), the peak both recorded (the alert's figure, as the alert names no runner type's
    queue). The root places the peak queue when 0.27.0 first saw it, as it opened the incident:
    the queue never grew after."""
    said = summary_of(slack, first_ts)
    for adds in (OLD_ADDS, NEW_ADDS, LAST_ADDS):
        assert f"Scaled {RUNNER} by +{adds}" in said, said
    assert f"minRunners {SCALED} goes back to 0" not in said, said
    assert f"minRunners {SCALED} → 0" in said, said
    assert f"Peak longest wait: *{max(WAITS)} min*" in said, said
    assert "Peak queued jobs (as the alert said): *14*" in said, said
    shown = text_of(root(slack, first_ts))
    peak_at = re.search(r"Peak queued jobs \(as the alert said\): \*14\* at <!date\^(\d+)\^", shown)
    assert peak_at is not None and 0 <= float(first_ts) - int(peak_at[1]) < 2, shown


def never_older(slack: Slack, ts: str) -> None:
    """Every edit of a message of the thread that shows incident 1's longest wait (its root, its
    statuses) goes only forward through the notifications that said it: one rendered from an
    older state, after a newer one went out, would show the wait move back. The root, once
    acknowledged or resolved, stays so, and is silenced in one stretch."""
    edits: dict[str, list[Any]] = {}
    for call in slack.emulator.calls("chat.update"):
        if call.ok:
            edits.setdefault(str(call.params["ts"]), []).append(call.params)
    for message in {m.ts for m in slack.emulator.thread(CHANNEL, ts)} & edits.keys():
        said = " ".join(str(params.get("text")) for params in edits[message])
        waits = [int(wait) for wait in re.findall(r"longest wait (\d+) min", said)]
        order = [WAITS.index(wait) for wait in waits]
        assert order == sorted(order), (message, waits)
    shown = [
        str(p.get("text")) + json.dumps(p.get("blocks"), ensure_ascii=False) for p in edits[ts]
    ]
    for sticky in ("acknowledged by", "Resolved"):
        seen = [sticky in text for text in shown]
        assert seen == sorted(seen), (sticky, shown)
    silenced = "".join("s" if "silenced until" in text else "-" for text in shown)
    assert re.fullmatch(r"-*s+-*", silenced), silenced


def nothing_duplicated_or_lost(slack: Slack, opened: list[str]) -> None:
    shown = [m.ts for m in roots(slack)]
    assert shown[:3] == opened and len(shown) == 4, "one root per incident"
    first_ts, second_ts, third_ts = opened
    final = text_of(root(slack, first_ts))
    assert "acknowledged by" in final and "incident_" not in final, "resolved, no buttons"
    assert f"{NOTIFICATIONS_1} notifications" in final, "each notification counted once"
    once_each(events(slack, first_ts), EVENTS_1)
    once_each(events(slack, second_ts), EVENTS_2)
    assert events(slack, third_ts) == []
    answers = ephemeral_texts(slack)
    once_each([text for text in answers if not text.startswith(REPORT)], ANSWERS)
    assert reports(slack) == 2, answers
    for ts in opened:
        one_status_an_interval(slack, ts)
    never_older(slack, first_ts)
