"""The send path, read top to bottom: the leader runs one `ChannelSender` per channel (`run`),
which posts its channel's queue one at a time in `post_next`, its edits in loops beside
(`bot.outbound.desk`). docs/architecture.md walks the whole path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from enum import Enum
from functools import partial

from redis.exceptions import RedisError

from bot import logs
from bot.domain.message import Rendered
from bot.outbound import messages
from bot.outbound.desk import Desk, Outbound, Post, Upload, edit_root, edit_warnings
from bot.outbound.gateway import SlackError
from bot.outbound.messages import ROOT, UNREADABLE
from bot.outbound.storm import StormDigest
from bot.pacing import Backoff
from bot.storage.send_queue import InFlight

log = logging.getLogger(__name__)

BACKOFF_MAX_S = 30.0
# Slack's history can lag a post and its clock is not ours: a lookup reads this far either side.
LOOKUP_MARGIN_S = 60.0
STRIKES = 3  # failures in a row that drop an item, so one bug costs one item
# Items with a failure counted, at most (one that changed since is never counted again).
STRUCK_KEPT = 256
# Network jitter can make calls sent one interval apart arrive closer and earn a 429.
JITTER_MARGIN = 1.05
POST_METHODS = frozenset({"chat.postMessage", "files.completeUploadExternal"})
CHANNELS_EVERY_S = 1.0  # how often the channels to send to are read again


def strike(strikes: dict[str, int], name: str) -> int:
    """Count one more failure of `name` and answer how many; past STRUCK_KEPT items the one
    counted longest ago is forgotten."""
    count = strikes[name] = strikes.pop(name, 0) + 1
    if len(strikes) > STRUCK_KEPT:
        del strikes[next(iter(strikes))]
    return count


class Struck(Exception):
    """An attempt failed in a way already logged and counted: try again after a backoff."""


class Answer(Enum):
    """What Slack's failure of a post means for it."""

    NOT_SENT = "not sent"  # a 429 or a refused connection: Slack did nothing; try again
    UNCERTAIN = "uncertain"  # a timeout, a 5xx: it may have landed; look it up before again
    CHARTS_REFUSED = "charts refused"  # the workspace takes no chart block: pictures from now on
    REFUSED = "refused"  # for good: drop this one item, with a record


def classify(exc: SlackError, drawn: Rendered | Upload) -> Answer:
    if exc.retryable:
        return Answer.UNCERTAIN if exc.uncertain else Answer.NOT_SENT
    if isinstance(drawn, Rendered) and messages.chart_refused(exc, drawn):
        return Answer.CHARTS_REFUSED
    return Answer.REFUSED


class ChannelSender:
    def __init__(self, out: Outbound, channel: str, now: Callable[[], float] = time.time) -> None:
        self.channel = channel
        self._out = out
        self._now = now
        # The channel's posts: `burst` at once at most, then one an interval.
        self._pacing, self._slot = out.slack.pacing, f"posts {channel}"
        self._interval_s = out.config.slack_post_interval_ms / 1000 * JITTER_MARGIN
        self._burst = out.config.slack_post_burst
        # A 429 on a post this leader got before this channel's sender started holds it too.
        if (held := self._pacing.held_for("chat.postMessage")) > 0:
            self._pacing.hold(self._slot, held)
        self._strikes: dict[str, int] = {}
        self._desk = Desk(out, channel)
        self._storm = StormDigest(self._desk)

    async def run(self) -> None:
        """Post and edit until one loop fails or this is cancelled; every loop ends with it."""
        desk, out = self._desk, self._out
        steps = [self._post_or_wait, partial(edit_root, desk, out.queue.root_edits(desk.channel))]
        if out.warnings is not None:
            steps.append(partial(edit_warnings, desk, out.warnings))
        if self._storm.enabled:
            steps.append(self._storm.step)
        async with asyncio.TaskGroup() as loops:
            for step in steps:
                loops.create_task(self._loop(step))

    async def _loop(self, step: Callable[[], Awaitable[None]]) -> None:
        backoff = Backoff(BACKOFF_MAX_S)
        while True:
            # A cancel redis-py swallowed still counts on the task: honoured, or the loop lives on.
            if (task := asyncio.current_task()) is not None and task.cancelling():
                raise asyncio.CancelledError
            try:
                await step()
                backoff.reset()
            except SlackError as exc:
                if exc.retry_after is not None and exc.method in POST_METHODS:
                    # A 429 on a post holds the posts; one on an edit, the gateway's edit slot.
                    self._pacing.hold(self._slot, exc.retry_after)
                wait = exc.retry_after if exc.retry_after is not None else backoff.next()
                log.warning("sender %s: Slack %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except RedisError as exc:
                wait = backoff.next()
                log.warning("sender %s: Redis %s; retrying in %.1f s", self.channel, exc, wait)
                await asyncio.sleep(wait)
            except Struck:
                await asyncio.sleep(backoff.next())

    async def _post_or_wait(self) -> None:
        if not await self.post_next():
            await self._out.queue.wait_bell(self._out.queue.keys.posts_bell(self.channel), 1.0)

    async def post_next(self) -> bool:
        """Send the channel's most urgent post; False when none was waiting."""
        out, channel = self._out, self.channel
        logs.tag(incident="")  # this loop's lines name the post's incident once it is known
        wait = self._pacing.slot_in(self._slot, self._interval_s, self._burst)  # 1. the slot
        if wait > 0:
            await asyncio.sleep(wait)
        member, earlier = await out.queue.next_post(channel)  # 2. the most urgent member
        if member is None:
            return False
        post: Post | None = None
        try:
            if member.startswith(f"{ROOT}:"):  # 3. the storm gate
                post = await self._storm.gate()
                if post is not None:  # the digest, in the root's place: its own mark counts
                    earlier = await out.queue.in_flight(channel, post.member)
            if post is None:  # 4. what the member stands for now
                post = await messages.read(self._desk, member, earlier)
            if post is None:
                return True  # nothing left to post, and that is recorded
            logs.tag(incident=post.incident_id)
            # 5. this very item may have landed before its last attempt heard back
            if earlier and earlier.item == post.item and await self._found(post, earlier):
                self._strikes.pop(f"{post.member}/{post.item}", None)
                return True
            drawn = await post.draw()  # 6.
            mark = InFlight(post.member, post.item, self._now())  # 7.
            await out.queue.begin(channel, mark)
            await self._send(post, drawn, mark)  # 8. and 9.
        except (SlackError, RedisError):
            raise  # the loop's backoff retries these
        except Exception:
            await self._failed(member, post)
            raise Struck from None
        self._strikes.pop(f"{post.member}/{post.item}", None)
        return True

    async def _found(self, post: Post, earlier: InFlight) -> bool:
        """Whether `post` had landed before its last attempt heard back (then it is recorded).
        A lookup refused for good finds nothing: a duplicate beats a channel that never posts."""
        lookups = self._out.telemetry.slack_lookups
        try:
            found = await self._out.slack.find(
                "conversations.history" if post.thread_ts is None else "conversations.replies",
                self.channel,
                lambda message: messages.landed(post, message),
                ts=post.thread_ts,
                oldest=earlier.since - LOOKUP_MARGIN_S,
                latest=earlier.since + LOOKUP_MARGIN_S,
            )
        except SlackError as exc:
            if exc.retryable:
                raise
            log.error(
                "sender %s: cannot look %s up (%s); sending it again, it may show twice",
                self.channel,
                post.item,
                exc.error,
            )
            lookups.labels("failed").inc()
            return False
        if found is None:
            lookups.labels("not_found").inc()
            return False
        log.info("sender %s: %s had landed; not posted again", self.channel, post.item)
        lookups.labels("found").inc()
        await post.record(str(found.get("ts", "")), None)
        return True

    async def _send(self, post: Post, drawn: Rendered | Upload, mark: InFlight) -> None:
        out, channel = self._out, self.channel
        self._pacing.take(self._slot, self._interval_s, self._burst)
        try:
            if isinstance(drawn, Upload):
                await out.slack.upload_file(
                    channel,
                    post.thread_ts or "",
                    data=drawn.data,
                    filename=post.filename,
                    title=drawn.title,
                    alt=drawn.alt,
                )
                ts = ""  # a file share is not a message this bot keeps the ts of
            else:
                answer = await out.slack.call(
                    "chat.postMessage",
                    channel=channel,
                    text=drawn.text,
                    blocks=drawn.blocks,
                    thread_ts=post.thread_ts,
                    metadata=messages.metadata(post),
                    unfurl_links=False,
                    unfurl_media=False,
                )
                ts = str(answer["ts"])
        except SlackError as exc:
            answer = classify(exc, drawn)
            if answer is Answer.UNCERTAIN:
                raise  # the mark stays: the next attempt looks it up first
            if answer is not Answer.REFUSED:
                await out.queue.end_attempt(channel, mark)
            if answer is Answer.NOT_SENT:
                raise  # for the loop to wait out (a Retry-After, or a backoff)
            if answer is Answer.CHARTS_REFUSED:
                # Pictures from now on; this goes again at once, read without its chart.
                await out.charts.refused(exc.error)
            else:
                await post.refuse(exc.error)
            return
        await post.record(ts, drawn)

    async def _failed(self, member: str, post: Post | None) -> None:
        name = f"{post.member}/{post.item}" if post is not None else member
        count = strike(self._strikes, name)
        log.exception("sender %s: %s failed (%d times)", self.channel, name, count)
        if count < STRIKES:
            return
        del self._strikes[name]
        if post is not None:
            await post.refuse(UNREADABLE)
        else:
            await messages.unreadable(self._desk, member)


async def run(out: Outbound, stop: asyncio.Event) -> None:
    """Send to every channel (the routes' and any with something queued) until `stop`."""
    sending: dict[str, asyncio.Task[None]] = {}
    try:
        while not stop.is_set():
            try:
                queued = set(await out.queue.channels())
                for channel in sorted((out.config.routing.channels | queued) - {"", *sending}):
                    task = asyncio.create_task(_send_to(out, channel), name=f"sender:{channel}")
                    sending[channel] = task
                    task.add_done_callback(lambda _, c=channel: sending.pop(c, None))  # type: ignore[misc]
            except RedisError as exc:
                log.warning("senders: Redis unavailable: %s", exc)
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=CHANNELS_EVERY_S)
    finally:
        tasks = list(sending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _send_to(out: Outbound, channel: str) -> None:
    """Run the channel's sender; one that failed is started again by `run` within a second."""
    logs.tag(channel=channel)  # this task is the channel's, and so are the sender's loops
    log.info("senders: sending to %s", channel)
    try:
        await ChannelSender(out, channel).run()
    except Exception as exc:
        log.error("senders: the sender of %s failed: %r", channel, exc)
    finally:
        log.info("senders: stopped sending to %s", channel)
