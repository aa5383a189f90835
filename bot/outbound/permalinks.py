"""Links to messages, for every text that points back at one (a silence's comment, the early
warning, the App Home, the alert's issue, the storm digest's lines).

A permalink never changes, so each is asked of Slack once and kept for every replica. A link is a
courtesy beside a text that reads without it: asking never raises and never waits longer than
`timeout_s`; failures are logged here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass

from redis.exceptions import RedisError

from bot.outbound.gateway import SlackError, SlackGateway
from bot.storage.slack_cache import Message, PermalinkCache

log = logging.getLogger(__name__)

# Slack has no link for the message and never will: kept as "none". Any other refusal (the app
# not in the channel, a token or scope problem) may be mended, so it is asked again later.
GONE = frozenset({"message_not_found", "channel_not_found"})


@dataclass(eq=False)
class Permalinks:
    cache: PermalinkCache
    slack: SlackGateway
    _: KW_ONLY
    timeout_s: float = 3.0

    async def link(self, channel: str, ts: str) -> str | None:
        """The message's link; "" when Slack has none (the message deleted, a channel the app
        left); None while it is not known (Slack slow or failing, a 429 held, Redis away)."""
        return (await self.links([(channel, ts)])).get((channel, ts))

    async def links(
        self, messages: Sequence[Message], *, ask_at_most: int | None = None
    ) -> dict[Message, str]:
        """The links known of `messages` ("" where Slack has none), asking Slack for at most
        `ask_at_most` not kept; a message left out is not known yet."""
        wanted = list(dict.fromkeys(messages))
        known = await self._kept(wanted)
        asked = [m for m in wanted if m not in known][:ask_at_most]
        found = await asyncio.gather(*(self._ask(channel, ts) for channel, ts in asked))
        known.update((m, url) for m, url in zip(asked, found, strict=True) if url is not None)
        return known

    async def _kept(self, messages: list[Message]) -> dict[Message, str]:
        try:
            return await self.cache.kept(messages)
        except RedisError as exc:
            log.info("permalinks: Redis unavailable, asking Slack: %s", exc)
            return {}

    async def _ask(self, channel: str, ts: str) -> str | None:
        try:
            url = await asyncio.wait_for(self.slack.permalink(channel, ts), self.timeout_s)
        except SlackError as exc:
            if exc.retryable:
                log.info("permalink of %s %s: not known yet: %s", channel, ts, exc.error)
                return None
            log.info("permalink of %s %s: Slack has none: %s", channel, ts, exc.error)
            if exc.error not in GONE:
                return ""  # none now (a scope, a membership, a token): not kept, asked again
            url = ""
        except TimeoutError:
            log.info("permalink of %s %s: no answer within %s s", channel, ts, self.timeout_s)
            return None
        try:
            await self.cache.keep(channel, ts, url)
        except RedisError as exc:
            log.info("permalink of %s %s: not kept, Redis unavailable: %s", channel, ts, exc)
        return url
