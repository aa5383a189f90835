"""The App Home's rounds on two replicas, on a clock of the test's own, with several viewers: a
change of state is published to each viewer once, whichever replica's round sees it; time passing
publishes nothing; numbers moving wait for `HOME_NUMBERS_SECONDS`; a viewer not seen for a day is
left alone; every publish takes views.publish's app-wide turn."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.app import Bot, build_bot
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import GroupState, Incident
from bot.storage.incident_store import Commit
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.incidents import T0, changed, make_incident
from tests.support.slack import BOT_TOKEN

VIEWERS = [f"U0VIEW{n}" for n in range(5)]
NUMBERS_S = 300


class Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(hours=1)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def emulator() -> Iterator[tuple[SlackEmulator, RunningServer]]:
    users = {user: user.lower() for user in VIEWERS}
    found = SlackEmulator(token=BOT_TOKEN, channels=("C0CIQUEUE", "C0GPUQUEUE"), users=users)
    with serve_in_thread(found.app) as server:
        yield found, server


@pytest.fixture
def replicas(
    settings_for: Callable[..., Any], emulator: tuple[SlackEmulator, RunningServer]
) -> tuple[Bot, Bot, Clock]:
    _, server = emulator
    settings = settings_for(slack_api_url=f"{server.url}/api/", home_numbers_seconds=NUMBERS_S)
    clock = Clock()
    return build_bot(settings, clock=clock), build_bot(settings, clock=clock), clock


async def commit(bot: Bot, incident: Incident, version: int = 0) -> None:
    assert await bot.leadership.take(), "commits are the leader's"
    group = GroupState(incident_id=incident.id, last_entry="1-0") if not version else None
    change = Commit(incident, version=version, group=group, group_hash=incident.group_hash)
    assert await bot.store.commit(change)


async def rounds(*bots: Bot) -> None:
    for bot in bots:
        assert bot.home is not None
        await bot.home.tick()


def published(emulator: SlackEmulator) -> list[str]:
    return [c.params["user_id"] for c in emulator.calls("views.publish") if c.ok]


async def test_each_change_reaches_each_viewer_once_and_numbers_wait_their_turn(
    replicas: tuple[Bot, Bot, Clock], emulator: tuple[SlackEmulator, RunningServer]
) -> None:
    first, second, clock = replicas
    slack, _ = emulator
    ci = make_incident(id="1", uid="u1", group_hash="g1", channel="C0CIQUEUE")
    gpu = make_incident(id="2", uid="u2", group_hash="g2", channel="C0GPUQUEUE")
    for incident in (ci, gpu):
        await commit(first, incident)
    for n, user in enumerate(VIEWERS):
        bot = (first, second)[n % 2]
        assert bot.home is not None
        await bot.home.opened(user)
    assert sorted(published(slack)) == VIEWERS
    home = slack.home(VIEWERS[0])
    assert home is not None and "#1 · " in str(home) and "#2 · " in str(home)

    # Nothing changed, an hour passed: the leader's rounds publish nothing.
    clock.now += timedelta(hours=1)
    await rounds(first, first)
    assert len(published(slack)) == len(VIEWERS)

    # A change of state: once to each viewer, however many rounds look.
    owned = changed(
        ci,
        acknowledged_by="U0VIEW1",
        acknowledged_name="bea",
    )
    await commit(first, owned, version=1)
    await rounds(first, first, first)
    after = published(slack)[len(VIEWERS) :]
    assert sorted(after) == VIEWERS
    assert "*bea* is on it" in str(slack.home(VIEWERS[0]))

    # Numbers moving: not before HOME_NUMBERS_SECONDS since each Home was published.
    busier = gpu.model_copy(
        update={
            "runner_types": {
                **gpu.runner_types,
                "linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=17, longest_wait_mins=120),
            }
        }
    )
    await commit(first, busier, version=1)
    clock.now += timedelta(seconds=NUMBERS_S - 10)
    await rounds(first, first)
    assert len(published(slack)) == 2 * len(VIEWERS)
    clock.now += timedelta(seconds=20)
    await rounds(first, first)
    assert len(published(slack)) == 3 * len(VIEWERS)
    assert "17 queued" in str(slack.home(VIEWERS[0]))

    # Every publish of the leader's rounds took its app-wide turn, 600 ms apart: over the
    # emulator's arrival times, as a loaded machine may hand one a moment late to the next.
    ats = sorted(c.at for c in slack.calls("views.publish"))[len(VIEWERS) :]
    assert (ats[-1] - ats[0]) / (len(ats) - 1) >= 0.55, list(itertools.pairwise(ats))


async def test_a_viewer_gone_for_a_day_is_left_alone(
    replicas: tuple[Bot, Bot, Clock], emulator: tuple[SlackEmulator, RunningServer]
) -> None:
    first, _, clock = replicas
    slack, _ = emulator
    incident = make_incident(id="1", uid="u1", group_hash="g1", channel="C0CIQUEUE")
    await commit(first, incident)
    assert first.home is not None
    await first.home.opened(VIEWERS[0])
    clock.now += timedelta(days=1, minutes=1)
    resolved = changed(
        incident,
        acknowledged_by="U0VIEW1",
    )
    await commit(first, resolved, version=1)
    await rounds(first)
    assert published(slack) == [VIEWERS[0]]
