"""GitHub's hourly quota as a budget the readings keep: a busy repository read for three hours
(compressed: one clock moved by the test, shared by GitHub's stand-ins and the bot's client) on
one token with the alert's issue, against GitHub's primary rate-limit rules."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.backends.github_api import GithubApi, Rate, rate_of
from bot.backends.issues import GithubIssues
from bot.backends.metrics.github import GithubMetrics, reading_pace
from bot.config import Settings
from bot.domain.incident.incidents import Event, Incident, acknowledge, with_action
from bot.domain.reading.fleet import Reading
from bot.fleet.readings import FleetReadings
from bot.pacing import Pacing
from bot.render.numbers import source_note
from bot.render.root import render_root
from bot.storage.incident_store import Commit, IncidentStore
from sandbox.github_issues import TOKEN
from tests.support.alert_issue import REPO as ISSUES_REPO
from tests.support.alert_issue import commit_event, keeper, opened_due, with_thread
from tests.support.busy_github import REPO, BusyGithub
from tests.support.store import KEYS

TICK_S = 20  # how often the leader's ticks ask for the reading and the issue's due passes
SHARE = 0.6
HEADERS = [f"x-ratelimit-{n}" for n in ("limit", "remaining", "used", "reset", "resource")]


def settings(**values: object) -> Settings:
    return Settings(  # type: ignore[call-arg]
        github_token=TOKEN,
        github_api_url="http://api.github.test",
        github_org="pytorch",
        github_repos=(REPO,),
        metrics_backend="github",
        github_reading_share=SHARE,
        **values,
    )


def on_one_token(gh: BusyGithub, redis: Redis) -> tuple[GithubMetrics, FleetReadings, GithubApi]:
    """The readings and the alert issue's client, as the bot wires them, on one token and one
    clock with the stand-ins; the alert issue's repository made."""
    gh.issues.repo(ISSUES_REPO)
    config = settings()
    metrics = GithubMetrics(config, GithubApi(config, gh.client(), clock=gh.clock))
    readings = FleetReadings(redis, KEYS, metrics, config=config, clock=gh.clock.at)
    return metrics, readings, GithubApi(config, gh.client(), concurrency=1, clock=gh.clock)


@dataclass
class Seen:
    """The readings as the surfaces saw them: (when read, complete, where its numbers come
    from as the root and the statuses say it)."""

    readings: list[tuple[datetime, bool, str]] = field(default_factory=list)

    def see(self, reading: Reading | None) -> None:
        fleet = reading.fleet if reading is not None else None
        if fleet is not None and (not self.readings or self.readings[-1][0] != fleet.at):
            self.readings.append((fleet.at, fleet.absent_means_empty, source_note(fleet)))


@pytest.mark.slow
async def test_a_busy_repository_read_for_three_hours_keeps_its_share_of_githubs_quota(
    redis: Redis,
) -> None:
    gh = BusyGithub()
    metrics, readings, issues_api = on_one_token(gh, redis)
    keep, store = await keeper(redis, GithubIssues(issues_api, ISSUES_REPO), gh.clock.at, open=True)
    seen = Seen()
    incident = None
    for minute in range(180):
        if minute == 20:
            incident = await opened_due(store)
            await with_thread(redis, incident)
        if minute == 150 and incident is not None:
            await commit_event(store, incident, "resolved", gh.clock.at())
        for _ in range(60 // TICK_S):
            seen.see(await readings.latest())
            await keep.tick()
            gh.clock.now += TICK_S
        gh.minute()
    await metrics.aclose()
    await issues_api.aclose()

    assert gh.transport.statuses.count(403) == gh.transport.statuses.count(429) == 0
    hours = [reset for who, reset, _ in gh.quota.ended if who == TOKEN]
    spent = [sum(reset - 3600 <= t < reset for t in gh.actions.spent_at) for reset in hours]
    at = [when for when, _, _ in seen.readings]
    gaps = [b - a for a, b in pairwise(at)]
    assert len(hours) == 2 and all(n <= SHARE * 5000 for n in spent)
    assert all(complete for _, complete, _ in seen.readings)
    # From the first hour on, the first reading's 300 pages included: every 5 minutes at most.
    assert max(gaps) <= timedelta(minutes=5)
    # Each says when it was read and when the next comes, in the reader's time zone: ordinary
    # pacing, no warning.
    for at, _, said in seen.readings:
        assert said.startswith(f"Live from GitHub, read at <!date^{int(at.timestamp())}^{{time}}")
        assert ", next at <!date^" in said and "⚠️" not in said
    [issue] = gh.issues.issues(ISSUES_REPO)
    assert issue["state"] == "closed" and gh.issues.comments(ISSUES_REPO, issue["number"])


async def acknowledged(store: IncidentStore, incident: Incident, at: datetime) -> None:
    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    acked = acknowledge(loaded.incident, by="U1", name="alice", now=at)
    event = Event(at=at, kind="acknowledged", text="Acknowledged", actor="U1", actor_name="alice")
    commit = Commit(with_action(acked, event), version=loaded.version, events=(event,))
    assert await store.commit(commit, now=at.timestamp())


async def test_a_quota_spent_by_another_stops_readings_and_writes_until_reset_then_none_is_lost(
    redis: Redis,
) -> None:
    gh = BusyGithub()
    metrics, readings, issues_api = on_one_token(gh, redis)
    # The app-wide hold a refusal sets lasts on the test's clock (real time too: calls' spacing).
    pacing = Pacing(lambda: gh.clock() + time.monotonic())
    issues = GithubIssues(issues_api, ISSUES_REPO)
    keep, store = await keeper(redis, issues, gh.clock.at, open=True, pacing=pacing)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    assert (await readings.latest()) is not None
    await keep.tick()
    [issue] = gh.issues.issues(ISSUES_REPO)
    told = [c["body"] for c in gh.issues.comments(ISSUES_REPO, issue["number"])]

    # Another process on the token spends what is left of the hour; meanwhile the incident is
    # acknowledged and resolved, and the bot goes on ticking.
    gh.quota.set_remaining(TOKEN, gh.clock(), 0)
    reset = gh.quota.window(TOKEN, gh.clock())[1]
    renews = datetime.fromtimestamp(reset, UTC).strftime("%H:%M")
    seen: list[str] = []
    for tick in range(int((reset - gh.clock()) // TICK_S) + 10):
        if tick == 3:
            await acknowledged(store, incident, gh.clock.at())
        if tick == 30:
            await commit_event(store, incident, "resolved", gh.clock.at())
        reading = await readings.latest()
        assert reading is not None
        if gh.clock() < reset:
            # Nothing is written; the root says why the numbers stopped once a reading met it.
            assert [c["body"] for c in gh.issues.comments(ISSUES_REPO, issue["number"])] == told
            if reading.error and not seen:
                loaded = await store.load(incident.id)
                assert loaded.incident is not None and loaded.incident.is_open
                view = readings.incident_view(loaded.incident, reading, [], gh.clock.at())
                root = render_root(
                    loaded.incident.model_copy(update={"live": view}), now=gh.clock.at()
                )
                seen.append(str(root.blocks))
        await keep.tick()
        gh.clock.now += TICK_S
    await metrics.aclose()
    await issues_api.aclose()

    # GitHub was asked once per client while spent, then waited for; after the reset every
    # write was made, in order, once.
    assert gh.transport.statuses.count(403) == 2
    after = [c["body"] for c in gh.issues.comments(ISSUES_REPO, issue["number"])][len(told) :]
    assert [body.split(" by ")[0].split(" at ")[0] for body in after] == [
        "**Acknowledged**",
        "**Resolved**",
    ]
    assert gh.issues.issues(ISSUES_REPO)[0]["state"] == "closed"
    [root] = seen
    # Its reset in the reader's zone: a token whose fallback says UTC.
    assert "⚠️ GitHub's rate limit is exhausted until <!date^" in root
    assert f"^{{time_secs}}|{renews}:00 UTC>: these are the alert's" in root
    assert not reading.error  # read again after the reset


@given(
    st.dictionaries(
        st.sampled_from(HEADERS), st.text(max_size=12) | st.integers(-5, 10**6).map(str)
    )
)
def test_any_rate_limit_headers_give_a_quota_or_none_never_an_exception(headers: dict) -> None:
    rate = rate_of(headers)
    assert rate is None or (0 <= rate.remaining <= rate.limit)


def busy_due() -> list[float]:
    """The busy repository's runs by how long ago each changed: of 150 in progress, 70% change
    a minute (the share changed within T is 1 - 0.3^T), and 15 runs queue a minute."""
    in_progress = [60 * math.log(1 - k / 150) / math.log(0.3) for k in range(150)]
    return sorted(in_progress + [4.0 * n for n in range(150)])


def test_the_pace_is_the_shortest_interval_whose_readings_fit_the_share_left_until_reset() -> None:
    whole = Rate(5000, 5000, reset=3600.0)
    # At 4 min 30 s, 13 readings of 224 requests fit in 3,000; at 4 min 15 s, 14 of 220 do not.
    assert reading_pace(busy_due(), 6, whole, share=0.6, now=0.0, shortest=60.0) == (270.0, 224)
    # A quiet repository: the configured interval.
    assert reading_pace([600.0] * 20, 2, whole, share=0.6, now=0.0, shortest=60.0)[0] == 60.0
    # Others spent more than their 40%: the next reading waits for the reset, then a new hour.
    others = Rate(5000, 2100, reset=3600.0)
    assert reading_pace(busy_due(), 6, others, share=0.6, now=1800.0, shortest=60.0)[0] == 1800.0
    assert reading_pace(busy_due(), 6, others, share=0.6, now=3600.0, shortest=60.0)[0] == 270.0


@pytest.mark.slow
async def test_jobs_asked_every_minute_and_beside_a_reading_spend_within_the_share() -> None:
    """`/queue jobs`, diagnostics and a jobs-only client (JOBS_BACKEND=github beside Prometheus:
    asked every reading) are served the last listing while it stands: half an hour of them
    spends what the paced readings would, and one asked while a reading runs reads nothing
    twice."""
    gh = BusyGithub()
    config = settings()
    metrics = GithubMetrics(config, GithubApi(config, gh.client(), clock=gh.clock))
    await asyncio.gather(metrics.read(now=gh.clock.at()), metrics.queued_jobs(now=gh.clock.at()))
    jobs_pages = [url for url in gh.actions.calls if url.endswith("/jobs?per_page=100")]
    assert len(jobs_pages) == len(gh.runs), "each run's jobs read once"

    listed_at = []
    for _ in range(30):
        gh.clock.now += 60
        gh.minute()
        before = len(gh.actions.calls)
        both = [metrics.queued_jobs(now=gh.clock.at()) for _ in range(2)]
        assert all(len(listing.jobs) > 0 for listing in await asyncio.gather(*both))
        if len(gh.actions.calls) > before:
            listed_at.append(gh.clock.at())
    await metrics.aclose()

    assert gh.transport.statuses.count(403) == 0
    start = gh.clock() - 1800
    assert sum(t > start for t in gh.actions.spent_at) <= SHARE * 5000 / 2
    assert 5 <= len(listed_at) <= 8, "listed every 4 to 5 minutes, as the readings would"
