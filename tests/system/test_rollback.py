"""Rolling back to the previous release, as `helm rollback` or `kubectl rollout undo` does it: the
rolling update of test_upgrade.py the other way round.

The previous release, 0.27.0, is commit `c5af55f`, the one that released it (tag `v0.27.0`); it is
taken from git and run as a real replica beside the checkout's, both from one environment. Both
elect a leader on the same lease: the checkout, up first, leads while both run (0.27.0 takes
notifications and clicks into the streams for it), and 0.27.0 leads once the checkout stops. What
is promised, checked as a channel would see it:

- the checkout alone opens incident 1 (Grafana), acknowledged, silenced and scaled up from Slack
  (a put-back pending), its statuses begun, and incident 2 (Alertmanager);
- both versions serve side by side: notifications sent to either are applied once, a click to
  either is done once (0.27.0 takes a scale-up of incident 1), `/queue report` asked of each is
  answered once from what both wrote, and statuses are not doubled;
- the checkout's replica stops on SIGTERM right after accepting a re-notification and with a
  reply still to post (Slack answered its post with a 429): 0.27.0 takes the lead, shows the one
  and posts the other from the checkout's send queue;
- 0.27.0 alone carries on: re-notifications edit the same root, a new alert group takes the next
  number, statuses keep coming in the same thread, `/queue` lists the open incidents, and the
  buttons of the roots as the checkout rendered them work: Acknowledge, Remove silence, Resolve
  (asked in its confirm with what is still live, then not asked again), which sums up once and
  puts the three scale-ups back at once. Neither replica logs an error.
- an early warning this release stored with a scale-up made from it is read by 0.27.0 as the
  warning it is, still standing: its scale-up stays, not put back as if the warning had ended.

What is in flight as the checkout's last replica stops: test_rollback_in_flight.py.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis

from bot.actions.scale_reverts import PutBackDue, ScaleReverts
from bot.backends.kube import kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.reading.early_warning import WarningState
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.scale.scaling import ScaleTarget
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import IncidentStore
from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import as_group, fixture_json
from tests.support.processes import REPO, BotProcess
from tests.support.releases import (
    AM_FIRING,
    FIRING,
    KEYS,
    REPORT,
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
    shared_settings,
    statuses_shown,
    terminated,
    text_of,
)
from tests.support.running import eventually
from tests.support.scale import RUNNER
from tests.support.slack import CHANNEL, USER, Slack, button_value, ephemeral_texts, slash

PREVIOUS_RELEASE = "c5af55f"  # 0.27.0
PREVIOUS = "0.27.0"

# Incident 1's scale-ups: the checkout's, 0.27.0's beside it, the checkout's last before it
# stops; minRunners 0 -> 5 -> 8 -> 10, put back to 0 at once by 0.27.0.
NEW_ADDS, OLD_ADDS, LAST_ADDS = 5, 3, 2
SCALED = NEW_ADDS + OLD_ADDS + LAST_ADDS
RENOTIFIED = 6
# Slack's Retry-After on the checkout's last reply: longer than the rest of the test.
HOLD_S = 30

# The early warning's runner type, with a scale set of its own.
WARNED = "linux.2xlarge"
WARNED_SET = ("arc-runners", "warned-linux")
WARNED_TARGET = ScaleTarget(WARNED, "/".join(WARNED_SET), cap=20)
WARNED_ADDS = 4

PUT_BACK = f"Incident 1: Put {RUNNER} back (the incident resolved and its queue stayed drained"
EVENTS_1 = (
    "Incident 1: Acknowledged",
    "Incident 1: Silenced for 1 h in Grafana",
    f"Incident 1: Scaled {RUNNER} by +{NEW_ADDS}",
    f"Incident 1: Scaled {RUNNER} by +{OLD_ADDS}",
    f"Incident 1: Scaled {RUNNER} by +{LAST_ADDS}",
    "Incident 1: Silence removed from Grafana",
    "Incident 1 resolved after",
    PUT_BACK,
)
EVENTS_2 = ("Incident 2: Acknowledged",)
ANSWERS = (
    "You acknowledged incident 1.",
    "You silenced incident 1 until",
    f"You scaled `{RUNNER}` by +{NEW_ADDS}",
    f"You scaled `{RUNNER}` by +{OLD_ADDS}",
    f"You scaled `{RUNNER}` by +{LAST_ADDS}",
    "*#2* RunnerQueueTimeHigh",  # `/queue`, which lists incident 1 below it
    "You acknowledged incident 2.",
    "You removed incident 1's silence",
    "You resolved incident 1",
)


@pytest.mark.slow
async def test_a_rollback_to_the_previous_release_carries_everything_back(
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
    (tmp_path / "next").mkdir()
    new = replica(slack, redis_url, REPO, tmp_path / "next", "next", **env)
    processes = [new]
    try:
        await ready(new, REPO)
        first, second = await checkout_alone(new, slack, kube, grafana)
        as_rendered = {"first": root(slack, first.ts), "second": root(slack, second.ts)}

        # As the first pod of the rollback: the previous release's code, from its own directory.
        old = replica(slack, redis_url, previous, previous, PREVIOUS, **env)
        processes.append(old)
        await ready(old, previous)
        assert await leads(new) and not await leads(old), "the first up leads"
        await side_by_side(new, old, slack, kube, store, first, second)

        await stopped_with_a_reply_to_post(new, slack, kube, first)
        assert await leads(old), "0.27.0 leads once the checkout stopped"
        warned = await warned_and_scaled(redis_url, kube, env["SCALER_KUBECONFIG"])
        await previous_release_alone(old, slack, kube, grafana, first, second, as_rendered)
        await still_standing(store, kube, warned)

        await eventually(lambda: drained(store), what="everything applied")
        nothing_duplicated_or_lost(slack, first.ts, second.ts)
        assert store.xpending(KEYS.stream, "intake")["pending"] == 0
        assert store.xlen(KEYS.dead_letters) == 0
        # Every click and command taken by either was done, by whichever version led.
        assert store.xlen(KEYS.requests) == 0
        assert store.xlen(KEYS.request_dead_letters) == 0
        for process in processes:
            logged_no_error(process)
    except BaseException:
        dump(slack, processes)
        raise
    finally:
        for process in processes:
            process.kill()


async def checkout_alone(
    new: BotProcess, slack: Slack, kube: FakeKubeApi, grafana: FakeSilenceApi
) -> tuple[Any, Any]:
    """Incident 1 opened, acknowledged, silenced and scaled up on the checkout, its statuses
    begun; incident 2 opened beside it, nobody on it. Their roots."""
    await notify(new, "grafana", fixture_json(FIRING))
    [first] = await eventually(lambda: roots(slack), what="incident 1's root")
    await deliver(new, press(button_value(first, "incident_ack"), "incident_ack", first.ts))
    await deliver(new, choose_silence(3600, first.ts))
    await deliver(new, slash(f"scale {RUNNER} +{NEW_ADDS}"))
    await eventually(lambda: min_runners(kube) == NEW_ADDS, what="scaled")
    await eventually(
        lambda: "silenced until" in text_of(root(slack, first.ts)), what="the root silenced"
    )
    assert "acknowledged by" in text_of(root(slack, first.ts))
    assert [s["status"]["state"] for s in grafana.silences.values()] == ["active"]
    await eventually(lambda: statuses_shown(slack, first.ts) >= 1, what="a first status")
    await notify(new, "alertmanager", fixture_json(AM_FIRING))
    await eventually(lambda: len(roots(slack)) == 2, what="incident 2's root")
    return first, roots(slack)[1]


async def side_by_side(
    new: BotProcess,
    old: BotProcess,
    slack: Slack,
    kube: FakeKubeApi,
    store: redis.Redis,
    first: Any,
    second: Any,
) -> None:
    """Both versions serve, the checkout leading: notifications to either are applied once, a
    scale-up 0.27.0 takes is done and shown, each answers `/queue report`, statuses go on."""
    # Incident 2's statuses show they go on (incident 1's wait: it had replies since its last
    # status, whose news a new status tells no sooner than a minute after it).
    statuses_before = statuses_shown(slack, second.ts)
    before = await applied(old) + await applied(new)
    # Incident 2 re-notified to both at once, twice each (an HA Alertmanager pair does).
    am_firing = fixture_json(AM_FIRING)
    await asyncio.gather(*(notify(r, "alertmanager", am_firing) for r in (old, new) * 2))
    await eventually(lambda: drained(store), what="the four applied")
    assert len(roots(slack)) == 2

    # Incident 1 re-notified to each replica in turn: each applied once, and the root shows the
    # latest.
    firing = fixture_json(FIRING)
    for sent in range(RENOTIFIED):
        wait = 200 + sent
        await notify((old, new)[sent % 2], "grafana", renotified(firing, wait=wait))
        await eventually(lambda: drained(store), what=f"re-notification {wait} applied")

    async def applied_since() -> float:
        return await applied(old) + await applied(new) - before

    async def all_counted() -> bool:
        return await applied_since() >= 4 + RENOTIFIED

    await eventually(all_counted, what="every notification counted")
    assert await applied_since() == 4 + RENOTIFIED, "each notification applied once"
    longest = 200 + RENOTIFIED - 1
    await eventually(
        lambda: f"{longest} min" in text_of(root(slack, first.ts)), what="the last shown"
    )

    # 0.27.0 takes a scale-up (named: two are open); the checkout, the leader, does it and
    # shows it on the root.
    await deliver(old, slash(f"scale {RUNNER} +{OLD_ADDS} 1"))
    await eventually(lambda: min_runners(kube) == NEW_ADDS + OLD_ADDS, what="scaled via 0.27.0")
    await eventually(
        lambda: f"by +{OLD_ADDS}" in text_of(root(slack, first.ts)),
        what="0.27.0's scale-up on the root",
    )
    # Each reads every timeline for the capacity report, the other version's events included.
    for process in (old, new):
        await deliver(process, slash("report"))
    await eventually(lambda: reports(slack) == 2, what="a report from each")
    await eventually(
        lambda: statuses_shown(slack, second.ts) >= statuses_before + 3,
        what="statuses while both run",
        timeout=20,
    )


async def stopped_with_a_reply_to_post(
    new: BotProcess, slack: Slack, kube: FakeKubeApi, first: Any
) -> None:
    """The checkout's replica stops right after accepting a re-notification, and while Slack
    holds it off the reply of its last scale-up: 0.27.0 takes the lead, shows the one and posts
    the other."""
    last = f"Incident 1: Scaled {RUNNER} by +{LAST_ADDS}"

    def posts_of_last() -> list[Any]:
        calls = slack.emulator.calls("chat.postMessage")
        return [c for c in calls if str(c.params.get("text")).startswith(last)]

    slack.emulator.fail_next(
        "chat.postMessage", retry_after=HOLD_S, when=lambda p: str(p.get("text")).startswith(last)
    )
    await deliver(new, slash(f"scale {RUNNER} +{LAST_ADDS} 1"))
    await eventually(lambda: min_runners(kube) == SCALED, what="the last scale-up")
    [refused] = await eventually(posts_of_last, what="its reply refused for now")
    assert refused.status == 429
    await notify(new, "grafana", renotified(fixture_json(FIRING), wait=150))
    signalled_at = time.monotonic()
    await terminated(new)
    await eventually(lambda: "150 min" in text_of(root(slack, first.ts)), what="150 shown")
    [posted] = await eventually(lambda: posts_of_last()[1:], what="its reply posted")
    # The checkout's replica holds its posts for the whole Retry-After, so within it, after
    # SIGTERM, the post is 0.27.0's, from what the checkout had queued.
    assert posted.ok and signalled_at < posted.at < refused.at + HOLD_S


async def previous_release_alone(
    old: BotProcess,
    slack: Slack,
    kube: FakeKubeApi,
    grafana: FakeSilenceApi,
    first: Any,
    second: Any,
    as_rendered: dict[str, Any],
) -> None:
    """0.27.0 carries both incidents on: the same roots, statuses, the checkout's buttons, a
    resolve that sums up and puts every scale-up back, the next incident's number."""
    statuses_before = statuses_shown(slack, second.ts)
    await notify(old, "grafana", renotified(fixture_json(FIRING), wait=171))
    await eventually(lambda: "171 min" in text_of(root(slack, first.ts)), what="171 shown")
    assert "acknowledged by" in text_of(root(slack, first.ts))
    await eventually(
        lambda: statuses_shown(slack, second.ts) >= statuses_before + 2,
        what="statuses after the rollback",
        timeout=15,
    )
    await deliver(old, slash(""))
    listed = await eventually(
        lambda: [t for t in ephemeral_texts(slack) if t.startswith("*#2*")], what="/queue"
    )
    assert "*#1* Jobs queueing in autoscaled machines" in listed[0], listed

    ack = button_value(as_rendered["second"], "incident_ack")
    await deliver(old, press(ack, "incident_ack", second.ts))
    await eventually(
        lambda: "acknowledged by" in text_of(root(slack, second.ts)), what="2 acknowledged"
    )
    unsilence = button_value(as_rendered["first"], "incident_unsilence")
    await deliver(old, press(unsilence, "incident_unsilence", first.ts))
    await eventually(
        lambda: [s["status"]["state"] for s in grafana.silences.values()] == ["expired"],
        what="the checkout's Remove silence done",
    )
    await resolved_asked_once(old, slack, first, as_rendered["first"])
    await eventually(lambda: min_runners(kube) == 0, what="the scale-ups put back")
    await eventually(lambda: len(events(slack, first.ts)) == len(EVENTS_1), what="all said")
    [put_back] = [text for text in events(slack, first.ts) if text.startswith(PUT_BACK)]
    assert f"minRunners {SCALED} → 0" in put_back, "the three scale-ups went back at once"

    # A new alert group: the number after the checkout's, never one of theirs again.
    await notify(old, "grafana", as_group("after-the-rollback"))
    await eventually(lambda: len(roots(slack)) == 3, what="incident 3's root")
    for number, message in enumerate(roots(slack), 1):
        assert f"ID *{number}*" in text_of(root(slack, message.ts))


async def warned_and_scaled(redis_url: str, kube: FakeKubeApi, kubeconfig: str) -> PutBackDue:
    """An early warning of another runner type, scaled up from, as this release stores both (the
    scale-up recorded to go back once the warning is over); 0.27.0 reads them from then on."""
    scale_set = kube.add_from_fixture(WARNED_SET[1], minRunners=0, maxRunners=120)
    scale_set["status"]["currentRunners"] = 40
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        config = Settings(backend_timeout_seconds=2, status_tick_seconds=0.2)
        arc = ArcScaler(config, kube_access(kubeconfig, {}))
        warnings = WarningStore(client, KEYS)
        reverts = ScaleReverts(
            client,
            KEYS,
            IncidentStore(client, KEYS.prefix),
            arc,
            config=config,
            clock=lambda: datetime.now(UTC),
            warnings=warnings,
        )
        text = f"{WARNED}: queue building, 9 queued and +1.4/min; the alert fires in ~11 min"
        state = WarningState.raised(WARNED, CHANNEL, text, time.time(), scalable=True)
        result = await arc.scale(ScaleRequest(WARNED_TARGET, WARNED_ADDS, "", USER))
        assert result.undo is not None
        record = await reverts.remember("", WARNED_TARGET, result.undo, by=USER, warning=state.uid)
        line = f"alice scaled {WARNED} by +{WARNED_ADDS}: minRunners 0 → {WARNED_ADDS} (ARC)."
        plan = reverts.plan(warning=True)
        said = ScaleUp(
            runner_type=WARNED, added=WARNED_ADDS, by=USER, back=record.id, said=line, fate=plan
        )
        assert await warnings.save(state.changed(time.time(), scaled=(said,)))
        return record
    finally:
        await client.aclose()


async def still_standing(store: redis.Redis, kube: FakeKubeApi, record: PutBackDue) -> None:
    """0.27.0 has looked at the warning's scale-up, again and again, and kept it."""

    def looked_again() -> bool:
        # Each look keeps it a check's interval more; a claim holds it 30 s and more.
        due = store.zscore(KEYS.scale_reverts, record.id)
        return due is not None and record.scaled_at + 1 < due < time.time() + 10

    await eventually(looked_again, what="0.27.0 looking at it and keeping it")
    assert int(kube.sets[WARNED_SET]["spec"]["minRunners"]) == WARNED_ADDS, "not put back"
    assert store.exists(KEYS.warning(WARNED)), "the warning stands"


async def resolved_asked_once(old: BotProcess, slack: Slack, first: Any, rendered: Any) -> None:
    """The checkout's Resolve asked in its confirm with what is still live; pressed on 0.27.0,
    it resolves at once, not asked again."""
    [resolve] = [
        e
        for b in rendered.blocks
        for e in b.get("elements", [])
        if e.get("action_id") == "incident_resolve"
    ]
    assert resolve["confirm"]["confirm"]["text"] == "Resolve anyway", resolve
    assert resolve["confirm"]["text"]["text"].startswith("Still live:"), resolve
    await deliver(old, press(resolve["value"], "incident_resolve", first.ts))
    await eventually(lambda: "Resolved" in text_of(root(slack, first.ts)), what="1 resolved")


def nothing_duplicated_or_lost(slack: Slack, first_ts: str, second_ts: str) -> None:
    shown = [m.ts for m in roots(slack)]
    assert shown[:2] == [first_ts, second_ts] and len(shown) == 3, "one root per incident"
    final = text_of(root(slack, first_ts))
    assert "acknowledged by" in final and "incident_" not in final, "resolved, no buttons"
    once_each(events(slack, first_ts), EVENTS_1)
    once_each(events(slack, second_ts), EVENTS_2)
    answers = ephemeral_texts(slack)
    once_each([text for text in answers if not text.startswith(REPORT)], ANSWERS)
    assert reports(slack) == 2, answers
    for ts in (first_ts, second_ts):
        one_status_an_interval(slack, ts)
