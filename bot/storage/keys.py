"""Every Redis key and Lua script queuepilot uses. State lives under `<prefix>:v2:`, so a key of
another layout is never read as this one's; the streams and their dead letters are not versioned,
so entries accepted before an upgrade are applied after it (they are also the only keys without a
TTL). Each script is `lua/<name>.lua` after the shared prelude."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

SCHEMA = "v2"
# A reply's score is its band * BAND + its sequence number, a new root's its severity rank * RANK
# + its sequence number, so every root scores up to ROOTS_END and goes first. Handed to the
# prelude, so Lua and Python agree on them.
BAND = 1 << 40
RANK = 1 << 34
ROOTS_END = BAND - 1


def _kind(template: str) -> Callable[..., str]:
    wanted = template.count("{}")

    def key(self: Keys, *ids: str | int) -> str:
        # A key built from too few or too many IDs is another key: refused, never stored.
        if len(ids) != wanted:
            raise TypeError(f"{template!r} takes {wanted} ID(s), not {len(ids)}")
        return f"{self.prefix}:{SCHEMA}:{template.format(*ids)}"

    return key


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.stream = f"{prefix}:notifications"
        self.dead_letters = f"{prefix}:notifications:dead"
        self.requests = f"{prefix}:requests"  # Slack requests, until the leader performs them
        self.request_dead_letters = f"{prefix}:requests:dead"
        v2 = f"{prefix}:{SCHEMA}"
        self.incidents = f"{v2}:incidents"
        self.open = f"{v2}:open"
        self.status_due = f"{v2}:status-due"
        self.incident_seq = f"{v2}:incident-seq"
        self.send_channels = f"{v2}:send-channels"
        self.send_seq = f"{v2}:send-seq"
        self.undeliverable = f"{v2}:send:undeliverable"
        self.warnings = f"{v2}:warnings"
        # Set while the workspace refuses Slack's chart block: charts are uploaded instead.
        self.chart_blocks_refused = f"{v2}:slack:chart-blocks-refused"
        self.silence_watch = f"{v2}:silence-watch"
        self.scale_reverts = f"{v2}:scale-reverts"  # record id -> when to look again
        self.put_back_follows = f"{v2}:put-back-follows"  # put-back reply -> when to read again
        self.issue_due = f"{v2}:issue-due"  # incidents whose GitHub issue has news
        self.fleet_reading = f"{v2}:fleet:reading"
        self.fleet_history = f"{v2}:fleet:history"
        self.home_viewers = f"{v2}:home:viewers"  # user -> when they last opened it
        self.home_shown = f"{v2}:home:shown"  # user -> what their Home shows
        self.leader = f"{v2}:lease:leader"
        self.leader_tokens = f"{v2}:leader-tokens"
        self.state_marker = f"{v2}:state"  # `bot.storage.state_marker`
        # How far the leader's read of Slack's history is, for `/readyz` on every replica.
        self.state_checking = f"{v2}:state:checking"
        self.found_roots = f"{v2}:found-roots"  # group -> its root found in Slack after a loss
        # Runner pods' OOM kills for the weekly report: "<pod>/<uid>" -> the kill, and by time.
        self.oom_kills = f"{v2}:pods:oom-kills"
        self.oom_kills_at = f"{v2}:pods:oom-kills:at"
        # GitHub's jobs as its workflow_job deliveries tell them: those still to finish, the
        # finished, each indexed by the time of its state; the kinds of delivery heard, by when.
        self.github_jobs = f"{v2}:github:jobs"
        self.github_jobs_at = f"{v2}:github:jobs:at"
        self.github_jobs_done = f"{v2}:github:jobs:done"
        self.github_jobs_done_at = f"{v2}:github:jobs:done:at"
        self.github_events = f"{v2}:github:events"
        # The HUD's queued jobs followed across readings: those listed at the last (and when),
        # those that left the list since, indexed by the reading that found them gone.
        self.listed_jobs = f"{v2}:hud:listed"
        self.listed_jobs_at = f"{v2}:hud:listed:at"
        self.left_jobs = f"{v2}:hud:left"
        self.left_jobs_at = f"{v2}:hud:left:at"

    incident = _kind("incident:{}")
    group = _kind("group:{}")
    timeline = _kind("timeline:{}")
    message = _kind("message:{}:{}")  # channel, ts -> incident
    outbox = _kind("outbox:{}")
    outbox_items = _kind("outbox:{}:items")
    # A channel's, for its sender.
    posts = _kind("send:{}:posts")
    edits = _kind("send:{}:edits")
    edit_after = _kind("send:{}:edit-after")
    posts_bell = _kind("send:{}:bell:posts")
    edits_bell = _kind("send:{}:bell:edits")
    in_flight = _kind("send:{}:in-flight")
    storm = _kind("send:{}:storm")
    storm_members = _kind("send:{}:storm:members")
    storm_placed = _kind("send:{}:storm:placed")
    storm_paused = _kind("send:{}:storm:paused")
    warning_edits = _kind("send:{}:warning-edits")
    warning_bell = _kind("send:{}:warning-bell")
    warning = _kind("warning:{}")  # per runner type
    warning_scaled = _kind("warning-scaled:{}")  # its scale-ups, kept beside it
    warning_reading = _kind("warnings:reading:{}")
    notice = _kind("notice:{}")
    notice_claim = _kind("notice-claim:{}")
    user = _kind("user:{}")
    interaction = _kind("interaction:{}")
    action_lock = _kind("action-lock:{}:{}")  # incident, what
    scale_revert = _kind("scale-revert:{}")
    put_back_follow = _kind("put-back-follow:{}")
    silence_ending = _kind("silence-ending:{}")  # incident -> failed tries to end its silence
    issue_pass = _kind("lease:issue:{}")
    issue_link = _kind("issue:{}")
    readings_day = _kind("fleet:kept:{}")  # one UTC day (YYYYMMDD), a field per slot
    # Jobs per five-minute slot (epoch seconds / 300): seen, arrived, finished.
    jobs_seen = _kind("jobs:seen:{}")
    job_arrivals = _kind("jobs:arrivals:{}")
    job_durations = _kind("jobs:durations:{}")
    github_delivery = _kind("github:delivery:{}")  # a delivery by its signature: recorded once
    github_events_slot = _kind("github:events:{}")  # deliveries by kind per five-minute slot
    home_claim = _kind("home:claim:{}:{}")  # user, digest
    permalink = _kind("permalink:{}:{}")  # channel, ts
    slack_event = _kind("slack-event:{}")
    pilot = _kind("pilot:{}")  # per runner type: its hold and what it last decided (the leader's)
    pilot_paused = _kind("pilot:paused:{}")  # per runner type: who paused it, and why
    pilot_resumed = _kind("pilot:resumed:{}")  # per runner type: when someone last resumed it
    pilot_act = _kind("pilot:act:{}:{}:{}")  # incident, runner type, the act's number in it


@cache
def lua(name: str) -> str:
    folder = resources.files("bot.storage") / "lua"
    constants = f"local BAND = {BAND}\nlocal RANK = {RANK}\n"
    return constants + (folder / "prelude.lua").read_text() + (folder / f"{name}.lua").read_text()


def script(redis: Redis, name: str) -> AsyncScript:
    return redis.register_script(lua(name))


R = TypeVar("R")


def dumped(record: Any) -> str:
    """A dataclass record as stored: its fields as a JSON object."""
    return json.dumps(asdict(record))


def loaded(kind: type[R], raw: str | None) -> R | None:
    """The record `dumped` stored, None for none."""
    return kind(**json.loads(raw)) if raw else None


async def claim_once(redis: Redis, key: str, ttl_ms: int, value: str = "1") -> bool:
    """Whether this is the first claim of `key` within `ttl_ms`."""
    return bool(await redis.set(key, value, nx=True, px=max(ttl_ms, 1)))


class Records:
    """A store of one kind of record in Redis."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self.keys = keys
        self._scripts: dict[str, AsyncScript] = {}

    async def _run(self, name: str, keys: list[Any], args: list[Any], client: Any = None) -> Any:
        """What the script `name` answers (registered at its first run)."""
        if name not in self._scripts:
            self._scripts[name] = script(self._redis, name)
        return await self._scripts[name](keys=keys, args=args, client=client)
