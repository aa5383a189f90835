"""The per-channel sender: the one writer of incident messages in a Slack channel.

Whoever changes an incident commits what Slack must show (`bot.storage.incident_store`) and is
done; for each channel one replica at a time, holding the channel's lease, drains its queue
(`bot.storage.send_queue`). Every post goes through the same stages, in the manner of
Alertmanager's notification pipeline:

1. pace: wait for the channel's next post slot (`bot.outbound.budget`); nothing is read for a
   post before its slot is taken, so what goes out is the state at that moment;
2. select the most urgent queue member (new roots, then thread replies by band, each thread in
   order) and its in-flight mark;
3. storm gate: when `STORM_DIGEST_THRESHOLD` new roots wait at once, the storm digest goes first
   (`bot.outbound.storm`);
4. read what the member stands for: one outgoing item (`bot.outbound.outgoing`: a root, a reply,
   a chart or the digest), or nothing left to send (a quiet status edits the last one);
5. look up, if this very item was in flight when its last attempt failed uncertainly (a timeout, a
   5xx) or its sender died: a post that landed is recorded, not posted again. The lookup comes
   before the new mark, whose time would move the window the lookup reads;
6. draw it (`prepare`: a root as it is now, a chart's picture), so a failure here leaves no mark;
7. mark it in flight, only while this sender still holds the channel's lease;
8. call Slack, spending the slot;
9. record the result; a 429 or a refused connection clears the mark (nothing was posted); a
   retryable failure is retried with backoff for as long as it takes (an outage delays the
   channel, it never drops an update); a permanent refusal drops that one item, with a record.

Edits of what is already posted (root messages, a quiet status, the digest) take their own,
smaller path (`bot.outbound.edits`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from redis.exceptions import RedisError

from bot.backoff import Backoff
from bot.domain.forecast import DRAIN_TARGET_MINS
from bot.domain.message import Rendered
from bot.outbound.budget import Budget
from bot.outbound.edits import Editor, RootEdits, WarningEdits
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.outgoing import (
    ChartUpload,
    Ledger,
    NoticePost,
    Outgoing,
    ReplyPost,
    RootPost,
    WarningPost,
)
from bot.outbound.storm import StormConfig, StormDigest
from bot.render.chart import ChartData, incident_chart
from bot.render.chart_block import blames_charts, has_charts, without_charts
from bot.render.replies import StatusShown, render_shown
from bot.storage.chart_delivery import ChartDelivery
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import CHART, RESTATUS, IncidentStore
from bot.storage.leases import Lease, Leases
from bot.storage.notices import NoticeStore
from bot.storage.send_queue import HeadReply, InFlight, SendQueue
from bot.storage.storm_queue import StormQueue
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SenderConfig:
    post_interval_s: float = 1.0
    post_burst: int = 3
    update_interval_ms: int = 1200
    root_edit_interval_ms: int = 2000
    lease_ttl_ms: int = 5000
    backoff_max_s: float = 30.0
    # A lookup reads this far either side of the attempt: Slack's clock is not ours, and its
    # history can lag a post by a moment; a post lands within the call's timeout (10 s).
    lookup_margin_s: float = 60.0
    storm: StormConfig = field(default_factory=StormConfig)
    # A root's advice says how many runners would drain the queue within this many minutes.
    within_mins: float = DRAIN_TARGET_MINS


class ChannelSender:
    """Drains one channel's queue while `lease` is held; see the module docstring."""

    def __init__(
        self,
        channel: str,
        lease: Lease,
        *,
        store: IncidentStore,
        queue: SendQueue,
        storms: StormQueue,
        slack: SlackGateway,
        leases: Leases,
        telemetry: Telemetry,
        charts: ChartDelivery,
        warnings: WarningStore | None,
        notices: NoticeStore,
        config: SenderConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self.channel = channel
        self._charts = charts
        self._notices = notices
        self._warnings = warnings
        self._lease = lease
        self._store = store
        self._queue = queue
        self._slack = slack
        self._telemetry = telemetry
        self._config = config
        self._clock = clock
        self._budget = Budget(
            slack.pacing,
            post_interval_s=config.post_interval_s,
            post_burst=config.post_burst,
            update_interval_ms=config.update_interval_ms,
        )
        self._ledger = Ledger(channel, queue, storms, telemetry)
        self._editor = editor = Editor(channel, slack, self._budget, telemetry)
        self._root_edits = RootEdits(
            channel,
            queue,
            editor,
            interval_ms=config.root_edit_interval_ms,
            within_mins=config.within_mins,
            clock=clock,
        )
        # Early warnings' edits: a loop of their own, only where early warnings are on.
        self._warning_edits = WarningEdits(channel, warnings, editor) if warnings else None
        self._storm = StormDigest(
            channel,
            editor,
            storms=storms,
            store=store,
            slack=slack,
            telemetry=telemetry,
            config=config.storm,
            clock=clock,
        )
        self._failures: dict[str, int] = {}

    async def run(self) -> None:
        await self._budget.take_over(await self._queue.bucket(self.channel))
        loops = [self._loop(self._post_next), self._loop(self._root_edits.step)]
        if self._warning_edits is not None:
            loops.append(self._loop(self._warning_edits.step))
        if self._storm.enabled:
            loops.append(self._loop(self._storm.step))
        await asyncio.gather(*loops)

    async def _loop(self, step: Callable[[], Awaitable[None]]) -> None:
        backoff = Backoff(self._config.backoff_max_s)
        while True:
            try:
                await step()
                backoff.reset()
            except SlackError as exc:
                self._budget.hold(exc)
                wait = exc.retry_after if exc.retry_after is not None else backoff.next()
                log.warning("sender %s: Slack %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except RedisError as exc:
                wait = backoff.next()
                log.warning("sender %s: Redis %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except _Retry:
                await asyncio.sleep(backoff.next())

    async def _post_next(self) -> None:
        await self._budget.post_slot()
        member, in_flight = await self._queue.next_post(self.channel)
        if member is None:
            await self._queue.wait_bell(self._queue.keys.posts_bell(self.channel), 1.0)
            return
        outgoing: Outgoing | None = None
        try:
            outgoing = await self._storm.gate(member) or await self._read(member, in_flight)
            if outgoing is not None:
                if outgoing.member != member:  # the digest, in place of the root selected
                    in_flight = await self._queue.in_flight(self.channel, outgoing.member)
                await self._deliver(outgoing, in_flight)
        except (SlackError, RedisError, LostLease):
            raise
        except Exception:
            await self._failed(member, outgoing)
            raise _Retry from None
        if outgoing is not None:
            self._failures.pop(f"{outgoing.member}/{outgoing.item}", None)

    async def _failed(self, member: str, outgoing: Outgoing | None) -> None:
        """A bug or unreadable state must cost the one item, never the whole channel: after
        three failures in a row it is dropped like an item Slack refused (a root with its
        thread, a reply alone, the digest with its storm)."""
        kind, _, incident_id = member.partition(":")
        if outgoing is not None:
            item = outgoing.item
        else:  # it failed as it was read: the thread's first reply, or the root
            item = await self._queue.head_item(incident_id) if kind == "replies" else "root"
        name = f"{outgoing.member if outgoing else member}/{item}"
        failures = self._failures.get(name, 0) + 1
        self._failures[name] = failures
        log.exception("sender %s: %s failed (%d times)", self.channel, name, failures)
        if failures < 3:
            return
        self._failures.pop(name, None)
        if outgoing is not None:
            await outgoing.refused(self._ledger, "unreadable")
        elif kind == "replies" and item:
            await self._ledger.undeliverable(incident_id, item, "unreadable")
            await self._queue.record_reply(self.channel, incident_id, item)
        elif kind in ("warning", "notice"):  # an unreadable one leaves the queue
            await self._ledger.undeliverable("", member, "unreadable")
            await self._queue.forget(self.channel, member)
        else:
            await self._ledger.undeliverable(incident_id, member, "unreadable")
            await self._queue.drop_thread(self.channel, incident_id)

    async def _read(self, member: str, in_flight: InFlight | None) -> Outgoing | None:
        """What `member` stands for now; None when there is nothing to post (it is gone, or
        already posted, or a quiet status that edited the last one), with that recorded."""
        kind, _, incident_id = member.partition(":")
        if kind == "notice":
            rendered = await self._notices.get(incident_id)
            if rendered is None:
                await self._notices.done(self.channel, incident_id)  # gone: nothing to post
                return None
            if has_charts(rendered) and await self._charts.as_images():
                rendered = without_charts(rendered)
            return NoticePost(incident_id, rendered, self._notices)
        if kind == "warning" and self._warnings is not None:
            state = await self._warnings.get(incident_id)
            if state is None or state.ts or state.channel != self.channel:
                await self._warnings.forget_post(self.channel, member)  # gone, or posted
                return None
            return WarningPost(state, self._warnings)
        if kind == "root":
            loaded = await self._store.load(incident_id)
            if loaded.incident is None or loaded.thread is not None:
                await self._queue.forget(self.channel, member)  # gone, or posted already
                return None
            return RootPost(loaded.incident, loaded.version, self._clock, self._config.within_mins)
        head = await self._queue.head_reply(incident_id)
        if head is None:
            await self._queue.forget(self.channel, member)
            return None
        if head.thread is None:
            # Its root was refused or expired: the root goes first (band 0), or the thread is
            # dropped if the root can never be posted.
            await self._queue.ensure_root_queued(self.channel, incident_id)
            return None
        if head.is_status:
            rendered = await self._status_now(incident_id, head)
            if rendered is None:
                await self._queue.record_reply(self.channel, incident_id, head.item)
                return None
            head = replace(head, rendered=rendered)
        if head.kind == CHART:
            # Where charts go as blocks, the picture queued with a status or summary is not
            # posted; else it is drawn from the incident now.
            images = await self._charts.as_images()
            chart = await self._chart_now(incident_id, head) if images else None
            if chart is None or not chart.series:
                await self._queue.record_reply(self.channel, incident_id, head.item)
                return None
            return ChartUpload(incident_id, head, head.thread, chart)
        if has_charts(head.rendered) and await self._charts.as_images():
            head = replace(head, rendered=without_charts(head.rendered))
        # A quiet status whose post as a reply of its own may have landed is that reply now: it
        # is looked up, not made an edit as well.
        quiet = head.kind == RESTATUS and head.status_ts
        posted_maybe = in_flight is not None and in_flight.item == head.item
        if quiet and not posted_maybe and await self._edited_status(incident_id, head):
            return None
        return ReplyPost(incident_id, head, head.thread)

    async def _chart_now(self, incident_id: str, head: HeadReply) -> ChartData | None:
        """A picture's series: the incident's trend now (queued with its series by 0.19 and
        before); None when the incident is gone."""
        if head.extra:
            return ChartData.from_extra(head.extra)
        incident = (await self._store.load(incident_id)).incident
        return incident_chart(incident) if incident is not None else None

    async def _status_now(self, incident_id: str, head: HeadReply) -> Rendered | None:
        """A status reply's blocks, rendered now from the incident it was recorded on (the tick
        only decided it); None when the incident is gone, so there is nothing to show."""
        shown = StatusShown.from_extra(head.extra)
        if shown is None:
            return head.rendered  # queued rendered, by 0.8 or before
        incident = (await self._store.load(incident_id)).incident
        if incident is None:
            return None
        return render_shown(incident, shown, now=self._clock())

    async def _edited_status(self, incident_id: str, head: HeadReply) -> bool:
        """A quiet status edits the previous status reply, in an edit slot. It is posted as a
        new reply instead (False) when that reply can never be edited again (deleted, too old),
        and when Slack holds edits for a 429: this is the posts' path, and an edit's hold must
        not keep the channel's posts waiting."""
        # An edit slot is a moment away unless Slack holds edits: a few intervals at most.
        patience_s = 2 * self._config.update_interval_ms / 1000
        try:
            refused = await self._editor.update(head.status_ts, head.rendered, within_s=patience_s)
        except SlackError as exc:
            if exc.retry_after is None:
                raise
            return False
        if refused is not None and _chart_refused(refused, head.rendered):
            await self._charts.refused(refused.error)
            return await self._edited_status(
                incident_id, replace(head, rendered=without_charts(head.rendered))
            )
        if refused is not None:
            log.info(
                "incident %s: status reply not editable (%s); posting", incident_id, refused.error
            )
            return False
        await self._queue.record_reply(self.channel, incident_id, head.item)
        return True

    async def _deliver(self, outgoing: Outgoing, in_flight: InFlight | None) -> None:
        """Stages 5 to 9 of the module docstring, for one outgoing item."""
        if in_flight is not None and in_flight.item == outgoing.item:
            ts = await self._look_up(outgoing, in_flight)
            if ts is not None:
                await outgoing.record(self._ledger, ts, bucket=self._budget.encode(), found=True)
                return
        await outgoing.prepare()
        mark = InFlight(outgoing.member, outgoing.item, time.time())
        if not await self._queue.begin(self.channel, self._lease.token, mark):
            raise LostLease
        self._budget.spend_post()
        try:
            ts = await outgoing.send(self._slack, self.channel)
        except SlackError as exc:
            if exc.retryable:
                if not exc.uncertain:  # a 429 or a refused connection: nothing was posted
                    await self._queue.end_attempt(self.channel, mark)
                raise  # the mark stays when uncertain: the next attempt looks it up first
            shown = outgoing.shown()
            if shown is not None and _chart_refused(exc, shown):
                # The workspace does not take Slack's chart block: pictures from now on, and
                # this goes again at once without it (`_read` takes it out).
                await self._charts.refused(exc.error)
                await self._queue.end_attempt(self.channel, mark)
                return
            await outgoing.refused(self._ledger, exc.error)
            return
        await outgoing.record(self._ledger, ts, bucket=self._budget.encode(), found=False)

    async def _look_up(self, outgoing: Outgoing, in_flight: InFlight) -> str | None:
        """The ts of a post that may have landed before its sender heard back, if it did.

        It reads what the channel (or the thread) shows from shortly before the attempt to
        shortly after it, whatever the clocks' skew. A lookup Slack refuses for good (a scope
        removed from the app, say) finds nothing: posting again is the lesser harm, a possible
        duplicate beats a channel that never posts again."""
        margin = self._config.lookup_margin_s
        thread = outgoing.thread
        try:
            found = await self._slack.find(
                "conversations.history" if thread is None else "conversations.replies",
                self.channel,
                outgoing.landed,
                ts=thread.ts if thread else None,
                oldest=in_flight.since - margin,
                latest=in_flight.since + margin,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            log.error(
                "sender %s: cannot look %s up (%s); sending it again, it may show twice",
                self.channel,
                outgoing.item,
                exc.error,
            )
            self._telemetry.slack_lookups.labels("failed").inc()
            return None
        if found is None:
            self._telemetry.slack_lookups.labels("not_found").inc()
            return None
        log.info("sender %s: %s had landed; not posted again", self.channel, outgoing.item)
        self._telemetry.slack_lookups.labels("found").inc()
        return str(found.get("ts", ""))


class LostLease(Exception):
    """Another replica took this channel over: this sender stops before it posts anything."""


class _Retry(Exception):
    """The step failed in a way already logged; try again after a backoff."""


def _chart_refused(refused: SlackError, rendered: Rendered) -> bool:
    """Slack refused the message for its chart block (not for another of its blocks)."""
    return refused.error == "invalid_blocks" and blames_charts(rendered, refused.details)
