"""Opening a new alert group's incident: the commit that opens it, and the webhook's direct open.

Why a direct open: a new group's root is the chain from an alert to Slack, and the stream's path
crosses Redis twice before the post (the webhook's append, then the consumer's commit), each
crossing waking an idle Redis and an idle bot. When a notification comes alone (no burst is being
appended) and its group is not one this replica knows to exist, the webhook builds the opening
commit itself, exactly as the consumer would, and one script (`IncidentStore.open_first`) opens
the incident if Redis has never seen the group, or else appends the entry for the consumer as
usual. Either way the notification is in Redis before the 202, and everything after is the same:
the state, the root, the hand-over to this replica's sender (`bot.root_hints`).

A group this replica has seen skips the attempt (`KnownGroups`): a flood of one body would
otherwise build an opening commit per notification only to append it.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from bot.alerts import Notification, PayloadError
from bot.delivery import Delivery, delivery_of, group_hash
from bot.incidents import Change, Event, GroupState, noted, open_incident
from bot.root_hints import RootHints, rendered_root, settle
from bot.store import Commit, FirstOpen, IncidentStore
from bot.stream import NotificationStream, entry_fields
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)


def opening_commit(
    base: Commit,
    group: GroupState,
    delivery: Delivery,
    incident_id: str,
    *,
    channel: str,
    now: datetime,
    status_due: float,
) -> Commit:
    """The commit that opens a group's incident with its first firing notification."""
    incident = open_incident(
        delivery,
        incident_id=incident_id,
        uid=secrets.token_hex(6),
        channel=channel,
        now=now,
    )
    opened = Event(at=now, kind="opened", text=f"Alert fired: {incident.title}")
    return Commit(
        incident,
        version=0,
        group=group.model_copy(update={"incident_id": incident.id}),
        group_hash=base.group_hash,
        group_version=base.group_version,
        events=(opened,),
        status_due=status_due if incident.is_open else None,
    )


class KnownGroups:
    """Groups this replica knows exist in Redis (the newest `size`): their notifications go to
    the stream. Forgetting one costs only a direct attempt that ends in an append."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._hashes: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._hashes

    def add(self, key: str) -> None:
        self._hashes[key] = None
        self._hashes.move_to_end(key)
        if len(self._hashes) > self._size:
            self._hashes.popitem(last=False)


@dataclass(frozen=True)
class OpenConfig:
    channel: str
    status_interval_s: int


class DirectOpens:
    """The webhook's direct open of a lone first notification (see the module docstring)."""

    def __init__(
        self,
        store: IncidentStore,
        stream: NotificationStream,
        telemetry: Telemetry,
        *,
        config: OpenConfig,
        clock: Callable[[], datetime],
        hints: RootHints,
        known: KnownGroups,
    ) -> None:
        self._store = store
        self._stream = stream
        self._telemetry = telemetry
        self._config = config
        self._clock = clock
        self._hints = hints
        self._known = known

    async def accept(
        self, notification: Notification, body: bytes, received_at: float
    ) -> FirstOpen | None:
        """Open the notification's incident, or append it for the consumer, in one round trip;
        None when it is not for this path (the caller appends it as usual). Raises what Redis
        raises: the webhook answers 503, and nothing was written."""
        if notification.status == "resolved" or not self._stream.quiet:
            return None
        key = group_hash(notification.source, notification.group_key)
        if key in self._known:
            return None
        self._known.add(key)
        # Random placeholders, so no alert text can spell them: the script fills in the ID and
        # the group's order, which only Redis can give.
        slots = (f"qpid{secrets.token_hex(8)}", f"qpat{secrets.token_hex(8)}")
        now = self._clock()
        try:
            commit = self._opening(notification, key, slots, now)
        except (PayloadError, ValidationError, ValueError):
            return None  # the consumer dead-letters it, with the reason
        except Exception:  # a bug here must cost the fast path, never the notification
            log.exception("intake: a direct open of %s failed; appending it", key)
            return None
        return await self._open(commit, entry_fields(notification, body, received_at), slots, now)

    def _opening(
        self, notification: Notification, key: str, slots: tuple[str, str], now: datetime
    ) -> Commit:
        delivery = delivery_of(notification)
        group = noted(GroupState(), delivery, slots[1])
        return opening_commit(
            Commit(group=group, group_hash=key),
            group,
            delivery,
            slots[0],
            channel=self._config.channel,
            now=now,
            status_due=now.timestamp() + self._config.status_interval_s,
        )

    async def _open(
        self, commit: Commit, entry: dict[str, Any], slots: tuple[str, str], now: datetime
    ) -> FirstOpen:
        assert commit.incident is not None
        channel = commit.incident.channel
        hint = self._hints.expect(channel)
        if hint is not None:
            commit = replace(commit, mark=self._hints.mark(channel, slots[0]))
        since, done = time.monotonic(), FirstOpen()
        incident = commit.incident
        try:
            done = await self._store.open_first(
                commit, entry, slots=slots, now=now.timestamp(), durably=self._stream.durably
            )
            if done.incident_id:
                incident = incident.model_copy(update={"id": done.incident_id})
        finally:
            if hint is not None:  # no version unless opened: the sender then reads its queue
                marked_at = since if done.marked else None
                root = rendered_root(incident, self._clock()) if marked_at else None
                settle(hint, incident, done.version, marked_at=marked_at, root=root)
        if not done.incident_id:
            return done
        self._telemetry.notifications_applied.labels(Change.OPENED.value).inc()
        self._telemetry.incidents_opened.inc()
        log.debug("intake: opened %s on acceptance", incident.id)
        return done
