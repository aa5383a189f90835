"""A silence as its backend shows it, and whether the one just made is in force and selects the
incident's alert: decided once, from the one read-back, and said in the silence's own reply."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.domain.alerting.alerts import Matcher


@dataclass(frozen=True)
class SilenceState:
    silence_id: str
    state: str  # active, pending or expired
    ends_at: datetime | None = None
    starts_at: datetime | None = None
    matchers: tuple[Matcher, ...] = ()

    @property
    def in_force(self) -> bool:
        return self.state in ("active", "pending")


@dataclass(frozen=True)
class Seen:
    """The read-back of a silence made in `backend`: `state` None with no `unread` reason: the
    backend does not know it; `misses`: its matchers the alert does not satisfy."""

    backend: str
    state: SilenceState | None = None
    misses: tuple[Matcher, ...] = ()
    unread: str = ""

    @property
    def holds(self) -> bool | None:
        """In force and selecting the alert (None: not known)."""
        if self.unread:
            return None
        return self.state is not None and self.state.in_force and not self.misses


def seen_of(backend: str, read: SilenceState | str | None, asked: tuple[Matcher, ...]) -> Seen:
    """`read`: the backend's answer, or why there was none."""
    if isinstance(read, str):
        return Seen(backend, unread=read)
    if read is not None and not read.matchers:
        return Seen(backend, unread=f"{backend} showed the silence without its matchers")
    misses = tuple(m for m in read.matchers if not selects(m, asked)) if read else ()
    return Seen(backend, read, misses)


def selects(matcher: Matcher, asked: tuple[Matcher, ...]) -> bool:
    """Whether `matcher` holds for the alert the incident's matchers `asked` select. Its labels
    are what the equality matchers name; one of the incident's own matchers holds by definition
    (a Grafana silence link's `!=` names no value to test)."""
    labels = {m.name: m.value for m in asked if m.is_equal and not m.is_regex}
    return matcher in asked or matcher.holds(labels.get(matcher.name, ""))
