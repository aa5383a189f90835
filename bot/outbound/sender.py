"""The per-channel sender: the one writer of incident messages in a Slack channel.

Whoever changes an incident commits what Slack must show (`bot.storage.incident_store`) and is
done; for each
channel one replica at a time, holding the channel's lease, drains its queue (`bot.outbound.queue`):
- posts (new roots, then thread replies, most urgent band first, each thread in order) within a
  token bucket modelled on Slack's: about one post per second per channel, short bursts;
- edits of root messages on their own budget, rendered from the incident's latest state at the
  moment of sending, so a burst of changes is one edit and a Slack outage ends with the latest
  state, never a replay;
- a 429 is waited out before the next slot is taken, so a hold never ends in a burst;
- an uncertain failure (a timeout, a 5xx) is followed by a lookup of the message by its
  `metadata` before anything is posted again, and so is a post its predecessor left in flight;
- a retryable failure is retried with backoff for as long as it takes: an outage delays the
  channel, it never drops an update. A permanent refusal drops that one item, with a record;
- in a storm (`storm_threshold` new roots waiting at once), one digest message lists every new
  group at once and is edited as more arrive; the roots still follow one slot at a time, most
  severe first, and the digest becomes a summary once the storm is over (`bot.outbound.storm`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeGuard, TypeVar

from redis.exceptions import RedisError

from bot.domain.incidents import Incident
from bot.outbound.gateway import SlackError, SlackGateway
from bot.outbound.marks import carries, digest_of, metadata
from bot.outbound.pacing import Backoff, TokenBucket
from bot.outbound.queue import EditCandidate, HeadReply, InFlight, SendQueue
from bot.outbound.storm import StormConfig, StormDigest
from bot.outbound.storm_queue import StormQueue
from bot.render.chart import ChartData, render_chart
from bot.render.mrkdwn import Rendered
from bot.render.replies import StatusShown, render_shown
from bot.render.root import render_root
from bot.storage.incident_store import (
    CHART,
    RESTATUS,
    STATUS_KINDS,
    IncidentStore,
    Loaded,
    ThreadRef,
)
from bot.storage.leases import Lease, Leases
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors that say the message the edit was for is gone or frozen: editing will never work.
_LOST_MESSAGE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})


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
        config: SenderConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self.channel = channel
        self._lease = lease
        self._store = store
        self._queue = queue
        self._slack = slack
        self._leases = leases
        self._telemetry = telemetry
        self._config = config
        self._clock = clock
        self._bucket = TokenBucket(config.post_interval_s, config.post_burst, now=time.time())
        self._failures: dict[str, int] = {}
        self._storm = StormDigest(
            channel,
            self,
            storms=storms,
            queue=queue,
            store=store,
            slack=slack,
            telemetry=telemetry,
            config=config.storm,
            clock=clock,
        )

    async def run(self) -> None:
        now = time.time()
        self._bucket.restore(await self._queue.bucket(self.channel), now)
        held = await self._slack.held_for("chat.postMessage")
        if held > 0:  # a 429 its predecessor got and did not live to record
            self._bucket.hold(now + held)
        loops = [self._loop(self._post_next), self._loop(self._edit_next)]
        if self._storm.enabled:
            loops.append(self._loop(self._storm.step))
        await asyncio.gather(*loops)

    async def _loop(self, step: Callable[[], Any]) -> None:
        backoff = Backoff(self._config.backoff_max_s)
        while True:
            try:
                await step()
                backoff.reset()
            except SlackError as exc:
                wait = exc.retry_after if exc.retry_after is not None else backoff.next()
                if exc.retry_after is not None:
                    self._bucket.hold(time.time() + wait)
                log.warning("sender %s: Slack %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except RedisError as exc:
                wait = backoff.next()
                log.warning("sender %s: Redis %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except _Retry:
                await asyncio.sleep(backoff.next())

    # -- posts -----------------------------------------------------------------------------

    async def _post_next(self) -> None:
        """The channel's next post: its slot first, then the most urgent item and its state, so
        what is posted is current and nothing more urgent waits behind it."""
        await self._wait_for_slot()
        member, in_flight = await self._queue.next_post(self.channel)
        if member is None:
            await self._queue.wait_bell(self._queue.keys.posts_bell(self.channel), 1.0)
            return
        kind, _, incident_id = member.partition(":")
        try:
            if kind == "root":
                await self._next_root(member, incident_id, in_flight)
            else:
                await self._post_reply(member, incident_id, in_flight)
        except (SlackError, RedisError, LostLease):
            raise
        except Exception:
            # A bug or unreadable state must cost this one item, never the whole channel.
            failures = self._failures.get(member, 0) + 1
            self._failures[member] = failures
            log.exception("sender %s: %s failed (%d times)", self.channel, member, failures)
            if failures >= 3:
                self._failures.pop(member, None)
                await self._queue.undeliverable(incident_id, member, "unreadable")
                await self._queue.drop_thread(self.channel, incident_id)
            raise _Retry from None

    async def _next_root(self, member: str, incident_id: str, in_flight: InFlight | None) -> None:
        """A storm's digest goes first when roots wait in numbers; otherwise the root itself."""
        if self._storm.enabled:
            storm = await self._storm.before_root()
            if storm is not None and not storm.ts:
                await self._storm.post(storm)
                return
        await self._post_root(member, await self._store.load(incident_id), in_flight)

    async def _post_root(self, member: str, loaded: Loaded, in_flight: InFlight | None) -> None:
        incident = loaded.incident
        if incident is None or loaded.thread is not None:
            await self._queue.forget(self.channel, member)  # gone, or posted already
            return
        if in_flight is not None:  # marks are per queue member: this very root
            found = await self.look_up(in_flight, incident.uid, thread=None)
            if found is not None:
                root = render_root(incident, now=self._clock(), mentions=False)
                await self._root_posted(loaded.version, incident, found, root)
                return
        # Rendered after any lookup (minutes, under a distributed app's limits), so the post says
        # the time it goes out; a change the lookup waited through reaches the root as an edit.
        root = render_root(incident, now=self._clock(), mentions=False)
        ts = await self._send(member, "root", incident.id, incident.uid, root, thread=None)
        if ts is not None:
            await self._root_posted(loaded.version, incident, ts, root)

    async def _root_posted(self, version: int, incident: Incident, ts: str, root: Rendered) -> None:
        digest = digest_of(root)
        # Only an owner named in the post (mentioned in edits) makes an edit differ by itself.
        differs = bool(incident.acknowledged_by or incident.resolved_by) and digest != digest_of(
            render_root(incident, now=self._clock(), mentions=True)
        )
        await self._queue.record_root(
            incident,
            ts,
            digest,
            version=version,
            edit_differs=differs,
            # A post is not an edit: the first edit may follow at once.
            edit_after_ms=int(time.time() * 1000),
            bucket=self._bucket.encode(),
        )
        log.info("incident %s: opened thread %s in %s", incident.id, ts, self.channel)

    async def _post_reply(self, member: str, incident_id: str, in_flight: InFlight | None) -> None:
        head = await self._queue.head_reply(incident_id)
        if head is None:
            await self._queue.forget(self.channel, member)
            return
        if head.thread is None:
            # Its root was refused or expired: the root goes first (band 0), or the thread is
            # dropped if the root can never be posted.
            await self._queue.ensure_root_queued(self.channel, incident_id)
            return
        if head.kind in STATUS_KINDS:
            rendered = await self._status_now(incident_id, head)
            if rendered is None:
                await self._queue.record_reply(self.channel, incident_id, head.item)
                return
            head = replace(head, rendered=rendered)
        if head.kind == RESTATUS and head.status_ts:
            await self._edit_status(incident_id, head)
            return
        if head.kind == CHART:
            await self._upload_chart(member, incident_id, head, in_flight)
            return
        if _started(in_flight, head.item):
            found = await self.look_up(in_flight, head.uid, thread=head.thread)
            if found is not None:
                await self._record_posted(incident_id, head, found)
                return
        ts = await self._send(
            member, head.item, incident_id, head.uid, head.rendered, thread=head.thread
        )
        if ts is not None:
            await self._record_posted(incident_id, head, ts, bucket=self._bucket.encode())

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

    async def _record_posted(
        self, incident_id: str, head: HeadReply, ts: str, *, bucket: str = ""
    ) -> None:
        status_ts = ts if head.kind in STATUS_KINDS else ""
        await self._queue.record_reply(
            self.channel, incident_id, head.item, bucket=bucket, status_ts=status_ts
        )

    async def _edit_status(self, incident_id: str, head: HeadReply) -> None:
        """A quiet status edits the previous status reply, on the edit budget, not the posts'."""
        assert head.thread is not None
        await self.wait_for_update_slot()
        try:
            await self._slack.update(
                head.thread.channel, head.status_ts, head.rendered.text, head.rendered.blocks
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            # The previous status is gone (deleted, too old to edit): post this one instead.
            log.info("incident %s: status reply not editable (%s); posting", incident_id, exc.error)
            await self._queue.forget_status_ts(incident_id)
            return
        await self._queue.record_reply(self.channel, incident_id, head.item)

    async def _upload_chart(
        self, member: str, incident_id: str, head: HeadReply, in_flight: InFlight | None
    ) -> None:
        """The trend chart, rendered off the event loop at send time from the series the tick
        stored; a chart whose upload may have landed is looked up by its file name first."""
        assert head.thread is not None
        filename = f"queue-trend-{incident_id}-{head.item.rsplit(':', 1)[-1]}.png"
        if _started(in_flight, head.item) and await self._chart_landed(
            head.thread, filename, in_flight.since
        ):
            await self._queue.record_reply(self.channel, incident_id, head.item)
            return
        chart = ChartData.from_extra(head.extra or {})
        png = await asyncio.to_thread(render_chart, chart) if chart.series else None
        if png is None:
            await self._queue.record_reply(self.channel, incident_id, head.item)
            return
        thread = head.thread
        uploaded = await self.within_budget(
            member,
            head.item,
            incident_id,
            lambda: self._slack.upload_png(
                thread.channel,
                thread.ts,
                data=png,
                filename=filename,
                title=head.rendered.text,
                alt=chart.alt_text,
            ),
        )
        if uploaded is not None:
            await self._queue.record_reply(
                self.channel, incident_id, head.item, bucket=self._bucket.encode()
            )

    async def _chart_landed(self, thread: ThreadRef, filename: str, since: float) -> bool:
        def shows_it(message: dict[str, Any]) -> bool:
            return any(isinstance(f, dict) and f.get("name") == filename for f in _files(message))

        return await self._find(since, thread, shows_it, filename) is not None

    async def _send(
        self,
        member: str,
        item: str,
        incident_id: str,
        uid: str,
        rendered: Rendered,
        *,
        thread: ThreadRef | None,
    ) -> str | None:
        """Post within the budget, marked in flight; None if it can never be posted."""
        return await self.within_budget(
            member,
            item,
            incident_id,
            lambda: self._slack.post(
                self.channel,
                rendered.text,
                rendered.blocks,
                thread_ts=thread.ts if thread else None,
                metadata=metadata(incident_id, uid, item),
            ),
        )

    async def within_budget(
        self,
        member: str,
        item: str,
        incident_id: str,
        call: Callable[[], Awaitable[T]],
        *,
        refused: Callable[[SlackError], Awaitable[None]] | None = None,
    ) -> T | None:
        """One post-like call (a message, a file shared into the thread) in the channel's
        budget, marked in flight first; None when Slack refused it for good."""
        await self._wait_for_slot()
        marker = InFlight(member, item, time.time())
        if not await self._queue.begin(self.channel, self._lease.token, marker):
            raise LostLease
        self._bucket.take(time.time())
        try:
            return await call()
        except SlackError as exc:
            if exc.retryable:
                if not exc.uncertain:  # a 429 or a refused connection: nothing was posted
                    await self._queue.end_attempt(self.channel, marker)
                raise  # the mark stays when uncertain: the next attempt looks it up first
            if refused is not None:
                await refused(exc)
            else:
                await self._refused(member, item, incident_id, exc)
            return None

    def bucket_state(self) -> str:
        """The channel's bucket as its successor would take it over."""
        return self._bucket.encode()

    async def _refused(self, member: str, item: str, incident_id: str, exc: SlackError) -> None:
        """Slack refused for good: drop this item (a root takes its thread with it)."""
        log.error("incident %s: Slack refused %s: %s; dropped", incident_id, item, exc.error)
        self._telemetry.slack_undeliverable.labels(exc.error).inc()
        await self._queue.undeliverable(incident_id, item, exc.error)
        if member.startswith("root:"):
            await self._queue.drop_thread(self.channel, incident_id)
        else:
            await self._queue.record_reply(self.channel, incident_id, item)

    async def _wait_for_slot(self) -> None:
        """The channel's budget is this sender's alone (it is the one poster, and Slack limits
        posts per channel); a 429's hold is in the bucket, which its successor inherits."""
        wait = self._bucket.wait_s(time.time())
        if wait > 0:
            await asyncio.sleep(wait)

    async def look_up(
        self, in_flight: InFlight, uid: str, *, thread: ThreadRef | None
    ) -> str | None:
        """The ts of a post that may have landed before its sender heard back, if it did."""
        found = await self._find(
            in_flight.since, thread, lambda m: carries(m, uid, in_flight.item), in_flight.item
        )
        if found is None:
            self._telemetry.slack_lookups.labels("not_found").inc()
            return None
        log.info("sender %s: %s had landed; not posted again", self.channel, in_flight.item)
        self._telemetry.slack_lookups.labels("found").inc()
        return str(found.get("ts"))

    async def _find(
        self,
        since: float,
        thread: ThreadRef | None,
        match: Callable[[dict[str, Any]], bool],
        what: str,
    ) -> dict[str, Any] | None:
        """What the channel (or the thread) shows from shortly before an attempt to shortly
        after it that `match` accepts: a post that landed has its ts there, whatever the
        clocks' skew. A lookup Slack refuses for good (a scope removed from the app, say) finds
        nothing: posting again is the lesser harm, a possible duplicate beats a channel that
        never posts again."""
        margin = self._config.lookup_margin_s
        method = "conversations.history" if thread is None else "conversations.replies"
        try:
            return await self._slack.find(
                method,
                self.channel,
                match,
                ts=thread.ts if thread else None,
                oldest=since - margin,
                latest=since + margin,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            log.error(
                "sender %s: cannot look %s up (%s); sending it again, it may show twice",
                self.channel,
                what,
                exc.error,
            )
            self._telemetry.slack_lookups.labels("failed").inc()
            return None

    # -- edits -----------------------------------------------------------------------------

    async def _edit_next(self) -> None:
        now_ms = int(time.time() * 1000)
        incident_id, next_at = await self._queue.next_edit(self.channel, now_ms)
        if incident_id is None:
            wait = 1.0 if next_at is None else min(1.0, (next_at - now_ms) / 1000)
            await self._queue.wait_bell(self._queue.keys.edits_bell(self.channel), wait)
            return
        candidate = await self._queue.edit_candidate(self.channel, incident_id)
        await self._edit(candidate, now_ms)

    async def _edit(self, candidate: EditCandidate, now_ms: int) -> None:
        loaded, incident_id = candidate.loaded, candidate.incident_id
        if loaded.incident is None or loaded.thread is None:
            await self._queue.drop_edit(self.channel, incident_id)
            return
        root = render_root(loaded.incident, now=self._clock(), mentions=True)
        digest = digest_of(root)
        edited = digest != loaded.rendered
        if edited and now_ms < candidate.edit_after_ms:
            await self._queue.postpone_edit(self.channel, incident_id, candidate.edit_after_ms)
            return
        if edited:
            await self.wait_for_update_slot()
            try:
                await self._slack.update(
                    loaded.thread.channel, loaded.thread.ts, root.text, root.blocks
                )
            except SlackError as exc:
                if exc.retryable:
                    raise
                # The root was deleted or the channel archived: editing will never work again,
                # and posting it again would make a second root. Record it and stop trying.
                log.error("incident %s: cannot edit its root: %s", incident_id, exc.error)
                self._telemetry.slack_undeliverable.labels(exc.error).inc()
        await self._queue.record_edit(
            self.channel,
            incident_id,
            version=loaded.version,
            digest=digest,
            next_at_ms=int(time.time() * 1000) + self._config.root_edit_interval_ms,
            edited=edited,
        )

    async def wait_for_update_slot(self) -> None:
        """chat.update is limited per workspace: replicas and channels share one slot."""
        while True:
            held = await self._slack.held_for("chat.update")
            if held > 0:
                await asyncio.sleep(held)
                continue
            slot = self._queue.keys.update_slot
            if await self._leases.take_slot(slot, self._config.update_interval_ms):
                return
            await asyncio.sleep(0.05)


def _files(message: dict[str, Any]) -> list[Any]:
    files = message.get("files")
    return files if isinstance(files, list) else []


def _started(in_flight: InFlight | None, item: str) -> TypeGuard[InFlight]:
    """Whether this very item was in flight when its sender stopped: it may have landed."""
    return in_flight is not None and in_flight.item == item


class LostLease(Exception):
    """Another replica took this channel over: this sender stops before it posts anything."""


class _Retry(Exception):
    """The step failed in a way already logged; try again after a backoff."""
