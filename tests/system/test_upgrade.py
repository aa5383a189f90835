"""Upgrading from the previous release, as a Deployment's rolling update does it.

The previous release (0.25.0, commit `a43613a`) is taken from git and run as a real replica; the
checkout is the next one. Both run `bot`'s `__main__` (`serve`) as processes of their own, each
first saying where it imported `bot` from, on one redis-server and one Slack (the emulator),
started from the same environment in 0.25.0's variable names (0.26 renames none of them), as a
Deployment's pods are from one ConfigMap. What is promised, checked as a channel would see it:

- what 0.25.0 wrote is carried over: the incident, its thread, who acknowledged it, the silence
  made from Slack, the scale-up to put back when it resolves, its next status, its peak;
- both versions serve side by side during the rollout: notifications sent to either are applied
  once, by whichever version's consumer takes them, each version acts on what the other wrote,
  and statuses are not doubled. The next version scales the incident 0.25.0 scaled, and 0.25.0
  shows the root and reads its timeline for `/queue report`;
- the old replica stops on SIGTERM and the new one carries on: what the old one had just
  accepted is shown, a button of the root as 0.25.0 rendered it works, statuses keep coming in
  the same thread, the resolve posts one summary (both scale-ups in what was done, the one
  put-back still to come, the peak as the alert said it) and puts both scale-ups back at once.

Going back, to 0.26.0: test_rollback.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
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
    shared_settings,
    statuses_shown,
    terminated,
    text_of,
)
from tests.support.running import eventually
from tests.support.scale import RUNNER
from tests.support.slack import CHANNEL, Slack, button_value, ephemeral_texts, slash

PREVIOUS_RELEASE = "a43613a"  # 0.25.0
PREVIOUS = "0.25.0"
STREAM = KEYS.stream
TIMELINE_1 = KEYS.timeline("1")
RENOTIFIED = 6

# Incident 1's scale-ups: 0.25.0's, then the next version's (each event records it as
# `scale`); minRunners 0 -> 5 -> 8, put back to 0 at once.
OLD_ADDS, NEW_ADDS = 5, 3
SCALED = OLD_ADDS + NEW_ADDS

PUT_BACK = f"Incident 1: Put {RUNNER} back (the incident resolved and its queue stayed drained"

# What each incident's thread says besides its statuses, each exactly once (in any order: an
# action's reply follows its backend call, and those run side by side). The silence is 0.25.0's,
# which made no reply for it (the next version does).
EVENTS_1 = (
    "Incident 1: Acknowledged",
    f"Incident 1: Scaled {RUNNER} by +{OLD_ADDS}",
    f"Incident 1: Scaled {RUNNER} by +{NEW_ADDS}",
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
    "You acknowledged incident 2.",
    "You resolved incident 2.",
    "You removed incident 1's silence",
)


def scales_recorded(store: redis.Redis) -> list[int | None]:
    """Incident 1's scale-up events as its timeline keeps them: what each one's `scale` says was
    added (None for an event without one)."""
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
        first, unsilence = await previous_release_alone(old, slack, kube, grafana)

        (tmp_path / "next").mkdir()
        new = replica(slack, redis_url, REPO, tmp_path / "next", "next", **env)
        processes.append(new)
        await ready(new, REPO)
        second, peak_wait = await side_by_side(old, new, slack, kube, store, first)

        await stopped_with_sigterm(old, slack, first)
        await next_release_alone(new, slack, kube, grafana, first, unsilence)
        summarized(slack, first.ts, peak_wait)

        await eventually(lambda: drained(store), what="everything applied")
        nothing_duplicated_or_lost(slack, first.ts, second.ts)
        assert scales_recorded(store) == [OLD_ADDS, NEW_ADDS], "both versions' `scale` kept"
        assert store.xpending(STREAM, "intake")["pending"] == 0
        assert store.xlen(KEYS.dead_letters) == 0
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
) -> tuple[Any, str]:
    """Incident 1 opened, acknowledged, silenced and scaled up by 0.25.0, its statuses begun:
    its root, and the value of the root's Remove silence as 0.25.0 rendered it."""
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
    return first, button_value(as_rendered, "incident_unsilence")


async def side_by_side(
    old: BotProcess,
    new: BotProcess,
    slack: Slack,
    kube: FakeKubeApi,
    store: redis.Redis,
    first: Any,
) -> tuple[Any, int]:
    """Both versions serve: notifications to either are applied once, by either's consumer,
    each acts on what the other wrote, statuses go on; 0.25.0 reads the next version's scale-up
    event. Incident 2's root, and incident 1's longest wait."""
    statuses_before = statuses_shown(slack, first.ts)
    # A new group sent to both at once, twice each (an HA Alertmanager pair does): one root.
    am_firing = fixture_json(AM_FIRING)
    await asyncio.gather(*(notify(r, "alertmanager", am_firing) for r in (old, new) * 2))
    await eventually(lambda: len(roots(slack)) == 2, what="incident 2's root")
    await eventually(lambda: drained(store), what="the four applied")

    # The next version scales incident 1 again (named: two are open). 0.25.0, the channel's
    # sender, renders the root from the incident whose latest event carries `scale`; the
    # re-notifications below are applied to that incident.
    await deliver(new, slash(f"scale {RUNNER} +{NEW_ADDS} 1"))
    await eventually(lambda: min_runners(kube) == SCALED, what="scaled by the next version")
    await eventually(
        lambda: f"by +{NEW_ADDS}" in text_of(root(slack, first.ts)),
        what="the next version's scale-up on 0.25.0's root",
    )
    assert scales_recorded(store) == [OLD_ADDS, NEW_ADDS], "each version records its scale-up"

    # Incident 1 re-notified to each replica in turn, one at a time: each is applied once,
    # by whichever consumer of the one group takes it (which one is a race, so not asserted;
    # an entry a version cannot read would be dead-lettered, checked at the end), and the root
    # shows the latest.
    firing = fixture_json(FIRING)
    before = [await applied(old), await applied(new)]
    for sent in range(RENOTIFIED):
        wait = 200 + sent
        await notify((old, new)[sent % 2], "grafana", renotified(firing, wait=wait))
        await eventually(lambda: drained(store), what=f"re-notification {wait} applied")

    async def applied_since() -> float:
        return await applied(old) + await applied(new) - sum(before)

    async def all_counted() -> bool:
        return await applied_since() >= RENOTIFIED

    await eventually(all_counted, what="every re-notification counted")
    assert await applied_since() == RENOTIFIED, "each re-notification applied once"
    longest = 200 + RENOTIFIED - 1
    await eventually(
        lambda: f"{longest} min" in text_of(root(slack, first.ts)), what="the last shown"
    )

    # Both read every timeline for the capacity report, 0.25.0 one with a `scale` it ignores.
    for process in (old, new):
        await deliver(process, slash("report"))
    await eventually(lambda: reports(slack) == 2, what="a report from each")

    # 0.25.0 acknowledges incident 2, the next version resolves it; 0.25.0, still the channel's
    # sender, shows both.
    second = roots(slack)[1]
    await deliver(old, press(button_value(second, "incident_ack"), "incident_ack", second.ts))
    await eventually(
        lambda: "acknowledged by" in text_of(root(slack, second.ts)), what="2 acknowledged"
    )
    resolve = button_value(root(slack, second.ts), "incident_resolve")
    await deliver(new, press(resolve, "incident_resolve", second.ts))
    await eventually(lambda: "Resolved" in text_of(root(slack, second.ts)), what="2 resolved")
    await eventually(
        lambda: statuses_shown(slack, first.ts) >= statuses_before + 4,
        what="statuses while both run",
        timeout=20,
    )
    return second, longest


async def stopped_with_sigterm(old: BotProcess, slack: Slack, first: Any) -> None:
    """0.25.0 stops right after accepting a notification, which is shown all the same."""
    await notify(old, "grafana", renotified(fixture_json(FIRING), wait=150))
    await terminated(old)
    await eventually(lambda: "150 min" in text_of(root(slack, first.ts)), what="150 shown")


async def next_release_alone(
    new: BotProcess,
    slack: Slack,
    kube: FakeKubeApi,
    grafana: FakeSilenceApi,
    first: Any,
    unsilence: str,
) -> None:
    """The next version carries incident 1 on: the same root, 0.25.0's Remove silence, the
    statuses, the resolve's summary and the put-back of both scale-ups, 0.25.0's and its own."""
    statuses_before = statuses_shown(slack, first.ts)
    await notify(new, "grafana", renotified(fixture_json(FIRING), wait=171))
    await eventually(lambda: "171 min" in text_of(root(slack, first.ts)), what="171 shown")
    assert "acknowledged by" in text_of(root(slack, first.ts))
    # Before Remove silence: a quiet status edits the last status reply only while nothing was
    # posted below it, and its reply would be.
    await eventually(
        lambda: statuses_shown(slack, first.ts) >= statuses_before + 2,
        what="statuses after the handover",
        timeout=15,
    )
    await deliver(new, press(unsilence, "incident_unsilence", first.ts))
    await eventually(
        lambda: [s["status"]["state"] for s in grafana.silences.values()] == ["expired"],
        what=f"{PREVIOUS}'s silence removed with {PREVIOUS}'s button",
    )
    assert min_runners(kube) == SCALED, "incident 1's scale-ups hold"
    await notify(new, "grafana", fixture_json(RESOLVED))
    await eventually(lambda: "Resolved" in text_of(root(slack, first.ts)), what="1 resolved")
    await eventually(lambda: min_runners(kube) == 0, what="the scale-ups put back")
    await eventually(lambda: len(events(slack, first.ts)) == len(EVENTS_1), what="all said")
    [put_back] = [text for text in events(slack, first.ts) if text.startswith(PUT_BACK)]
    assert f"minRunners {SCALED} → 0" in put_back, "both scale-ups went back at once"


def summarized(slack: Slack, first_ts: str, peak_wait: int) -> None:
    """Incident 1's summary, by the next version from what both wrote: both scale-ups among what
    was done, the one put-back of them still to come, the peak 0.25.0 and it recorded (the
    alert's figure, as the alert names no runner type's queue)."""
    [summary] = [
        m
        for m in slack.emulator.thread(CHANNEL, first_ts)
        if m.text.startswith("Incident 1 resolved after")
    ]
    said = text_of(summary)
    for adds in (OLD_ADDS, NEW_ADDS):
        assert f"Scaled {RUNNER} by +{adds}" in said, said
    assert f"minRunners {SCALED} goes back to 0" in said, said
    assert f"Peak longest wait: *{peak_wait} min*" in said, said
    assert "Peak queued jobs (as the alert said): *14*" in said, said


def nothing_duplicated_or_lost(slack: Slack, first_ts: str, second_ts: str) -> None:
    assert [m.ts for m in roots(slack)] == [first_ts, second_ts], "one root per incident"
    final = text_of(root(slack, first_ts))
    assert "acknowledged by" in final and "incident_" not in final, "resolved, no buttons"
    once_each(events(slack, first_ts), EVENTS_1)
    once_each(events(slack, second_ts), EVENTS_2)
    answers = ephemeral_texts(slack)
    once_each([text for text in answers if not text.startswith(REPORT)], ANSWERS)
    assert reports(slack) == 2, answers
    one_status_an_interval(slack, first_ts)
