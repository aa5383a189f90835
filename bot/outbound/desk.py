"""What a channel's sender works with: its parts (`Outbound`), the post it owes (`Post`), and the
one way it edits (`Desk.update`). The kinds of post are read in `bot.outbound.messages`, edits run
in `bot.outbound.edits` and the storm digest in `bot.outbound.storm`; `bot.outbound.send` runs
them all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from bot.config import Settings
from bot.domain.incidents import Incident
from bot.domain.message import Rendered
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.root import render_root
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import IncidentStore
from bot.storage.leases import Leases
from bot.storage.send_queue import NoticeStore, SendQueue
from bot.storage.slack_cache import ChartDelivery
from bot.storage.storm_queue import StormQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Outbound:
    store: IncidentStore
    queue: SendQueue
    storms: StormQueue
    slack: SlackGateway
    telemetry: Telemetry
    charts: ChartDelivery
    notices: NoticeStore
    warnings: WarningStore | None  # None where early warnings are off
    leases: Leases  # the channels' sender leases, on connections of their own
    config: Settings
    clock: Callable[[], datetime]


@dataclass(frozen=True)
class Upload:
    """A file shared into a thread (a chart's PNG, a postmortem's Markdown)."""

    data: bytes
    title: str
    alt: str = ""


@dataclass(frozen=True)
class Post:
    """One message a channel owes Slack, whatever its kind."""

    member: str  # its queue member, which its in-flight mark names: root:<id>, storm:<id>, ...
    item: str  # what it is, as its mark and its metadata name it
    incident_id: str  # "" for a channel message that is no incident's
    uid: str  # what its metadata names it by, with `item`
    thread_ts: str | None  # None for the channel itself
    # Drawn after any lookup and before the mark: what goes out is current, a failure costs none.
    draw: Callable[[], Awaitable[Rendered | Upload]]
    # In the channel at `ts`, with what was drawn; None when a lookup found an earlier attempt's.
    record: Callable[[str, Rendered | Upload | None], Awaitable[None]]
    # Refused for good (or failed three times): dropped, with a record.
    refuse: Callable[[str], Awaitable[None]]
    filename: str = ""  # a file's: files carry no metadata, a lookup finds them by name
    group: str = ""  # a root's alert group: found by it after Redis lost the state


async def _as_is(drawn: T) -> T:
    return drawn


def ready(rendered: T) -> Callable[[], Awaitable[T]]:
    """A `draw` for what is drawn already."""
    return partial(_as_is, rendered)


@dataclass(frozen=True)
class Desk:
    """One channel's sender: what its loops share, and its edits in the app's edit slot."""

    out: Outbound
    channel: str

    async def update(
        self, ts: str, draw: Callable[[], Awaitable[Rendered]], *, within_s: float | None = None
    ) -> tuple[Rendered, SlackError | None]:
        """Show at `ts` what `draw` gives once the app's `chat.update` slot is taken (so the edit
        shows what holds then). Answers Slack's refusal when the message can never be edited so;
        raises a failure worth retrying, and what a 429 would past `within_s` (the posts' path
        must not wait out an edit's hold)."""
        slack = self.out.slack
        await slack.turn("chat.update", self.out.config.slack_update_interval_ms, within_s=within_s)
        rendered = await draw()
        try:
            await slack.call(
                "chat.update",
                channel=self.channel,
                ts=ts,
                text=rendered.text,
                blocks=rendered.blocks,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            return rendered, exc
        return rendered, None

    def root(self, incident: Incident, *, mentions: bool) -> Rendered:
        """The incident's root as it is now (the post without mentions, its edits with them)."""
        within = self.out.config.drain_target_minutes
        return render_root(incident, now=self.out.clock(), mentions=mentions, within_mins=within)

    def lost(self, what: str, error: str) -> None:
        """A message the channel keeps current can no longer be edited: an operator's concern."""
        log.error("sender %s: cannot edit %s: %s", self.channel, what, error)
        self.out.telemetry.slack_undeliverable.labels(error).inc()
