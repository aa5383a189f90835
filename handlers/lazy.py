"""queuepilot's runner of Bolt's lazy listeners (`ack=…, lazy=[…]`). A lazy function the leader
performs (`handlers.listeners.WORK`) is appended to the requests stream under its key, so a click
survives the replica Slack reached; any other runs here at once (it needs this replica: a modal's
trigger expires in 3 s). Every lazy function takes `body` and `context`, here and on the leader."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.lazy_listener.async_runner import AsyncLazyListenerRunner
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.actions.core import Outcome
from bot.actions.flow import unanswered
from bot.storage.streams import NotReplicated, RequestRefused, RequestStream
from handlers.context import slack_of, tell

log = logging.getLogger(__name__)

Lazy = Callable[..., Awaitable[None]]
Wanted = Callable[[dict[str, Any], AsyncBoltContext], Awaitable[bool]]
NOT_TAKEN = Outcome(False, "queuepilot could not take this request; its log says why.", "error")


@dataclass(frozen=True)
class Work:
    """A lazy function the leader performs, and whether a request needs it at all: asked where
    Slack arrived, so what needs no leader is neither appended nor hostage to Redis."""

    perform: Lazy
    wanted: Wanted | None = None  # None: always


class StreamRunner(AsyncLazyListenerRunner):
    def __init__(self, requests: RequestStream, work: Mapping[str, Work], logger: logging.Logger):
        # Bolt's own `run`, for a request that names its lazy function
        # (`x-slack-bolt-lazy-function-name`), logs through it.
        self.logger = logger
        self._requests = requests
        self._work = {w.perform: (key, w.wanted) for key, w in work.items()}
        self._under_way: set[asyncio.Task[None]] = set()

    def start(self, function: Lazy, request: AsyncBoltRequest) -> None:
        body, context = request.body, request.context
        if (work := self._work.get(function)) is not None:
            task = asyncio.ensure_future(self._append(*work, body, context))
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

    async def _append(
        self, key: str, wanted: Wanted | None, body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """A request that cannot be appended is answered here, so the person hears why."""
        try:
            if wanted is not None and not await wanted(body, context):
                return
        except RedisError as exc:
            # Its other lazy work, done here, meets the same Redis and tells the person.
            log.warning("slack: a request (%s) not handed on: Redis: %s", key, exc)
            return
        try:
            await self._requests.append(key, body)
            return
        except RequestRefused as exc:
            log.warning("slack: a request (%s) was not taken: %s", key, exc)
            answer = NOT_TAKEN
        except NotReplicated as exc:
            # In the stream, so it will be done: asking the person to retry would do it twice.
            log.warning("slack: a request (%s) is not yet on a Redis replica: %s", key, exc)
            return
        except RedisError as exc:
            log.error("slack: a request (%s) was not taken: Redis: %s", key, exc)
            answer = unanswered(exc)
        except Exception:
            log.exception("slack: a request (%s) was not taken", key)
            answer = NOT_TAKEN
        await tell(slack_of(context), body, answer)


async def _here(function: Lazy, body: dict[str, Any], context: AsyncBoltContext) -> None:
    """Slack has its ack: a person who clicked or typed is told when it cannot be done."""
    try:
        await function(body=body, context=context)
    except RedisError as exc:
        log.error("slack: %s: Redis: %s", function.__name__, exc)
        if body.get("type") != "event_callback":
            await tell(slack_of(context), body, unanswered(exc))
    except Exception:
        log.exception("slack: %s failed after the ack", function.__name__)
