"""Alert storms, as a channel sees them: new groups faster than Slack lets a channel post are
listed at once in one digest, their threads follow most severe first, and nothing is lost or
shown twice, with two replicas and Slack's own limits."""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.domain.alerting.alerts import QueueNumbers
from bot.domain.incident.incidents import Incident, severity_rank
from bot.outbound.storm import continuation_due, edit_within_s
from bot.render.digest import MAX_LINES, DigestEntry, render_digest
from sandbox.slack_limits import validate_blocks
from tests.support.payloads import fixture_json
from tests.support.root_headline import headline_cases, root_headline
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
STORM_MARK = "Alert storm"


def storm_group(n: int, *, priority: str = "P2") -> dict[str, Any]:
    """A group of its own, named so a reader can tell it from the others."""
    payload = copy.deepcopy(fixture_json(FIRING))
    name = f"Queue storm {n:03d}"
    payload["groupKey"] = f"{payload['groupKey']}/storm-{n}"
    payload["groupLabels"] = {"alertname": name}
    payload["commonLabels"]["alertname"] = name
    for alert in payload["alerts"]:
        alert["labels"]["alertname"] = name
        alert["annotations"]["Priority"] = priority
    payload["commonAnnotations"]["Priority"] = priority
    return payload


def shown(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


def digests(slack: Slack) -> list[Any]:
    return [m for m in slack.emulator.channel_messages(CHANNEL) if STORM_MARK in m.text]


def roots(slack: Slack) -> list[Any]:
    """Incident roots in post order (the digest is not one)."""
    return [m for m in slack.emulator.channel_messages(CHANNEL) if STORM_MARK not in m.text]


def visible(slack: Slack, names: list[str]) -> list[str]:
    everything = "".join(shown(m) for m in slack.emulator.channel_messages(CHANNEL))
    return [name for name in names if name in everything]


async def send_all(bots: list[RunningBot], payloads: list[dict[str, Any]]) -> None:
    """Deliver at once, spread over the replicas, as Alertmanager's peers or Grafana would."""
    gate = asyncio.Semaphore(20)

    async def one(n: int, payload: dict[str, Any]) -> None:
        async with gate:
            response = await bots[n % len(bots)].send("grafana", payload)
            assert response.status_code == 202, response.text

    await asyncio.gather(*(one(n, p) for n, p in enumerate(payloads)))


def opened(bots: list[RunningBot]) -> float:
    return sum(
        b.bot.telemetry.registry.get_sample_value("queuepilot_incidents_opened_total") or 0
        for b in bots
    )


# -- a storm at Slack's pace, two replicas --------------------------------------------------


async def test_a_storm_of_120_groups_is_listed_at_once_within_slacks_limits_by_two_replicas(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    slack.emulator.enforce_rate_limits = True
    names = [f"Queue storm {n:03d}" for n in range(120)]
    try:
        # Slack's pace, the defaults: one post a second, short bursts.
        settings = settings_for(slack_post_interval_ms=1000, slack_update_interval_ms=1200)
        async with run_bot(settings) as one, run_bot(settings) as two:
            await send_all([one, two], [storm_group(n) for n in range(120)])
            await eventually(
                lambda: len(visible(slack, names)) == 120,
                timeout=30,
                what="all 120 groups visible",
            )
            assert opened([one, two]) == 120, "every group accepted opened one incident"
            # A few threads follow at one post a second, each group once.
            await eventually(lambda: len(roots(slack)) >= 4, timeout=15, what="threads following")
    finally:
        slack.emulator.enforce_rate_limits = False

    assert len(digests(slack)) == 1, "one digest, whichever replica sent"
    [digest] = digests(slack)
    listed = json.dumps(digest.blocks)
    # The first few may have had their own roots before the storm was seen: listed at most once.
    assert all(listed.count(name) <= 1 for name in names), "no group listed twice"
    assert sum(listed.count(name) for name in names) >= 110, "the storm is in the digest"
    limited = [c for c in slack.emulator.calls() if c.status == 429]
    assert len(limited) <= 10, f"{len(limited)} calls answered 429"
    titles = Counter(m.text for m in roots(slack))
    assert all(n == 1 for n in titles.values()), f"a group posted twice: {titles}"


# -- a storm during a Slack outage: order, threads, links, summary ---------------------------


async def test_after_an_outage_the_digest_comes_first_then_the_most_severe_threads(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    settings = settings_for(slack_post_interval_ms=50, storm_quiet_seconds=1)
    urgent = list(range(25, 30))
    payloads = [storm_group(n, priority="P1" if n in urgent else "P3") for n in range(30)]
    async with run_bot(settings) as running:
        slack.emulator.fail_next("chat.postMessage", status=503, count=100_000)
        await send_all([running], payloads)
        await eventually(lambda: opened([running]) == 30, what="30 incidents")
        slack.emulator.clear_faults()

        await eventually(lambda: len(roots(slack)) == 30, timeout=20, what="every thread")
        await eventually(
            lambda: "Alert storm over" in digests(slack)[0].text, timeout=20, what="summary"
        )

    [digest, *_] = slack.emulator.channel_messages(CHANNEL)
    assert STORM_MARK in digest.text, "the digest is the first thing the channel shows"
    first = [m.text for m in roots(slack)[: len(urgent)]]
    assert all("P1" in text for text in first), f"the most severe first: {first}"
    assert Counter(m.text for m in roots(slack)).most_common(1)[0][1] == 1, "no group twice"
    # The summary links every group to its thread.
    summary = shown(digests(slack)[0])
    for root in roots(slack):
        link = f"/archives/{CHANNEL}/p{root.ts.replace('.', '')}"
        assert link in summary, f"no link to {root.text}"
    assert "30 alert groups" in digests(slack)[0].text
    assert "thread soon" not in summary


def counted(slack: Slack) -> tuple[int, str]:
    """(incident roots, the last digest message as shown), read in place: a storm's channel is
    hundreds of messages, too many to copy at every poll."""
    with slack.emulator.reading() as workspace:
        top = [m for m in workspace.channels[CHANNEL].timeline if m.thread_ts is None]
        storm = [m for m in top if STORM_MARK in m.text]
        return len(top) - len(storm), shown(storm[-1]) if storm else ""


@pytest.mark.slow
async def test_a_full_digest_with_no_root_waiting_counts_a_late_group_as_more_and_ends(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """A group joining once the last digest message is full (MAX_LINES) and its root is out
    can get no continuation (one begins only in a root's slot): the last message takes it as
    "+1 more", so the storm counts every group and is over once its threads are linked. The
    digest sees the late root waiting first (its post is answered a second late), when a
    continuation could still list the group, and then out."""
    settings = settings_for(slack_post_interval_ms=5, storm_quiet_seconds=1)
    async with run_bot(settings) as running:
        slack.emulator.fail_next("chat.postMessage", status=503, count=100_000)
        await send_all([running], [storm_group(n) for n in range(MAX_LINES)])
        await eventually(lambda: opened([running]) == MAX_LINES, timeout=30, what="incidents")
        # Slack is back, but no thread can be linked yet: the storm cannot end before the
        # late group joins (no await between the two, so the bot sees both at once).
        slack.emulator.clear_faults()
        slack.emulator.fail_next("chat.getPermalink", status=503, count=100_000)
        await eventually(
            lambda: counted(slack)[0] == MAX_LINES, timeout=30, what="every thread posted"
        )
        [digest] = digests(slack)
        assert f"{MAX_LINES} new alert groups" in digest.text
        assert "more:" not in shown(digest), "every group of the storm has its line"

        late = "Queue storm 300"
        slack.emulator.stall("chat.postMessage", 1)
        await running.send("grafana", storm_group(MAX_LINES))
        await eventually(lambda: counted(slack)[0] == MAX_LINES + 1, what="the late root")
        await eventually(
            lambda: "+1 more" in counted(slack)[1],
            timeout=30,
            what="the full digest counting the late group as one more",
        )
        slack.emulator.stall("chat.postMessage", 0)
        assert f"{MAX_LINES + 1} new alert groups" in digests(slack)[0].text
        slack.emulator.clear_faults()  # the threads can be linked: the storm can end
        await eventually(
            lambda: "Alert storm over" in counted(slack)[1], timeout=30, what="summary"
        )

    assert len(digests(slack)) == 1, "no continuation: no root was waiting to post one"
    [summary] = digests(slack)
    assert f"Alert storm over: {MAX_LINES + 1} alert groups" in summary.text
    assert "+1 more" in shown(summary), "the summary still counts the late group"
    assert visible(slack, [late]) == [late], "its own thread shows it"


async def test_a_digest_whose_answer_was_lost_is_looked_up_not_posted_twice(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """The digest takes the path of every post: Slack posts it, the answer never arrives, and
    the sender finds it in the channel rather than posting a second one."""
    settings = settings_for(slack_timeout_seconds=0.5, storm_quiet_seconds=1)
    slack.emulator.stall("chat.postMessage", 3)  # Slack posts; the answer comes too late
    try:
        async with run_bot(settings) as running:
            await send_all([running], [storm_group(n) for n in range(10)])
            await eventually(lambda: digests(slack), what="the digest posted", timeout=20)
            await eventually(
                lambda: (
                    (
                        running.bot.telemetry.registry.get_sample_value(
                            "queuepilot_slack_lookups_total", {"outcome": "found"}
                        )
                        or 0
                    )
                    >= 1
                ),
                what="a post looked up and found",
                timeout=20,
            )
            slack.emulator.stall("chat.postMessage", 0)
            await eventually(lambda: len(roots(slack)) == 10, timeout=20, what="every thread")
            await eventually(
                lambda: "Alert storm over" in digests(slack)[0].text, timeout=20, what="summary"
            )
    finally:
        slack.emulator.stall("chat.postMessage", 0)

    assert len(digests(slack)) == 1, "one digest"
    assert Counter(m.text for m in roots(slack)).most_common(1)[0][1] == 1, "no group twice"
    assert "10 alert groups" in digests(slack)[0].text


async def test_a_digest_slack_refuses_for_good_lets_the_roots_go_on_alone(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """A digest Slack will never take must not hold the channel: the storm's roots go out one
    by one, and no new storm (and digest) opens for a while, or a digest refused every time
    would keep every root waiting behind it."""
    settings = settings_for(slack_post_interval_ms=50, storm_quiet_seconds=60)
    async with run_bot(settings) as running:
        slack.emulator.fail_next("chat.postMessage", status=503, count=100_000)
        await send_all([running], [storm_group(n) for n in range(10)])
        await eventually(lambda: opened([running]) == 10, what="10 incidents")
        slack.emulator.clear_faults()
        # The next post is the storm's digest: Slack refuses it for good, for its first block.
        slack.emulator.fail_next(
            "chat.postMessage",
            status=200,
            error="invalid_blocks",
            messages=[
                "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/0/text]",
                "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]",
            ],
        )
        await eventually(lambda: len(roots(slack)) == 10, timeout=20, what="every thread")
        undeliverable = running.bot.telemetry.registry.get_sample_value(
            "queuepilot_slack_undeliverable_total", {"error": "invalid_blocks"}
        )

    refused = [c for c in slack.emulator.calls("chat.postMessage") if c.error == "invalid_blocks"]
    assert len(refused) == 1 and "storm" in json.dumps(refused[0].params.get("metadata"))
    assert digests(slack) == [], "no second digest while the storm is paused"
    assert Counter(m.text for m in roots(slack)).most_common(1)[0][1] == 1, "no group twice"
    assert undeliverable == 1


async def test_a_few_new_groups_are_no_storm_and_the_digest_can_be_turned_off(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for(storm_digest_threshold=0)) as running:
        slack.emulator.fail_next("chat.postMessage", status=503, count=100_000)
        await send_all([running], [storm_group(n) for n in range(12)])
        await eventually(lambda: opened([running]) == 12, what="12 incidents")
        slack.emulator.clear_faults()
        await eventually(lambda: len(roots(slack)) == 12, what="12 threads")
    assert digests(slack) == [], "off: no digest however many wait"

    slack.emulator.reset()
    async with run_bot(settings_for(storm_digest_threshold=5)) as running:
        for n in range(3):  # below the threshold, even all at once
            await running.send("grafana", storm_group(100 + n))
        await eventually(lambda: len(roots(slack)) == 3, what="3 threads")
    assert digests(slack) == []


# -- the digest, alone ----------------------------------------------------------------------

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def incident(n: int, *, title: str = "Jobs queueing", priority: str | None = "P2") -> Incident:
    return Incident(
        id=str(n),
        uid=f"u{n}",
        channel=CHANNEL,
        group_key=f"g{n}",
        group_hash=f"h{n}",
        source="grafana",
        title=title,
        priority=priority,
        numbers=QueueNumbers(max_queue_size=14, max_queue_time_mins=114),
        started_at=NOW,
        opened_at=NOW,
        updated_at=NOW,
    )


@settings(max_examples=40, deadline=None)
@given(
    titles=st.lists(st.text(min_size=1, max_size=400), min_size=1, max_size=400),
    over=st.booleans(),
)
def test_the_digest_stays_within_block_kit_limits_however_many_and_whatever_titles(
    titles: list[str], over: bool
) -> None:
    entries = [
        DigestEntry(incident(n, title=t), threaded=n % 2 == 0, link=f"https://x.slack.com/p{n}")
        for n, t in enumerate(titles)
    ]
    digest = render_digest(entries, started=NOW, now=NOW + timedelta(minutes=3), over=over)
    assert validate_blocks(digest.blocks) == []
    everything = json.dumps(digest.blocks)
    if len(titles) > MAX_LINES or "more:" in everything:
        assert "/queue incidents" in everything, "past the limits, the way to see the rest"
    assert "<!channel>" not in everything and "<!here>" not in everything


def test_hostile_titles_reach_the_digest_inert() -> None:
    entries = [DigestEntry(incident(1, title="<!channel> <https://evil|click> & co"), False)]
    digest = render_digest(entries, started=NOW, now=NOW, over=False)
    text = json.dumps(digest.blocks)
    assert "<!channel>" not in text and "<https://evil" not in text
    assert "&lt;!channel&gt;" in text


def test_the_summary_counts_what_is_still_firing_and_by_priority() -> None:
    entries = [
        DigestEntry(incident(1, priority="P1"), True, "https://x.slack.com/archives/C/p1"),
        DigestEntry(incident(2, priority="P3"), True, "https://x.slack.com/archives/C/p2"),
        DigestEntry(incident(3, priority="P3"), True, ""),
    ]
    summary = render_digest(entries, started=NOW, now=NOW + timedelta(minutes=2), over=True)
    text = json.dumps(summary.blocks, ensure_ascii=False)
    assert "Alert storm over: 3 alert groups" in summary.text
    assert "3 still firing, 0 resolved" in text and "2 min" in text
    assert "P1 × 1" in text and "P3 × 2" in text
    assert "<https://x.slack.com/archives/C/p1|thread>" in text


@pytest.mark.parametrize("case", ["live", "alert"])
def test_a_digest_line_says_the_numbers_its_root_says(case: str) -> None:
    """Live when the root is live, and summed over the alert's types when it names them, not
    the alert's own figure (its rule's maximum: 14 beside a live 30, 10 beside 4 + 10)."""
    shown = headline_cases(NOW)[case]
    queued, wait = root_headline(shown, NOW)

    digest = render_digest([DigestEntry(shown, threaded=True)], started=NOW, now=NOW, over=False)

    [line] = [ln for ln in digest.text.splitlines() if f"#{shown.id}" in ln]
    assert f" · {queued}, {wait} · " in line, (queued, wait, line)
    assert queued == {"live": "30 queued", "alert": "14 queued"}[case]


@given(st.text(max_size=20))
def test_any_priority_has_a_rank(priority: str) -> None:
    assert 0 <= severity_rank(priority) <= 5


def test_priorities_rank_most_severe_first() -> None:
    ranked = ["P0", "p1", "critical", "SEV2", "P3", "warning", "P9", "low", None, "whatever"]
    assert [severity_rank(p) for p in ranked] == [0, 1, 1, 2, 3, 3, 4, 4, 5, 5]


# -- growing the digest: an edit while the app-wide budget gives one soon, else a continuation --

JOINED = 1_000_000  # when the oldest group still without a line joined (a fake clock, in ms)


def test_nothing_waiting_needs_neither_an_edit_nor_a_continuation() -> None:
    assert not continuation_due(0, JOINED + 60_000)
    assert edit_within_s(0, JOINED, roots_waiting=True) is None


@pytest.mark.parametrize(
    ("after_ms", "within_s", "continued"),
    [
        (0, 1.5, False),  # just joined: an edit may take the whole patience
        (1000, 0.5, False),  # what is left of it
        (1499, 0.001, False),
        (1500, 0.0, True),  # spent: the channel's next post lists them
        (30_000, 0.0, True),  # twenty channels' edits ahead: never wait half a minute
    ],
)
def test_an_edit_may_wait_out_the_patience_then_a_continuation_is_due(
    after_ms: int, within_s: float, continued: bool
) -> None:
    now = JOINED + after_ms
    assert edit_within_s(JOINED, now, roots_waiting=True) == pytest.approx(within_s)
    assert continuation_due(JOINED, now) is continued


def test_with_no_root_waiting_the_digest_takes_them_in_whenever_its_edit_comes() -> None:
    """Their roots are out already (they show the groups), and no post is coming to list them:
    the last digest message adds them in its own time, not in a continuation."""
    assert edit_within_s(JOINED, JOINED + 30_000, roots_waiting=False) is None


def test_a_continuation_lists_its_own_groups_and_the_first_message_counts_the_storm() -> None:
    first = [DigestEntry(incident(n), threaded=False) for n in range(3)]
    later = [DigestEntry(incident(n, priority="P1"), threaded=n == 4) for n in range(3, 5)]

    head = render_digest(first, started=NOW, now=NOW, over=False, storm_entries=first + later)
    more = render_digest(later, started=NOW, now=NOW, over=False, part=1)

    assert head.text.startswith("⛈️ Alert storm: 5 new alert groups")
    assert "messages below" in json.dumps(head.blocks)
    assert [n for n in range(5) if f"*#{n}*" in json.dumps(head.blocks)] == [0, 1, 2]
    assert more.text.startswith("⛈️ Alert storm, continued: 2 more")
    assert [n for n in range(5) if f"*#{n}*" in json.dumps(more.blocks)] == [3, 4]
    assert "1 of 2 so far" in json.dumps(more.blocks, ensure_ascii=False)
    over = render_digest(later, started=NOW, now=NOW, over=True, part=1)
    assert over.text.startswith("⛅ Alert storm over, continued: 2 alert groups")
    assert validate_blocks(more.blocks) == [] and validate_blocks(over.blocks) == []
