"""`/queue` text -> Command: every form the README's `/queue` table documents, and errors that say
how to write it."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.actions.commands import (
    MAX_ANSWER,
    MAX_LINES,
    Command,
    CommandError,
    parse_command,
    parse_duration,
    perform,
    run_command,
)
from bot.actions.core import ActionCore, Actor
from bot.backends.silence import Silencer
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import record_status
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, RunnerTypeMetrics
from bot.domain.reading.judging import judged
from bot.render.numbers import EMPTY, type_lines
from bot.render.queue import _trend_of
from bot.render.root import render_root
from sandbox.silence_api import FakeSilenceApi
from sandbox.transcript import mrkdwn_to_text
from tests.support.cores import action_core, grafana_in_process
from tests.support.incidents import T0, make_incident
from tests.support.root_headline import headline_cases, root_headline


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("", Command("status")),
        ("   ", Command("status")),
        ("incidents", Command("incidents")),
        ("help", Command("help")),
        ("ack", Command("ack")),
        ("ack 12", Command("ack", incident_ref="12")),
        ("ack #12", Command("ack", incident_ref="12")),
        ("acknowledge 12", Command("ack", incident_ref="12")),
        ("resolve 3", Command("resolve", incident_ref="3")),
        ("resolve", Command("resolve")),
        ("resolve 3 anyway", Command("resolve", incident_ref="3", anyway=True)),
        ("resolve Anyway #3", Command("resolve", incident_ref="3", anyway=True)),
        ("resolve anyway", Command("resolve", anyway=True)),
        ("diagnose", Command("diagnose")),
        ("diagnose #4", Command("diagnose", incident_ref="4")),
        ("silence 2h", Command("silence", seconds=7200)),
        ("silence 30m 7", Command("silence", seconds=1800, incident_ref="7")),
        ("silence 1h30m", Command("silence", seconds=5400)),
        ("silence 1h30m #7", Command("silence", seconds=5400, incident_ref="7")),
        ("silence 2h 7 keep", Command("silence", seconds=7200, incident_ref="7", keep=True)),
        ("silence 2h KEEP", Command("silence", seconds=7200, keep=True)),
        ("scale linux.2xlarge +4", Command("scale", runner_type="linux.2xlarge", count=4)),
        (
            "scale linux.2xlarge 4 9",
            Command("scale", runner_type="linux.2xlarge", count=4, incident_ref="9"),
        ),
        (
            "scale linux.2xlarge +20 max",
            Command("scale", runner_type="linux.2xlarge", count=20, raise_maximum=True),
        ),
        (
            "scale linux.2xlarge +20 9 max",
            Command(
                "scale", runner_type="linux.2xlarge", count=20, incident_ref="9", raise_maximum=True
            ),
        ),
        (
            "scale linux.2xlarge +4 keep",
            Command("scale", runner_type="linux.2xlarge", count=4, keep=True),
        ),
        (
            "scale linux.2xlarge +4 KEEP 9 max",
            Command(
                "scale",
                runner_type="linux.2xlarge",
                count=4,
                incident_ref="9",
                raise_maximum=True,
                keep=True,
            ),
        ),
        ("unsilence", Command("unsilence")),
        ("unsilence #3", Command("unsilence", incident_ref="3")),
        ("  ack   12  ", Command("ack", incident_ref="12")),
        ("jobs", Command("jobs")),
        ("Jobs Linux.ARM64", Command("jobs", runner_type="Linux.ARM64")),
        ("pilot", Command("pilot")),
        ("pilot off", Command("pilot", on=False)),
        ("Pilot ON Linux.ARM64", Command("pilot", runner_type="Linux.ARM64", on=True)),
    ],
)
def test_parse_command_understands_every_documented_form(text: str, command: Command) -> None:
    assert parse_command(text) == command


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("ACK 12", Command("ack", incident_ref="12")),
        ("Resolve 3", Command("resolve", incident_ref="3")),
        ("HELP", Command("help")),
        ("Incidents", Command("incidents")),
        ("SILENCE 2H", Command("silence", seconds=7200)),
        ("Scale linux.2xlarge +1", Command("scale", runner_type="linux.2xlarge", count=1)),
    ],
)
def test_the_verb_is_case_insensitive(text: str, command: Command) -> None:
    assert parse_command(text) == command


def test_the_runner_type_keeps_its_case() -> None:
    # Runner labels are case-sensitive in GitHub Actions; only the verb is folded.
    assert parse_command("scale Linux.ARM64 +2").runner_type == "Linux.ARM64"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("silence", "/queue silence <duration> [ID]"),
        ("silence forever", "`forever` is not a duration"),
        ("silence 0m", "between 1 minute and 7 days"),
        ("silence 59s", "between 1 minute and 7 days"),
        ("silence 8d", "between 1 minute and 7 days"),
        ("silence 2h keep keep", "/queue silence <duration> [ID] [keep]"),
        ("silence 2h 7 8", "/queue silence <duration> [ID] [keep]"),
        ("scale", "/queue scale <runner-type> <+N> [ID]"),
        ("scale x", "/queue scale <runner-type> <+N> [ID]"),
        ("scale x +0", "at least 1 runner"),
        ("scale x -3", "/queue scale <runner-type> <+N> [ID]"),
        ("scale x lots", "/queue scale <runner-type> <+N> [ID]"),
        ("frobnicate", "unknown command `frobnicate`"),
        ("jobs linux.2xlarge extra", "/queue jobs [runner-type]"),
        ("resolve 3 4", "/queue resolve [ID] [anyway]"),
        ("diagnose 3 4", "/queue diagnose [ID]"),
        ("unsilence 3 please", "/queue unsilence [ID]"),
        ("postmortem #3 #4", "/queue postmortem [ID]"),
        ("pilot linux.2xlarge", "/queue pilot [off|on] [runner-type]"),
        ("pilot off linux.2xlarge now", "/queue pilot [off|on] [runner-type]"),
    ],
)
def test_errors_say_how_to_write_the_command(text: str, hint: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text)

    assert hint in mrkdwn_to_text(str(caught.value)), "as Slack shows it"


def test_an_unknown_command_points_at_help() -> None:
    with pytest.raises(CommandError, match=r"Try `/queue help`"):
        parse_command("frobnicate 12")


def test_error_text_escapes_what_the_user_typed() -> None:
    # The error is echoed back into Slack: a typed `<!channel>` must not ping anyone.
    with pytest.raises(CommandError) as caught:
        parse_command("<!channel>")

    assert "<!channel>" not in str(caught.value)
    assert "&lt;!channel&gt;" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m", 60),
        ("30m", 1800),
        ("2h", 7200),
        ("1h30m", 5400),
        ("90s", 90),
        ("1d", 86_400),
        ("7d", 7 * 86_400),
        ("1d2h3m4s", 86_400 + 7200 + 180 + 4),
        ("2H", 7200),
        (" 45m ", 2700),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "  ", "m", "h2", "30", "30x", "30m2h", "-5m", "1.5h", "forever", "0m", "59s", "7d1s"],
)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(CommandError):
        parse_duration(text)


# -- answering: against the real store -------------------------------------------------------


async def open_many(redis_url: str, count: int, silencer: Silencer | None = None) -> ActionCore:
    from redis.asyncio import Redis

    from bot.domain.alerting.alerts import parse_notification
    from bot.domain.alerting.delivery import delivery_of
    from bot.domain.incident.incidents import GroupState, open_incident
    from bot.storage.incident_store import Commit, IncidentStore
    from tests.support.payloads import fixture_json

    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    payload = fixture_json("grafana/queue-alert-firing.json")
    for n in range(1, count + 1):
        payload["groupKey"] = f"group-{n}"
        payload["groupLabels"]["alertname"] = f"Queue <{n}> " + "long title " * 20
        incident = open_incident(
            delivery_of(parse_notification("grafana", payload)),
            incident_id=str(n),
            uid=f"u{n}",
            channel="C1",
            now=datetime.now(UTC),
        )
        group = GroupState(incident_id=incident.id)
        await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))

    return action_core(redis, store, silencer=silencer)


@pytest.mark.parametrize("count", [1, 3, 250])
async def test_the_overview_stays_within_one_message_at_any_count(
    redis_url: str, count: int
) -> None:
    core = await open_many(redis_url, count)

    outcome = await run_command(core, Actor("U1", "al"), "")

    assert len(outcome.message) <= MAX_ANSWER
    assert "&lt;1&gt;" in outcome.message or count > MAX_LINES, "titles escaped"
    shown = outcome.message.count("*#")
    assert 1 <= shown <= MAX_LINES
    if count > shown:
        assert f"… and {count - shown} more" in outcome.message


@pytest.mark.parametrize("verb", ["", "incidents"])
async def test_each_incident_is_listed_with_the_numbers_its_root_says(
    redis_url: str, verb: str
) -> None:
    """Live when the root is live, and summed over the alert's types when it names them, not
    the alert's own figure (its rule's maximum: 14 beside a live 30, 10 beside 4 + 10)."""
    from redis.asyncio import Redis

    from bot.domain.incident.incidents import GroupState
    from bot.storage.incident_store import Commit, IncidentStore

    now = datetime.now(UTC)
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = IncidentStore(redis, "qp")
    cases = headline_cases(now)
    for incident in cases.values():
        group = GroupState(incident_id=incident.id)
        await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))
    core = action_core(redis, store)

    outcome = await run_command(core, Actor("U1", "al"), verb)

    for case, incident in cases.items():
        queued, wait = root_headline(incident, now)
        [line] = [ln for ln in outcome.message.splitlines() if f"*#{incident.id}*" in ln]
        assert line.endswith(f"— firing, {wait}, {queued}"), (case, line)
    live = outcome.message.split("*#21*")[1].split("*#")[0]
    assert "`linux.2xlarge`: 12 queued, longest wait 40 min" in live, "the types read live"


async def test_an_action_without_an_id_asks_which_when_several_are_open(redis_url: str) -> None:
    core = await open_many(redis_url, 3)

    outcome = await run_command(core, Actor("U1", "al"), "ack")

    assert not outcome.ok
    assert "3 incidents are open" in outcome.message and "/queue ack" in outcome.message
    assert all(f"#{n}" in outcome.message for n in (1, 2, 3))
    assert all(i.acknowledged.by is None for i in await core.open_incidents()), "nothing acted on"


async def test_an_action_without_an_id_acts_on_the_one_open_incident(redis_url: str) -> None:
    core = await open_many(redis_url, 1)

    outcome = await run_command(core, Actor("U1", "al"), "ack")

    assert outcome.ok and "incident 1" in outcome.message
    [incident] = await core.open_incidents()
    assert (incident.acknowledged.by, incident.acknowledged.name) == ("U1", "al")


async def test_a_reference_from_before_a_data_loss_never_acts_on_a_new_incident(
    redis_url: str,
) -> None:
    """Redis lost everything and the short IDs started again at 1: a button that still says
    `1:<old uid>` must not acknowledge the new incident 1."""
    core = await open_many(redis_url, 1)

    outcome = await core.acknowledge(Actor("U1", "al"), "1:uid-before-the-loss")

    assert not outcome.ok and "no longer known" in outcome.message
    [incident] = await core.open_incidents()
    assert incident.acknowledged.by is None
    assert (await core.acknowledge(Actor("U1", "al"), "1:u1")).ok, "its own reference works"


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("frobnicate", "unknown command `frobnicate`"),
        ("silence", "usage: `/queue silence <duration> [ID] [keep]`"),
        ("silence forever", "`forever` is not a duration"),
        ("scale linux.2xlarge lots", "usage: `/queue scale <runner-type> <+N> [ID] [max] [keep]`"),
    ],
)
async def test_bad_input_answers_what_was_wrong_and_the_help(
    redis_url: str, text: str, wrong: str
) -> None:
    core = await open_many(redis_url, 1)
    outcome = await run_command(core, Actor("U1", "al"), text)
    assert not outcome.ok
    assert mrkdwn_to_text(outcome.message).startswith(wrong), "as Slack shows it"
    assert "*`/queue unsilence [ID]`*" in outcome.message, "the help follows"
    assert "*`/queue jobs [runner-type]`*" in outcome.message


@pytest.mark.parametrize(
    ("text", "usage"),
    [
        ("ack 1 2", "usage: `/queue ack [ID]`"),
        ("acknowledge #1 #2", "usage: `/queue acknowledge [ID]`"),
        ("silence 2h 1 2", "usage: `/queue silence <duration> [ID] [keep]`"),
        ("silence 2h 1 for the deploy", "usage: `/queue silence <duration> [ID] [keep]`"),
    ],
)
async def test_extra_words_are_refused_and_nothing_is_done(
    redis_url: str, text: str, usage: str
) -> None:
    """`ack 1 2` does not acknowledge #1 alone: the person meant both, or typed one too many."""
    grafana = FakeSilenceApi()
    core = await open_many(redis_url, 2, silencer=grafana_in_process(grafana))
    outcome = await run_command(core, Actor("U1", "al"), text)
    assert not outcome.ok
    assert mrkdwn_to_text(outcome.message).startswith(usage), "as Slack shows it"
    incidents = await core.open_incidents()
    assert [(i.acknowledged.by, i.silence) for i in incidents] == [(None, None)] * 2
    assert grafana.silences == {}, "no silence was made"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (Command("silence", incident_ref="1"), "A silence lasts between 1 minute and 7 days."),
        (Command("scale", count=2), "Scaling from Slack is turned off"),
    ],
)
async def test_a_command_without_its_amount_is_refused_by_the_core(
    redis_url: str, command: Command, said: str
) -> None:
    core = await open_many(redis_url, 1)
    outcome = await perform(core, Actor("U1", "al"), command)
    assert not outcome.ok and outcome.result == "refused"
    assert outcome.message.startswith(said), outcome.message
    assert len(await core.open_incidents()) == 1, "nothing was done"


async def test_resolve_while_the_queue_is_live_asks_once_more_and_anyway_resolves(
    redis_url: str,
) -> None:
    """The reference alert: its rule said the 114-minute wait is over its threshold."""
    core = await open_many(redis_url, 1)

    asked = await run_command(core, Actor("U1", "al"), "resolve")
    assert not asked.ok and len(await core.open_incidents()) == 1
    assert mrkdwn_to_text(asked.message).startswith(
        "Incident 1 is still live: the longest wait 114 min (the alert last said it was over its "
        "threshold) and the alert is still firing."
    )
    assert "`/queue resolve 1 anyway`" in asked.message
    [button] = [e for b in asked.blocks for e in b.get("elements", ()) if e["type"] == "button"]
    assert (button["action_id"], button["value"]) == ("incident_resolve_anyway", "1:u1")

    done = await run_command(core, Actor("U1", "al"), "resolve 1 anyway")
    assert done.ok and done.message == "You resolved incident 1 with the longest wait 114 min."
    assert len(await core.open_incidents()) == 0


async def test_acknowledge_racing_resolve_ends_consistently(redis_url: str) -> None:
    """Whatever order the two land in, the incident ends resolved, and each person is told the
    truth: the acknowledge either came first (and is kept) or is told it was too late."""
    import asyncio

    for _ in range(10):
        core = await open_many(redis_url, 1)
        ack, resolve = await asyncio.gather(
            core.acknowledge(Actor("U1", "al"), "1"),
            core.resolve(Actor("U2", "bo"), "1", anyway=True),
        )
        (incident,) = await core.recent(1)
        assert not incident.is_open and resolve.ok
        if ack.ok:
            assert incident.acknowledged.by == "U1"
        else:
            assert "already resolved" in ack.message and incident.acknowledged.by is None
        await core.acting.store._redis.flushdb()  # type: ignore[attr-defined]  # next round afresh


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("silence " + "9" * 5000 + "m", "between 1 minute and 7 days"),
        ("silence " + "9" * 5000, "is not a duration"),
        ("silence 99999999999999999999d", "between 1 minute and 7 days"),
        ("silence ١٢m", "is not a duration"),  # int('١٢') is 12: not what anyone typed
        ("silence ²m", "is not a duration"),  # '²'.isdigit(), but int('²') raises
        ("silence 1e999h", "is not a duration"),
        ("scale x +" + "9" * 5000, "at most 9999"),
        ("scale x +١٢", "usage: `/queue scale"),
        ("scale x 1_000", "usage: `/queue scale"),
        ("ack " + "7" * 5000, "is not an incident ID"),
    ],
)
def test_numbers_no_one_means_are_refused_saying_what_is_wrong(text: str, wrong: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text)
    assert wrong in str(caught.value)
    assert len(str(caught.value)) < 300, "the answer does not echo thousands of digits"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.from_regex(r"(silence|scale x|ack) \+?[0-9٠-٩²]{1,6000}[dhms]?"))
def test_any_text_is_a_command_or_says_what_is_wrong(text: str) -> None:
    with contextlib.suppress(CommandError):
        command = parse_command(text)
        assert command.seconds is None or 60 <= command.seconds <= 7 * 86_400
        assert command.count is None or 1 <= command.count <= 9999


def test_queue_says_the_readings_judgement_as_the_root_does() -> None:
    """`/queue`'s line of a type renders the reading's judgement, as the root of the incident
    showing that reading does: the same direction and advice; the sparkline is that incident's
    trend (an incident showing other types, or none open: no trend)."""
    name = "linux.2xlarge"
    incident = make_incident(runner_types={})
    history: list[HistoryPoint] = []
    for minute, queued in ((0, 10), (1, 20), (2, 30)):
        at = T0 + timedelta(minutes=minute)
        read = FleetSnapshot(
            at=at,
            source="hud",
            runner_types={name: RunnerTypeMetrics(queued=queued, job_duration_mins=30.0)},
        )
        live = judged(read, history, interval=timedelta(minutes=1))
        history.append(HistoryPoint(at, {}, {}, {name: {"queued": float(queued)}}))
        incident = record_status(incident, as_snapshot(incident, live, at), live=live)
    other = make_incident(id="13", runner_types={}, live=None)
    trend = _trend_of(live, [other, incident])
    assert trend == incident.trend and _trend_of(live, [other]) is EMPTY
    [queue_line] = type_lines(live, trend)
    root = json.dumps(render_root(incident, now=T0 + timedelta(minutes=2)).blocks)
    spark, direction, advice = queue_line.split(" · ")[-3:]
    assert spark == "▃▆█", "the bars as plain text: in inline code Slack draws them red on grey"
    assert direction == "▲ rising +10.0 jobs/min"
    assert advice == "+330 runners would drain it in 30 min"
    for said in (direction, advice):
        assert json.dumps(said)[1:-1] in root, (said, root)
