"""The Slack gateway: every Web API call goes through here, its answer classified once: a 429
holds the method for `Retry-After` (`bot.pacing`); a refused connection is safe to repeat; a
timeout, a dropped connection, a 5xx or `internal_error` is uncertain (a post must be looked up
before it is sent again); anything else is permanent. Retries are the callers'."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from aiohttp import ClientConnectorError, ClientError, ClientSession, ClientTimeout
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.config import Settings
from bot.pacing import Pacing
from bot.storage.slack_cache import Message, PermalinkCache, UserNames
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
# The channel check logs under its own name, which operators filter on.
members_log = logging.getLogger("bot.outbound.membership")

# Answered with HTTP 200 and ok=false, yet not the request's fault: worth another try.
_TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
MAX_RETRY_AFTER_S = 300.0
# 15 messages a page: the most a distributed app gets per history call since 2025.
LOOKUP_PAGE = 15
LOOKUP_MAX_PAGES = 20
LOOKUP_RATE_LIMITED_TRIES = 30  # 429s in a row a lookup waits out (half an hour, distributed)
# App-wide slots: the history reads (Tier 3, about 50 a minute), the Home's publishes (Tier 4).
# Their calls go further apart when Slack's 429s say so (`Pacing.refused`).
_SLOTS_MS = {"conversations.history": 1200, "conversations.replies": 1200, "views.publish": 600}
# Slack has no link for the message and never will: kept as "none". Any other refusal (the app
# not in the channel, a token or scope problem) may be mended, so it is asked again later.
LINK_GONE = frozenset({"message_not_found", "channel_not_found"})
# How an operator lets the app post in a channel it cannot.
CHANGE = "or change SLACK_ROUTES / SLACK_CHANNEL"
FIX = {"is_archived": f"unarchive it {CHANGE}"}  # else: not in it, or cannot see it
INVITE = f"invite it there (/invite @queuepilot) {CHANGE}"
NO_SCOPE = ("missing_scope", "not_allowed_token_type")


@dataclass(eq=False)
class SlackError(Exception):
    """A Slack call that failed with Slack's `error` code. `retryable`: the same call may work
    later; `uncertain`: Slack may have acted anyway; `retry_after`: seconds Slack asked to wait."""

    method: str
    error: str
    _: KW_ONLY
    retryable: bool
    uncertain: bool = False
    retry_after: float | None = None
    details: tuple[str, ...] = ()  # for invalid_blocks, which block and why

    def __str__(self) -> str:
        return f"{self.method}: {self.error}"


def retry_after_s(headers: Mapping[str, Any]) -> float:
    """Slack's Retry-After in seconds (1 when absent or unreadable, at most 5 minutes); aiohttp's
    headers, which slack_sdk hands on, are read without regard to case."""
    try:
        return min(max(float(headers["Retry-After"]), 0.0), MAX_RETRY_AFTER_S)
    except (KeyError, TypeError, ValueError):
        return 1.0


def build_client(config: Settings, *, max_retries: int = 3) -> AsyncWebClient:
    """An AsyncWebClient to Slack (the gateway's, and Bolt's own). It retries only a refused
    connection, which proves Slack never saw the call."""
    token = config.slack_bot_token
    return AsyncWebClient(
        token=token.get_secret_value() if token is not None else "",
        base_url=config.slack_api_url,
        timeout=config.slack_timeout_seconds,  # type: ignore[arg-type]  # aiohttp takes any number
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(
                max_retry_count=max_retries, error_types=[ClientConnectorError]
            )
        ],
    )


@dataclass(eq=False)
class SlackGateway:
    client: AsyncWebClient
    _: KW_ONLY
    telemetry: Telemetry
    pacing: Pacing
    user_names: UserNames
    permalinks: PermalinkCache
    link_timeout_s: float = 3.0

    def open(self) -> None:
        """One pool of connections until `aclose` (else slack_sdk handshakes before every call)."""
        self.client.session = ClientSession(timeout=ClientTimeout(total=self.client.timeout))

    async def aclose(self) -> None:
        session = self.client.session
        if session is not None and not session.closed:
            await session.close()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One call, through slack_sdk's method of that name: only about half the Web API reads a
        JSON body, and slack_sdk encodes each as Slack takes it. Raises `SlackError`."""
        send = getattr(self.client, method.replace(".", "_"))
        arguments = {name: value for name, value in params.items() if value is not None}
        response = await self._classified(method, send(**arguments))
        return response.data if isinstance(response.data, dict) else {}

    async def _classified(
        self, method: str, request: Awaitable[AsyncSlackResponse], *, upload: bool = False
    ) -> AsyncSlackResponse:
        """The response, or a classified `SlackError`. With `upload`, slack_sdk's client error is
        the file host refusing the bytes (a 5xx from files.slack.com): uncertain, like any 5xx."""
        calls = self.telemetry.slack_calls
        try:
            response = await request
        except SlackApiError as exc:
            # slack_sdk answers a 200 whose body is not JSON with the raw aiohttp response.
            answer = exc.response
            status = int(getattr(answer, "status_code", None) or getattr(answer, "status", 0))
            data = getattr(answer, "data", None)
            body: Mapping[str, Any] = data if isinstance(data, dict) else {}
            error = str(body.get("error") or f"http_{status}")
            calls.labels(method, error).inc()
            if status == 429 or error == "ratelimited":
                wait = retry_after_s(getattr(answer, "headers", None) or {})
                self.telemetry.slack_rate_limited.labels(method).inc()
                log.warning("Slack rate-limited %s; holding it for %.1f s", method, wait)
                self.pacing.refused(method, wait)
                raise SlackError(method, "ratelimited", retryable=True, retry_after=wait) from None
            # A body without Slack's `ok` (a proxy's error page) says nothing of what Slack did.
            uncertain = status >= 500 or error in _TRANSIENT_ERRORS or "ok" not in body
            metadata = body.get("response_metadata")
            messages = metadata.get("messages") if isinstance(metadata, dict) else None
            details = (
                tuple(str(m)[:500] for m in messages[:20]) if isinstance(messages, list) else ()
            )
            raise SlackError(
                method, error, retryable=uncertain, uncertain=uncertain, details=details
            ) from None
        except ClientConnectorError as exc:
            calls.labels(method, "connection_refused").inc()
            raise SlackError(method, type(exc).__name__, retryable=True) from None
        except SlackClientError as exc:  # slack_sdk would not send it: it never will
            calls.labels(method, "client_error").inc()
            raise SlackError(
                method, type(exc).__name__, retryable=upload, uncertain=upload
            ) from None
        except (ClientError, TimeoutError) as exc:
            calls.labels(method, "connection_error").inc()
            raise SlackError(method, type(exc).__name__, retryable=True, uncertain=True) from None
        except (AttributeError, ValueError) as exc:
            # slack_sdk reading an answer Slack never gives (a 200 of plain text): the call went
            # out, so what Slack did is unknown.
            calls.labels(method, "unreadable").inc()
            log.warning("Slack %s: an answer slack_sdk could not read (%s)", method, exc)
            raise SlackError(method, "unreadable_answer", retryable=True, uncertain=True) from None
        calls.labels(method, "ok").inc()
        return response

    async def upload_file(
        self, channel: str, thread_ts: str, *, data: bytes, filename: str, title: str, alt: str
    ) -> str:
        """files.upload v2 into a thread (slack_sdk's three steps); returns the file's ID."""
        upload = self.client.files_upload_v2(
            file=data,
            filename=filename,
            title=title,
            alt_txt=alt,
            channel=channel,
            thread_ts=thread_ts,
            request_file_info=False,
        )
        response = await self._classified("files.completeUploadExternal", upload, upload=True)
        files = response.get("files") or [{}]
        return str(files[0].get("id", "")) if isinstance(files[0], dict) else ""

    async def find(
        self,
        method: str,
        channel: str,
        match: Callable[[dict[str, Any]], bool],
        *,
        oldest: float,
        latest: float,
        ts: str | None = None,
    ) -> dict[str, Any] | None:
        """The first message `match` accepts in a channel (`conversations.history`) or a thread
        (`conversations.replies`, `ts`) between `oldest` and `latest`, at most LOOKUP_MAX_PAGES
        pages (a distributed app gets about one call a minute)."""
        cursor: str | None = None
        for _ in range(LOOKUP_MAX_PAGES):
            messages, cursor = await self.page(
                method, channel, oldest=oldest, latest=latest, ts=ts, cursor=cursor
            )
            for message in messages:
                if match(message):
                    return message
            if not cursor:
                return None
        log.warning("%s of %s: read %d pages, the most it reads", method, channel, LOOKUP_MAX_PAGES)
        return None

    async def page(
        self,
        method: str,
        channel: str,
        *,
        oldest: float,
        latest: float,
        cursor: str | None,
        ts: str | None = None,
        limit: int = LOOKUP_PAGE,
        interval_ms: int | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of messages with their metadata, in its turn, and the next cursor (or None)."""
        page = await self.in_turn(
            method,
            LOOKUP_RATE_LIMITED_TRIES,
            interval_ms=interval_ms,
            channel=channel,
            ts=ts,
            oldest=f"{oldest:.6f}",
            latest=f"{latest:.6f}",
            inclusive=True,
            cursor=cursor,
            limit=limit,
            include_all_metadata=True,
        )
        messages = [m for m in page.get("messages") or () if isinstance(m, dict)]
        return messages, (page.get("response_metadata") or {}).get("next_cursor") or None

    async def post_ephemeral(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] = (),
        thread_ts: str | None = None,
    ) -> None:
        """Answer one person; a short hold is waited out, then it gives up (they clicked
        seconds ago, and `response_url` is the fallback)."""
        await self.in_turn(
            "chat.postEphemeral",
            2,
            within_s=5,
            channel=channel,
            user=user,
            text=text,
            blocks=list(blocks) or None,
            thread_ts=thread_ts,
        )

    async def in_turn(
        self,
        method: str,
        tries: int,
        *,
        within_s: float | None = None,
        interval_ms: int | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """A call in its `turn` (so waiters do not all call the instant a hold ends), a 429 waited
        out up to `tries` times; `interval_ms` (else the method's slot) is the least spacing."""
        attempt = 1
        spacing_ms = _SLOTS_MS.get(method, 0) if interval_ms is None else interval_ms
        while True:
            await self.turn(method, spacing_ms, within_s=within_s)
            sent = self.pacing.now()
            try:
                answer = await self.call(method, **params)
                self.pacing.answered(method, sent)
                return answer
            except SlackError as exc:
                if exc.retry_after is None or attempt >= tries:
                    raise
            attempt += 1

    async def turn(self, method: str, interval_ms: int, *, within_s: float | None) -> None:
        """Wait out any hold of `method`, then take its app-wide slot; past `within_s`, raise
        what a 429 would (a caller with other work does that instead)."""
        away_s = await self.pacing.wait_for_slot(method, interval_ms, within_s=within_s)
        if away_s:
            raise SlackError(method, "ratelimited", retryable=True, retry_after=away_s)

    async def display_name(self, user: str) -> str | None:
        """The user's display name from `users.info`, cached for a day; None if unknown."""
        cached = await self.user_names.get(user)
        if cached is not None:
            return cached or None
        try:
            found = (await self.call("users.info", user=user)).get("user") or {}
        except SlackError as exc:
            log.info("users.info %s failed: %s", user, exc.error)
            return None
        profile = found.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or found.get("name")
        await self.user_names.put(user, str(name or ""))
        return str(name) if name else None

    async def usergroup_members(self, group: str) -> list[str]:
        """User IDs of a user group (`usergroups.users.list`); raises `SlackError`."""
        response = await self.call("usergroups.users.list", usergroup=group)
        return [str(user) for user in response.get("users") or []]

    async def link(self, channel: str, ts: str) -> str | None:
        """The message's link; "" when Slack has none; None while it is not known."""
        return (await self.links([(channel, ts)])).get((channel, ts))

    async def links(
        self, messages: Sequence[Message], *, ask_at_most: int | None = None
    ) -> dict[Message, str]:
        """The links known of `messages` ("" where Slack has none; left out: not known yet), asking
        for `ask_at_most` not kept. A link is a courtesy: this never raises nor waits long."""
        wanted = list(dict.fromkeys(messages))
        try:
            known = await self.permalinks.kept(wanted)
        except RedisError as exc:
            log.info("permalinks: Redis unavailable, asking Slack: %s", exc)
            known = {}
        asked = [m for m in wanted if m not in known][:ask_at_most]
        found = await asyncio.gather(*(self._permalink(channel, ts) for channel, ts in asked))
        known.update((m, url) for m, url in zip(asked, found, strict=True) if url is not None)
        return known

    async def _permalink(self, channel: str, ts: str) -> str | None:
        try:
            # A hold is never waited out: the link is asked again later.
            found = await asyncio.wait_for(
                self.in_turn("chat.getPermalink", 1, within_s=0, channel=channel, message_ts=ts),
                self.link_timeout_s,
            )
            url = str(found.get("permalink") or "")
        except SlackError as exc:
            if exc.retryable:
                log.info("permalink of %s %s: not known yet: %s", channel, ts, exc.error)
                return None
            log.info("permalink of %s %s: Slack has none: %s", channel, ts, exc.error)
            if exc.error not in LINK_GONE:
                return ""  # none now (a scope, a membership, a token): not kept, asked again
            url = ""
        except TimeoutError:
            log.info("permalink of %s %s: no answer within %s s", channel, ts, self.link_timeout_s)
            return None
        try:
            await self.permalinks.keep(channel, ts, url)
        except RedisError as exc:
            log.info("permalink of %s %s: not kept, Redis unavailable: %s", channel, ts, exc)
        return url


async def check_channels(gateway: SlackGateway, uses: Mapping[str, str]) -> dict[str, str]:
    """At start-up, logs (and answers) each channel of `uses` (channel -> what posts there) the
    app cannot post to, and why; never fatal: the other channels work."""
    problems: dict[str, str] = {}
    for channel, use in uses.items():
        try:
            info = (await gateway.call("conversations.info", channel=channel)).get("channel")
        except SlackError as exc:
            if exc.error in NO_SCOPE:
                members_log.warning(
                    "cannot check that queuepilot is in its channels (%s): add the "
                    "channels:read and groups:read scopes to the app",
                    exc.error,
                )
                return problems
            if exc.error != "channel_not_found":  # Slack down, rate limited: not a finding
                members_log.warning("channel %s (%s): not checked: %s", channel, use, exc.error)
                continue
            problem: str | None = "channel_not_found"
        else:
            problem = why_cannot_post(info)
        if problem is None:
            continue
        problems[channel] = problem
        members_log.error(
            "channel %s (%s): queuepilot cannot post there (%s): %s; its incidents are "
            "dropped until then",
            channel,
            use,
            problem,
            FIX.get(problem, INVITE),
        )
    return problems


def why_cannot_post(info: object) -> str | None:
    """Why the app cannot post in the channel `conversations.info` describes, if it cannot."""
    if not isinstance(info, dict):
        return None
    if info.get("is_archived"):
        return "is_archived"
    if info.get("is_member") is False:
        return "not_in_channel"
    return None
