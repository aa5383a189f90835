"""The pilot's act once it went back: its own reply in the thread is edited in place, its Undo and
Pause pilot (and the Undo's confirm, which offered to put it back) gone, a line saying it went
back in their place, what came of its runners kept; an Undo clicked on a stale message after it
puts nothing back and does not pause the pilot.

Against a real Redis and the Kubernetes-shaped API server, on a clock the test moves: the act
is made and recorded as the pilot makes it (`Scaling.scale_up`, `Scaling.record`), followed
(`settled`), put back by the reverts job; the thread is what a channel's sender makes of the
outbox (`bot/outbound/messages.py`): a reply posted, or one naming a recorded reply's ts edited."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.actions.flow import Actor
from bot.actions.pilot import Piloting
from bot.actions.scale import Scaling
from bot.actions.scale import made as made_up
from bot.actions.scale_reverts import ScaleReverts
from bot.backends.kube import kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.incident.incidents import PILOT, Event, Incident, Status
from bot.domain.message import Rendered
from bot.domain.reading.early_warning import Phase, WarningState, scaled_from
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judgement import Judgement
from bot.status.follow_ups import settled
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import SUMMARY_EDIT, Commit, IncidentStore
from bot.storage.pilot import PilotStore
from bot.storage.send_queue import SendQueue
from tests.actions.test_scale_reverts import SET, TARGET, Clock, kube  # noqa: F401  (fixture)
from tests.support.cores import action_core
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.incidents import changed
from tests.support.store import CHANNEL, KEYS, PREFIX, opened

USER = "U0ALICE"
WHY = "+6 wanted for 3 s (40 → 46), within up_to 60"


@dataclass
class Thread:
    """Incident 1's thread as its channel's sender makes it of the outbox: each reply posted under
    its own ts (recorded where the reply asks, for a later edit), or, naming a recorded ts, that
    reply edited in place; every version each message showed, in order."""

    queue: SendQueue
    shown: dict[str, list[Rendered]] = field(default_factory=dict)

    async def send(self) -> None:
        while (head := await self.queue.head_reply("1")) is not None:
            if head.kind == SUMMARY_EDIT and not head.edit_ts:  # no summary posted: dropped
                await self.queue.record_reply(CHANNEL, "1", head.item)
                continue
            if head.edit_ts:
                assert head.edit_ts in self.shown, "an edit of a reply the thread has"
                self.shown[head.edit_ts].append(head.rendered)
                await self.queue.record_reply(CHANNEL, "1", head.item)
                continue
            ts = f"2.{len(self.shown) + 1:06d}"
            self.shown[ts] = [head.rendered]
            posted = ts if head.ts_as else ""
            await self.queue.record_reply(CHANNEL, "1", head.item, ts=posted, ts_as=head.ts_as)

    def now(self, ts: str) -> Rendered:
        return self.shown[ts][-1]

    def acts(self) -> list[str]:
        """The ts of each reply that first showed the pilot's buttons."""
        return [ts for ts, versions in self.shown.items() if "pilot_undo" in _blocks(versions[0])]


def _blocks(rendered: Rendered) -> str:
    return json.dumps(rendered.blocks, ensure_ascii=False)


def read(rendered: Rendered) -> str:
    """What a reader sees: each date token as its UTC fallback, bold marks dropped."""
    said = _blocks(rendered)
    return re.sub(r"<!date\^\d+\^[^|>]*\|([^>]*)>", r"\1", said).replace("*", "")


def button_value(rendered: Rendered, action_id: str) -> str:
    for block in rendered.blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == action_id:
                return str(element["value"])
    raise AssertionError(f"no {action_id} in {rendered.blocks}")


@dataclass
class World:
    redis: Redis
    kube: FakeKubeApi
    clock: Clock
    store: IncidentStore
    reverts: ScaleReverts
    scaling: Scaling
    piloting: Piloting
    thread: Thread
    warnings: WarningStore

    def min_runners(self) -> int:
        return int(self.kube.sets[SET]["spec"]["minRunners"])

    async def incident(self) -> Incident:
        incident = await self.store.get("1")
        assert incident is not None
        return incident

    async def commit(self, change: Any) -> None:
        def decide(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            return Commit(change(incident, now), root=False), None

        assert (await self.store.commit_fresh("1", decide, clock=self.clock)).committed

    async def read_live(self, registered: float) -> None:
        """A reading as the status tick keeps it on the incident: linux's registered runners."""
        view = reading(self.clock(), registered)
        await self.commit(lambda i, now: i.model_copy(update={"live": view, "updated_at": now}))

    async def pilot_acts(self) -> None:
        """The pilot's +6 on linux, made and recorded as `Piloting._act` makes it."""
        scaled = await self.scaling.scale_up(PILOT, "linux", 6, False, False, "1", "")
        assert isinstance(scaled, tuple), scaled
        recorded = await self.scaling.record("1:uid1", "", PILOT, "linux", 6, scaled, pilot=WHY)
        assert recorded.ok, recorded

    async def follow(self, registered: float) -> None:
        """The status tick's follow-up of the scale-ups at a reading."""
        view = reading(self.clock(), registered)

        def decide(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            followed, events, replies = settled(incident, view, now)
            return Commit(followed, events=events, replies=replies, root=False), None

        assert (await self.store.commit_fresh("1", decide, clock=self.clock)).committed

    async def resolve(self) -> None:
        at = self.clock()
        await self.commit(
            lambda i, _: changed(i, status=Status.RESOLVED, updated_at=at, resolved_at=at)
        )

    async def sweep(self) -> None:
        """The reverts job's next look, 15 s on."""
        self.clock.pass_(seconds=15)
        await self.reverts.tick()


def reading(at: datetime, registered: float) -> FleetSnapshot:
    judged = Judgement(at=at, queued=14.0, busy=registered, registered=registered)
    metrics = RunnerTypeMetrics(queued=14, registered=registered, busy=registered, judged=judged)
    return FleetSnapshot(at=at, source="prometheus", runner_types={"linux": metrics})


@pytest.fixture
def world(redis: Redis, kube: FakeKubeApi, tmp_path: Path) -> World:  # noqa: F811
    clock = Clock()
    store = IncidentStore(redis, PREFIX)
    path = kube.kubeconfig(tmp_path, kube.url)  # type: ignore[attr-defined]
    arc = ArcScaler(Settings(backend_timeout_seconds=2), kube_access(str(path), {}))
    warnings = WarningStore(redis, KEYS)
    # Put back as the incident resolves (no settle time), or 4 h after the act.
    config = Settings(
        metrics_backend="prometheus",  # live readings: its runners are followed
        backend_timeout_seconds=2,
        scale_revert_settle=0,
        scale_revert_after=4 * 3600,
        scale_allowed_users=(USER,),
    )
    reverts = ScaleReverts(redis, KEYS, store, arc, config=config, clock=clock, warnings=warnings)
    core = action_core(
        redis, store, scaler=arc, scale_allowed=(USER,), clock=clock, reverts=reverts
    )
    scaling = Scaling(core.acting, arc, {"linux": TARGET}, config=config, reverts=reverts)
    piloting = Piloting(
        core.acting,
        scaling,
        PilotStore(redis, KEYS),
        core.piloting.readings,
        config=config,
        warnings=warnings,
    )
    thread = Thread(SendQueue(redis, PREFIX, retention_s=3600))
    return World(redis, kube, clock, store, reverts, scaling, piloting, thread, warnings)


async def acted_and_followed(world: World) -> str:
    """Incident 1 open, linux read at 40 registered; the pilot adds 6, and 2 min later they are
    registered: its reply says so, edited in place. The act's reply's ts."""
    await opened(world.store)
    await world.read_live(40)
    await world.pilot_acts()
    await world.thread.send()
    [act] = world.thread.acts()
    assert "pilot_pause" in _blocks(world.thread.now(act)), "the act as posted"
    assert world.min_runners() == 6
    world.clock.pass_(minutes=2)
    await world.follow(46)
    await world.thread.send()
    assert "6 registered by 02:32 UTC" in read(world.thread.now(act)), "its outcome edited in"
    return act


async def test_put_back_with_the_resolve_its_reply_loses_its_buttons_and_says_so(
    world: World,
) -> None:
    act = await acted_and_followed(world)
    await world.resolve()
    await world.sweep()
    assert world.min_runners() == 0, "put back"
    await world.thread.send()
    after = world.thread.now(act)
    said = read(after)
    assert [b["type"] for b in after.blocks if b["type"] == "actions"] == [], after.blocks
    assert "pilot_undo" not in said and "pilot_pause" not in said
    assert "Put back at 02:32 UTC: nothing to undo" in said, said
    # The act's own words and what came of its runners, as the follow-up left them.
    assert f"queuepilot (policy) scaled linux by +6: {WHY}" in said, said
    assert "6 registered by 02:32 UTC" in said, said
    assert said.index("6 registered by") < said.index("Put back at"), "the line ends it"
    # Its put-back is a reply of its own below, as ever.
    last = list(world.thread.shown)[-1]
    assert last != act and "Put linux back (the incident resolved)" in read(world.thread.now(last))


async def test_put_back_by_its_deadline_while_open_its_reply_loses_its_buttons(
    world: World,
) -> None:
    """4 h after the act, the incident still open: it goes back by its deadline."""
    act = await acted_and_followed(world)
    world.clock.pass_(hours=4)
    await world.sweep()
    assert world.min_runners() == 0
    await world.thread.send()
    said = read(world.thread.now(act))
    assert "pilot_undo" not in said and "06:32 UTC: nothing to undo" in said, said


async def test_an_undo_clicked_after_the_put_back_is_refused_and_does_not_pause_the_pilot(
    world: World,
) -> None:
    """A stale message (a client not refreshed, or a click racing the edit) still shows the
    act's Undo: clicked, it puts nothing back, the pilot stays on, and the answer says why."""
    act = await acted_and_followed(world)
    value = button_value(world.thread.shown[act][0], "pilot_undo")
    await world.resolve()
    await world.sweep()
    assert world.min_runners() == 0
    written = len(world.kube.written)
    answer = await world.piloting.undo(Actor(USER, "alice"), value, None)
    assert not answer.ok, answer
    assert "Put back at 02:32 UTC" in answer.message and "not paused" in answer.message, answer
    assert world.piloting.store is not None
    assert await world.piloting.store.paused("linux") is None, "the pilot stays on"
    assert len(world.kube.written) == written and world.min_runners() == 0, "nothing scaled"
    incident = await world.incident()
    assert not [e for e in incident.actions if e.kind == "pilot_undone"], "no undo recorded"


async def test_a_pilot_act_taken_on_from_its_warning_loses_its_buttons_once_put_back(
    world: World,
) -> None:
    """The pilot acted on linux's early warning, and its runners came there; the alert fired and
    the incident took the act on, its reply in the thread with Undo. Put back with the resolve,
    that reply is edited in place as an act made in the thread is."""
    await opened(world.store)
    state = WarningState.raised("linux", "C1", "linux: queue building", world.clock().timestamp())
    assert await world.warnings.save(state)
    result = await world.reverts.scaler.scale(ScaleRequest(TARGET, 6, "", PILOT))
    assert result.undo is not None
    record = await world.reverts.remember("", TARGET, result.undo, by=PILOT, warning=state.uid)
    done = world.reverts.going_back(
        made_up("linux", 6, PILOT, world.clock(), result.undo, pilot=True), record
    )
    entry = scaled_from(f"queuepilot (policy) scaled linux by +6: {WHY}.", "", record.id,
                        done, None, 600).model_copy(update={"due": None, "came": True})  # fmt: skip
    assert await world.warnings.save(state.with_scaled((entry,)))
    world.clock.pass_(minutes=2)
    folded = await world.warnings.get("linux")
    assert folded is not None
    folded = folded.changed(world.clock().timestamp(), phase=Phase.FOLDED, incident_id="1")
    assert await world.warnings.save(folded)
    await world.sweep()  # the incident takes it on
    await world.thread.send()
    [act] = world.thread.acts()
    await world.resolve()
    await world.sweep()
    assert world.min_runners() == 0
    await world.thread.send()
    said = read(world.thread.now(act))
    assert "pilot_undo" not in said and "Put back at 02:32 UTC: nothing to undo" in said, said
    assert "Took on the early warning's scale-up of linux by queuepilot (policy)" in said, said
