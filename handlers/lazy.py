"""queuepilot's runner of Bolt's lazy listeners (`ack=…, lazy=[…]`). A lazy function the leader
performs (`handlers.listeners.WORK`) is appended to the requests stream, so a click survives the
replica Slack reached; any other runs here at once (it needs this replica: a modal's trigger
expires in 3 s). Every lazy function takes `body` and `context`, here and on the leader."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.lazy_listener.async_runner import AsyncLazyListenerRunner
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.actions.core import Outcome
from bot.actions.flow import NO_REDIS
from bot.storage.consumer_group import NotReplicated
from bot.storage.requests import RequestRefused, RequestStream
from handlers.context import slack_of, tell

log = logging.getLogger(__name__)

Lazy = Callable[..., Awaitable[None]]
NOT_TAKEN = Outcome(False, "queuepilot could not take this request; its log says why.", "error")


class StreamRunner(AsyncLazyListenerRunner):
    def __init__(self, requests: RequestStream, work: Collection[str], logger: logging.Logger):
        self.logger = logger
        self._requests = requests
        self._work = work
        self._under_way: set[asyncio.Task[None]] = set()

    def start(self, function: Lazy, request: AsyncBoltRequest) -> None:
        name = request.lazy_function_name or ""
        body, context = request.body, request.context
        if name in self._work:
            task = asyncio.ensure_future(self._append(name, body, context))
        else:
            task = asyncio.ensure_future(_here(function, body, context))
        self._under_way.add(task)  # a reference, so the task is not collected mid-way
        task.add_done_callback(self._under_way.discard)

    @property
    def pending(self) -> int:
        return len(self._under_way)

    async def drain(self, timeout_s: float) -> None:
        """Let the work acknowledged so far be appended or done before Redis closes: Slack has
        its answer, so the person is waiting for it."""
        if self._under_way:
            await asyncio.wait(set(self._under_way), timeout=timeout_s)
        if self._under_way:
            log.warning("slack: %d acknowledged requests not done at the stop", self.pending)

    async def _append(self, name: str, body: dict[str, Any], context: AsyncBoltContext) -> None:
        """A request that cannot be appended is answered here, so the person hears why."""
        try:
            await self._requests.append(name, body)
        except RequestRefused as exc:
            log.warning("slack: a %s request was not taken: %s", name, exc)
            await tell(slack_of(context), body, NOT_TAKEN)
        except NotReplicated as exc:
            # In the stream, so it will be done: asking the person to retry would do it twice.
            log.warning("slack: a %s request is not yet on a Redis replica: %s", name, exc)
        except RedisError as exc:
            log.error("slack: a %s request was not taken: Redis: %s", name, exc)
            await tell(slack_of(context), body, Outcome(False, NO_REDIS, "error"))


async def _here(function: Lazy, body: dict[str, Any], context: AsyncBoltContext) -> None:
    try:
        await function(body=body, context=context)
    except Exception:
        log.exception("slack: %s failed after the ack", function.__name__)
