"""Incidents in Redis. A change is a `Commit`, applied at once by `lua/commit.lua`, fenced by the
leader's token and by the versions it was computed from; every key expires `retention_s` after
the incident's last change."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.domain.alerting.alert_issue import IssueLink, tells_issue
from bot.domain.incident.incidents import (
    Event,
    GroupState,
    Incident,
    chart_drawn,
    severity_rank,
    shown_now,
)
from bot.domain.message import Rendered
from bot.storage.due_set import DueSet
from bot.storage.keys import Keys, Records, dumped, loaded
from bot.storage.leases import Fence, FencedScript
from bot.storage.state_marker import FoundRoot

# Thread replies wait in an outbox per incident, posted by band (most urgent first), then age.
BAND_ROOT, BAND_ACTION, BAND_EVENT, BAND_STATUS = 0, 1, 2, 3
# A thread that cannot be posted for long (a Slack outage) keeps at most this many replies.
MAX_OUTBOX = 50
TEST_RETENTION_S = 3600
LOADED_FIELDS = ["v", "state", "thread", "rendered"]  # load_group.lua reads the same
ATTEMPTS = 20  # refused this many times in a row, a change gives up (a click: "try again")


@dataclass(frozen=True)
class ThreadRef:
    channel: str
    ts: str


# Reply kinds the sender treats specially: a quiet status edits the previous status reply; a
# chart and a postmortem are files shared into the thread.
STATUS, RESTATUS, CHART, POSTMORTEM = "status", "restatus", "chart", "postmortem"
STATUS_KINDS = (STATUS, RESTATUS)
STATUS_TS = "status_ts"  # the latest status reply's, which a quiet status edits
# The latest summary's ts, and the kind of a reply that edits it after a change past the resolve.
SUMMARY_TS, SUMMARY_EDIT = "summary_ts", "summary_edit"
THREAD_STATUS = (*STATUS_KINDS, CHART)  # a status and its picture


@dataclass(frozen=True)
class Reply:
    kind: str  # event, action, summary, or one of the kinds above
    band: int
    rendered: Rendered
    # Kinds of waiting replies this one makes pointless (a newer status replaces a waiting one).
    replaces: tuple[str, ...] = ()
    extra: dict[str, Any] | None = None  # what the sender needs beyond the message
    instead: Rendered | None = None  # what it says when it replaced a waiting reply
    # The incident field the posted reply's ts goes in, for a later reply naming it in `edits`.
    ts_as: str = ""
    edits: str = ""


def chart_reply() -> Reply:
    """The trend as a picture, drawn by the sender when it posts."""
    return Reply(CHART, BAND_STATUS, Rendered("", []), replaces=(CHART,))


def postmortem_reply(markdown: str, *, title: str) -> Reply:
    extra = {"markdown": markdown, "title": title}
    return Reply(POSTMORTEM, BAND_ACTION, Rendered(title, []), replaces=(POSTMORTEM,), extra=extra)


def summary_replies(
    band: int, summaries: tuple[Rendered, Rendered | None], incident: Incident
) -> tuple[Reply, ...]:
    """A resolved incident's summary (a status still waiting gives way), then its chart unless
    the last picture drew it."""
    summary, with_chart = summaries
    reply = Reply(
        "summary", band, summary, replaces=STATUS_KINDS, instead=with_chart, ts_as=SUMMARY_TS
    )
    return (reply,) if chart_drawn(incident, incident.shown.pictured_at) else (reply, chart_reply())


@dataclass(frozen=True)
class Loaded:
    incident: Incident | None
    version: int = 0
    thread: ThreadRef | None = None
    rendered: str | None = None  # digest of the root as Slack last showed it


@dataclass(frozen=True)
class DueRead:
    """An incident read for its status, parsed when asked, so an unreadable one fails alone."""

    incident_id: str
    due_at: float | None
    raw: list[Any] | Exception

    def loaded(self) -> Loaded:
        return loaded_from(_or_raise(self.raw))


@dataclass(frozen=True)
class Commit:
    """Everything one change writes, and the versions it was computed from (0: new)."""

    incident: Incident | None = None
    version: int = 0
    group: GroupState | None = None
    group_hash: str = ""
    group_version: int = 0
    events: tuple[Event, ...] = ()
    replies: tuple[Reply, ...] = ()
    root: bool = True  # Slack must show the new state on the root message
    status_due: float | None = None
    stop_status: bool = False
    acks: tuple[str, ...] = ()  # the stream entries this change applies
    thread: ThreadRef | None = None  # known location of the root, to keep its index alive
    opens: bool = False  # a new incident, taking the ID sequence's next number
    # A new incident going on in its root found after a loss (`thread`): edited, not posted.
    adopts: bool = False


T = TypeVar("T")
SILENCE_ENDING_TTL_S = 86_400  # how long failed tries to end a silence at a resolve are counted


def _ends_silence(change: Commit) -> bool:
    """Whether `change` leaves a silence made from Slack to end now: it resolved the incident,
    or recorded a silence on one resolved meanwhile, and nobody chose to keep that silence."""
    incident = change.incident
    if incident is None or incident.is_open or incident.silence is None:
        return False
    silenced = any(event.kind == "silenced" for event in change.events)
    return incident.silence.ends_at_resolve and (change.stop_status or silenced)


# What a change decides on an incident as read, at a time, with its timeline when asked for: the
# commit (None: nothing to write) and what to answer.
Change = Callable[[Incident, datetime, list[Event]], tuple[Commit | None, T]]


@dataclass(frozen=True)
class Fresh(Generic[T]):
    """How a change on fresh state ended; `busy`: the incident kept changing, nothing went in."""

    found: bool
    answer: T | None = None
    committed: Commit | None = None
    busy: bool = False


# The group, its version, its incident, the ID a new incident would take, its root found in Slack.
GroupLoad = tuple[GroupState, int, Loaded, str, FoundRoot | None]


class IncidentStore(Records):
    def __init__(
        self,
        redis: Redis,
        prefix: str,
        *,
        retention_s: int = 30 * 86_400,
        issues: bool = False,
        fence: Fence | None = None,
    ) -> None:
        """`issues`: changes worth telling the alert's GitHub issue mark it in `issue_due`."""
        super().__init__(redis, Keys(prefix))
        self.issues = issues
        self.retention_s = retention_s
        self.status_due = DueSet(redis, self.keys.status_due)
        self.silence_watch = DueSet(
            redis,
            self.keys.silence_watch,
            keep_s=retention_s,
            data_key=self.keys.silence_ending,
            data_ttl_s=SILENCE_ENDING_TTL_S,
        )
        self.issue_due = DueSet(redis, self.keys.issue_due)
        self._commit = FencedScript(redis, "commit", fence)

    async def load(self, incident_id: str) -> Loaded:
        return loaded_from(await self._redis.hmget(self.keys.incident(incident_id), LOADED_FIELDS))

    async def get(self, incident_id: str) -> Incident | None:
        return (await self.load(incident_id)).incident

    async def load_group(self, group_hash: str) -> GroupLoad:
        """See `GroupLoad`. IDs are short numbers from one sequence: people type them."""
        k = self.keys
        keys = [k.group(group_hash), k.incident_seq, k.found_roots]
        raw = await self._run("load_group", keys, [k.incident(""), group_hash])
        version, state = raw[0], raw[1]
        group = GroupState.model_validate_json(state) if state else GroupState()
        found = loaded(FoundRoot, raw[7]) if len(raw) > 7 else None
        return group, int(version or 0), loaded_from(raw[2:6]), str(raw[6]), found

    async def get_many(self, incident_ids: Sequence[str]) -> list[Incident]:
        return [loaded.incident for loaded in await self.load_many(incident_ids) if loaded.incident]

    async def load_many(self, incident_ids: Sequence[str]) -> list[Loaded]:
        """Several incidents in one round trip, leaving out those gone or unreadable."""
        found = []
        for read in await self.read_due(incident_ids):
            with suppress(ValueError, RedisError):  # pydantic's ValidationError is a ValueError
                if (loaded := read.loaded()).incident is not None:
                    found.append(loaded)
        return found

    async def open_ids(self) -> list[str]:
        return cast(list[str], await self._redis.zrevrange(self.keys.open, 0, -1))

    async def recent_ids(self, limit: int = 20) -> list[str]:
        """By their last change, newest first."""
        return cast(list[str], await self._redis.zrevrange(self.keys.incidents, 0, limit - 1))

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return cast(str | None, await self._redis.get(self.keys.message(channel, ts)))

    async def events(self, incident_id: str) -> list[Event]:
        raw = await self._redis.lrange(self.keys.timeline(incident_id), 0, -1)  # type: ignore[misc]
        return [Event.model_validate_json(item) for item in raw]

    async def read_due(self, incident_ids: Sequence[str]) -> list[DueRead]:
        """Many incidents and their due times in one round trip, each failing alone."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for incident_id in incident_ids:
                pipe.hmget(self.keys.incident(incident_id), LOADED_FIELDS)
                pipe.zscore(self.keys.status_due, incident_id)
            raws = await pipe.execute(raise_on_error=False)
        return [
            DueRead(incident_id, _or_raise(raws[2 * i + 1]), raws[2 * i])
            for i, incident_id in enumerate(incident_ids)
        ]

    async def commit(self, change: Commit, *, now: float | None = None) -> bool:
        """Apply `change` atomically; False when the incident or group changed since read."""
        now = time.time() if now is None else now
        keys, args = self._commit_call(change, now)
        applied = int(await self._commit(keys=keys, args=args)) >= 0
        if applied:
            await self._end_silences([change], now)
        return applied

    async def commit_fresh(
        self,
        incident_id: str,
        change: Change[T],
        *,
        clock: Callable[[], datetime],
        with_timeline: bool = False,
    ) -> Fresh[T]:
        """Commit what `change` decides on the incident as it is now, again while refused."""
        answer = None
        for _ in range(ATTEMPTS):
            loaded = await self.load(incident_id)
            if loaded.incident is None:
                return Fresh(found=False)
            timeline = await self.events(incident_id) if with_timeline else []
            now = clock()
            commit, answer = change(loaded.incident, now, timeline)
            if commit is None:
                return Fresh(found=True, answer=answer)
            commit = replace(commit, version=loaded.version, thread=loaded.thread)
            if await self.commit(commit, now=now.timestamp()):
                return Fresh(found=True, answer=answer, committed=commit)
        return Fresh(found=True, answer=answer, busy=True)

    async def commit_many(
        self, changes: Sequence[Commit], *, now: float
    ) -> list[bool | RedisError]:
        """Apply each change on its own, in one round trip: whether it applied, or its error."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for change in changes:
                keys, args = self._commit_call(change, now)
                await self._commit(keys=keys, args=args, client=pipe)
            versions = await pipe.execute(raise_on_error=False)
        applied = [v if isinstance(v, RedisError) else int(v) >= 0 for v in versions]
        done = [c for c, ok in zip(changes, applied, strict=True) if ok is True]
        await self._end_silences(done, now)
        return applied

    async def _end_silences(self, applied: Sequence[Commit], now: float) -> None:
        """Make the silence watch due at once for the silences `applied` leaves to end (a due
        time not written leaves it to the watch's next look)."""
        ending = [c.incident.id for c in applied if c.incident and _ends_silence(c)]
        with suppress(RedisError):
            for incident_id in ending:
                await self.silence_watch.schedule(incident_id, now)

    def _commit_call(self, change: Commit, now: float) -> tuple[list[str], list[bytes]]:
        # In commit.lua's order.
        k, incident, thread = self.keys, change.incident, change.thread
        iid, channel = (incident.id, incident.channel) if incident else ("", "")
        group = change.group_hash or (incident.group_hash if incident else "")
        message = k.message(thread.channel, thread.ts) if thread else k.incident(iid)
        keys = [k.incident(iid), k.group(group), k.timeline(iid), k.incidents, k.open]
        keys += [k.status_due, k.outbox(iid), k.outbox_items(iid), k.posts(channel)]
        keys += [k.edits(channel), k.edit_after(channel), k.send_channels, k.send_seq, k.stream]
        keys += [k.posts_bell(channel), k.edits_bell(channel), message, k.incident_seq, k.issue_due]
        keys += [k.found_roots]
        return keys, [orjson.dumps(self._spec(change, now))]

    def _spec(self, change: Commit, now: float) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "now_ms": int(now * 1000),
            "index_ttl_ms": self.retention_s * 1000,
            "max_outbox": MAX_OUTBOX,
            "stop_status": change.stop_status,
            "root": bool(change.incident and change.root),
        }
        if change.opens:
            spec.update(opens=True, seq_ttl_s=self.retention_s, group_hash=change.group_hash)
        if change.adopts and change.thread is not None:
            spec.update(adopts=True, thread=dumped(change.thread), group_hash=change.group_hash)
        ttl_s = self.retention_s
        if (incident := change.incident) is not None:
            if any(r.kind not in THREAD_STATUS and not r.edits for r in change.replies):
                # Posted below the latest status reply, which is then edited no more.
                incident = shown_now(incident, replied_since=True)
            # An edit adds no reply below: a reply edited while nothing followed it stays so.
            if posted := sum(1 for r in change.replies if not r.edits):
                incident = incident.model_copy(update={"replies": incident.replies + posted})
            if incident.is_test:
                ttl_s = min(TEST_RETENTION_S, ttl_s)
            spec.update(
                id=incident.id,
                uid=incident.uid,
                rank=severity_rank(incident.priority),
                channel=incident.channel,
                incident_v=change.version,
                state=state_json(incident),
                ttl_ms=ttl_s * 1000,
                index=not incident.is_test,
                open=incident.is_open and not incident.is_test,
                opened=incident.opened_at.timestamp(),
                updated=incident.updated_at.timestamp(),
                horizon=incident.updated_at.timestamp() - self.retention_s,
                events=[event.model_dump_json() for event in change.events],
                issue_due=self.issues and not incident.is_test and tells_issue(change.events),
                replies=[_reply_spec(reply) for reply in change.replies],
            )
        if change.group is not None:
            spec.update(
                group=change.group.model_dump_json(),
                group_incident=change.group.incident_id or "",
                group_v=change.group_version,
                group_ttl_ms=ttl_s * 1000,
            )
        if change.status_due is not None:
            spec["due"] = change.status_due
        if change.acks:
            spec["acks"] = list(change.acks)
        return spec


class IssueLinks(Records):
    """Each incident's GitHub issue and what it was told, saved after each call GitHub answered."""

    def __init__(self, redis: Redis, keys: Keys, *, retention_s: int) -> None:
        super().__init__(redis, keys)
        self._retention_s = retention_s

    async def get(self, incident_id: str) -> IssueLink | None:
        raw = await self._redis.get(self.keys.issue_link(incident_id))
        return IssueLink.model_validate_json(raw) if raw else None

    async def save(self, incident_id: str, link: IssueLink) -> None:
        value = link.model_dump_json()
        await self._redis.set(self.keys.issue_link(incident_id), value, ex=self._retention_s)


def reply_ts(number: int) -> str:
    """The incident field the thread's reply `number` (`Incident.replies`) has its ts in."""
    return f"reply_ts:{number}"


def _reply_spec(reply: Reply) -> dict[str, Any]:
    body: dict[str, Any] = {"text": reply.rendered.text, "blocks": reply.rendered.blocks}
    optional = {"extra": reply.extra, "edits": reply.edits or None, "ts_as": reply.ts_as or None}
    body.update((name, value) for name, value in optional.items() if value is not None)
    spec = {"kind": reply.kind, "band": reply.band, "payload": orjson.dumps(body).decode()}
    spec["replaces"] = list(reply.replaces) or None  # cjson turns [] into {}
    if reply.instead is not None:
        instead = {**body, "text": reply.instead.text, "blocks": reply.instead.blocks}
        spec["payload_if_replaced"] = orjson.dumps(instead).decode()
    return spec


def _or_raise(value: Any) -> Any:
    if isinstance(value, Exception):
        raise value
    return value


def state_json(incident: Incident) -> str:
    """Unset numbers left out (read back as None), numbers per runner type under short keys
    (`bot.domain.alerting.alerts.stored_short`)."""
    return incident.model_dump_json(exclude_none=True, exclude_defaults=True, by_alias=True)


def loaded_from(raw: list[Any]) -> Loaded:
    version, state, thread, rendered = raw[:4]
    if not state:
        return Loaded(None)
    incident = Incident.model_validate_json(state)
    return Loaded(incident, int(version or 0), loaded(ThreadRef, thread), rendered or None)
