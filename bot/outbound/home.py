"""The App Home: published when opened, and kept current by the leader's round for whoever opened
it within a day (its numbers at most every `HOME_NUMBERS_SECONDS`), once, by whoever claims the
viewer and digest first. Nothing here raises: a later round publishes what failed."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime

from redis.exceptions import RedisError

from bot.config import Settings
from bot.domain.incident.incidents import counting_scale_ups
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.scale.pilot import PilotState
from bot.fleet.readings import FleetReadings
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.home import (
    MAX_INCIDENTS,
    MAX_WARNINGS,
    Digests,
    HomeState,
    Listed,
    Standing,
    StateLost,
    digests,
    render_home,
    standing_warnings,
)
from bot.storage.early_warning import REFUSED, WarningStore
from bot.storage.home import HomeViewers, Shown
from bot.storage.incident_store import IncidentStore
from bot.storage.state_marker import StateMarker

log = logging.getLogger(__name__)

# Slack user IDs start with U (W on Enterprise Grid); anything else is no one to publish to.
USER_ID = re.compile(r"[UW][A-Z0-9]{1,31}")
OPEN_WAIT_S = 5.0  # the person just opened the tab: a short wait for its turn, not a long one
ROUND_WAIT_S = 10.0
PER_ROUND = 20  # publishes a round makes at most (20 turns: 12 s of Tier 4)
CLAIM_MS = 60_000  # longer than a publish waits for its turn and Slack's answer
# The person is no one to publish to (or Slack names `user_id` in invalid_arguments' details).
GONE_ERRORS = frozenset({"user_not_found", "account_inactive", "user_disabled"})
LOST_SHOWN_S = 86_400


@dataclass(eq=False)
class Home:
    store: IncidentStore
    warnings: WarningStore
    readings: FleetReadings
    viewers: HomeViewers
    slack: SlackGateway
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    marker: StateMarker  # says when Redis lost the state, for the line about it
    pilots: Callable[[], Awaitable[Sequence[PilotState]]]
    # Rounds ended: what a test of "nothing more" waits on.
    rounds: int = field(default=0, init=False)

    async def opened(self, user: str, view_hash: str = "") -> None:
        """`user` opened the Home tab showing the view of `view_hash`: publish unless current."""
        if not USER_ID.fullmatch(user):
            return
        try:
            await self.viewers.opened(user, self.clock().timestamp())
            home = await self._home()
            shown = (await self.viewers.shown([user])).get(user)
            said = digests(home)
            if shown is not None and shown.hash == view_hash and not self._behind(shown, said):
                return
            await self._publish(user, home, said, view_hash, within_s=OPEN_WAIT_S)
        except RedisError as exc:
            log.warning("home: Redis unavailable, %s's Home not published: %s", user, exc)

    async def tick(self) -> None:
        try:
            now = self.clock().timestamp()
            users = await self.viewers.since(now - self.viewers.keep_s)
            if users:
                home = await self._home()
                said = digests(home)
                shown = await self.viewers.shown(users)
                behind = [u for u in users if self._behind(shown.get(u), said, now)]
                for user in behind[:PER_ROUND]:
                    last = shown.get(user)
                    view_hash = last.hash if last else ""
                    if not await self._publish(user, home, said, view_hash, within_s=ROUND_WAIT_S):
                        break  # Slack is holding the method back: the rest next round
        except RedisError as exc:
            log.warning("home: Redis unavailable, no round: %s", exc)
        finally:
            self.rounds += 1

    def _behind(self, shown: Shown | None, said: Digests, now: float | None = None) -> bool:
        """Its state differs, or its numbers do (and, at `now`, are old enough to publish)."""
        if shown is None or shown.state != said.state:
            return True
        due = now is None or now - shown.at >= self.config.home_numbers_seconds
        return shown.numbers != said.numbers and due

    async def _publish(
        self, user: str, home: HomeState, said: Digests, view_hash: str, *, within_s: float
    ) -> bool:
        """Publish unless claimed already; False only when Slack holds the method back longer than
        `within_s`. `hash` makes Slack refuse it if another publish came in between."""
        claim = await self.viewers.claim(user, f"{said.state}.{said.numbers}", CLAIM_MS)
        if claim is None:
            return True
        at = self.clock()
        try:
            published = await self.slack.in_turn(
                "views.publish",
                2,
                within_s=within_s,
                user_id=user,
                view=render_home(home, at),
                hash=view_hash or None,
            )
        except SlackError as exc:
            await self.viewers.release(claim)
            await self._failed(user, exc)
            return exc.retry_after is None
        view = published.get("view")
        hash_ = str(view.get("hash") or "") if isinstance(view, dict) else ""
        await self.viewers.record(user, Shown(said.state, said.numbers, at.timestamp(), hash_))
        return True

    async def _failed(self, user: str, exc: SlackError) -> None:
        if exc.error == "hash_conflict":
            log.info("home: %s's Home changed meanwhile; published again next round", user)
            await self.viewers.unknown(user)
        elif exc.retryable:
            log.info("home: %s's Home not published (%s); again next round", user, exc.error)
        else:
            # Refused again every round otherwise: nothing more until they open the Home again.
            gone = exc.error in GONE_ERRORS or any("user_id" in d for d in exc.details)
            level = logging.INFO if gone else logging.WARNING
            log.log(level, "home: Slack refused %s's Home: %s %s", user, exc.error, exc.details)
            await self.viewers.forget(user)

    async def _home(self) -> HomeState:
        ids = await self.store.open_ids()
        loaded = await self.store.load_many(ids[:MAX_INCIDENTS])  # each with its incident
        threads = {ld.incident.id: (ld.thread.channel, ld.thread.ts) for ld in loaded if ld.thread}
        warned = standing_warnings((await self.warnings.all()).values())[:MAX_WARNINGS]
        posted = [(w.channel, w.ts) for w in warned if w.ts and w.ts != REFUSED and w.channel]
        links = await self.slack.links([*threads.values(), *posted])
        incidents = [ld.incident for ld in loaded if ld.incident]
        fleet, note = await self._fleet()
        if fleet is not None:
            # Counting the scale-ups since the reading, as each root does.
            fleet = counting_scale_ups(fleet, [a for i in incidents for a in i.actions])
        return HomeState(
            incidents=tuple(Listed(i, _link(links, threads.get(i.id))) for i in incidents),
            open_count=len(ids),
            warnings=tuple(Standing(w, _link(links, (w.channel, w.ts))) for w in warned),
            fleet=fleet,
            fleet_note=note,
            backend=self.readings.metrics.name if fleet is not None else "",
            command=self.config.slash_command,
            lost=await self._lost(),
            pilots=tuple(await self.pilots()),
        )

    async def _lost(self) -> StateLost | None:
        """Said for a day after Redis lost the state: long enough for everyone to see it."""
        marker = await self.marker.read()
        if marker is None or marker.lost_at is None:
            return None
        if self.clock().timestamp() - marker.lost_at > LOST_SHOWN_S:
            return None
        return StateLost(datetime.fromtimestamp(marker.lost_at, UTC), marker.found, marker.above)

    async def _fleet(self) -> tuple[FleetSnapshot | None, str]:
        metrics = self.readings.metrics
        if not metrics.live:
            note = f"No live metrics ({metrics.name}): the incidents show the alerts' numbers."
            return None, note
        reading = await self.readings.latest()
        if reading is None or reading.fleet is None:
            why = reading.error if reading is not None and reading.error else "no reading yet"
            return None, f"No live numbers from {metrics.name}: {why}"
        if reading.error:
            return reading.fleet, f"The latest read failed ({reading.error}): these are older."
        return reading.fleet, reading.fleet.note


def _link(links: dict[tuple[str, str], str], message: tuple[str, str] | None) -> str:
    return links.get(message, "") if message else ""
