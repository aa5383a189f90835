"""Silence and unsilence: a real silence in Alertmanager or Grafana, recorded on the incident, one
at a time (the incident's silence lock); one made is read back before it is said. The watch notices
a silence that ended without us: it ran out, or someone removed it in the backend."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError

from bot.actions.amends import amending
from bot.actions.flow import UNKNOWN, Acting, Actor, Decide, Outcome, failed, refused
from bot.backends.http import BackendError, deadline_of, within
from bot.backends.silence import Silencer, SilenceRequest
from bot.config import Settings
from bot.domain.incident.incidents import (
    ActiveSilence,
    Event,
    Incident,
    silenced,
    unsilenced,
    with_action,
)
from bot.domain.incident.silence_seen import SilenceState, seen_of
from bot.domain.units import duration, is_silence_length
from bot.pacing import wait_after
from bot.render.follow_ups import SILENCE_SEEN, seen_said
from bot.render.mrkdwn import escape, person, slack_date
from bot.render.replies import render_event, render_seen
from bot.storage.due_set import Claim
from bot.storage.incident_store import BAND_ACTION, BAND_EVENT, Commit, IncidentStore, Reply
from bot.storage.leases import Held, Lock

log = logging.getLogger(__name__)
# The watch logs under its own name, which operators filter on.
watch_log = logging.getLogger("bot.actions.silence_watch")

# A silence that ended within this much of its planned end ran out; earlier, it was removed.
ON_TIME = timedelta(seconds=30)
# Ending a silence at its incident's resolve: tries, and the backoff between them.
END_ATTEMPTS = 5
END_FIRST_BACKOFF_S = 5.0
END_MAX_BACKOFF_S = 120.0
SILENCE_UNENDED = "silence_unended"
KEPT = ", kept after the resolve"
NOT_CONFIGURED = (
    "Silencing is not set up: an operator sets `SILENCE_BACKEND` (`alertmanager` with "
    "`ALERTMANAGER_URL`, or `grafana` with `GRAFANA_URL` and `GRAFANA_TOKEN`)."
)


@dataclass
class Silencing:
    acting: Acting
    silencer: Silencer | None
    _: KW_ONLY
    config: Settings
    # (channel, ts) -> a link to that message ("" or None: none to give); never raises.
    permalink: Callable[[str, str], Awaitable[str | None]]

    async def silence(
        self,
        actor: Actor,
        ref: str,
        seconds: int,
        *,
        keep: bool = False,
        interaction: str | None = None,
    ) -> Outcome:
        """`keep`: the silence lasts its whole duration; else it ends at the resolve."""
        asked = (ref, f"Silence for {_span(seconds)}{KEPT if keep else ''}")
        run = lambda: self._silence(actor, ref, seconds, keep=keep)  # noqa: E731
        return await self.acting.guarded("silence", actor, interaction, run, asked=asked)

    async def unsilence(self, actor: Actor, ref: str, *, interaction: str | None = None) -> Outcome:
        return await self.acting.guarded(
            "unsilence", actor, interaction, lambda: self._unsilence(actor, ref)
        )

    async def _silence(self, actor: Actor, ref: str, seconds: int, *, keep: bool) -> Outcome:
        if not is_silence_length(seconds):  # the forms offer only these; a command checks them
            return refused("A silence lasts between 1 minute and 7 days.")
        loaded = await self.acting.load(ref)
        incident, silencer = loaded.incident, self.silencer
        refusal = _silence_refusal(incident, silencer)
        if refusal or incident is None or silencer is None:
            return refused(refusal)
        name = await self.acting.name(actor)
        lock = await self._lock(incident, f"{name} is silencing it")
        if isinstance(lock, Held):
            return refused(f"Incident {incident.id} is being silenced right now: {lock.what}.")
        try:
            now, thread = self.acting.clock(), loaded.thread
            until = now + timedelta(seconds=seconds)
            link = await self.permalink(thread.channel, thread.ts) if thread else ""
            comment = f"queuepilot incident #{incident.id} ({incident.title[:200]}), "
            comment += f"silenced from Slack by {name}" + (f": {link}" if link else "")
            request = SilenceRequest(incident.silence_matchers, now, until, name, comment)
            # Watched before it exists: a leader dying right after creating it has it looked at.
            check_s = self.config.silence_check_seconds
            try:
                watch = self.acting.store.silence_watch
                await watch.schedule(incident.id, min(until.timestamp(), now.timestamp() + check_s))
                silence_id = await within(silencer.create(request), self._timeout_s, silencer.name)
            except BackendError as exc:
                reason = escape(str(exc))
                return failed(
                    f"Could not silence incident {incident.id}: {reason}. Nothing changed."
                )
            try:  # read back: the answer to the create proves only that it took the request
                read: SilenceState | str | None = await within(
                    silencer.state(silence_id), self._timeout_s, silencer.name
                )
            except BackendError as exc:
                read = str(exc)
            made = ActiveSilence(
                silence_id=silence_id,
                backend=silencer.name,
                until=until,
                by=actor.user_id,
                by_name=name,
                at=now,
                kept=keep,
            )
            try:
                outcome = await self.acting.commit(ref, _silenced(made, seconds, read))
            except RedisError:  # Deposed too: the next leader does the click again
                await self._unmade(silencer, made)
                raise
            if not outcome.ok:
                await self._unmade(silencer, made)
            return outcome
        finally:
            await lock.release()

    async def _unmade(self, silencer: Silencer, made: ActiveSilence) -> None:
        """A silence made but not recorded mutes the alert where nobody sees it: it goes."""
        try:
            await within(silencer.expire(made.silence_id), self._timeout_s, silencer.name)
        except BackendError as exc:
            log.warning(
                "silence %s was made but not recorded, and expiring it failed (%s): expire it "
                "in %s", made.silence_id, exc, silencer.name,
            )  # fmt: skip

    async def _unsilence(self, actor: Actor, ref: str) -> Outcome:
        incident = (await self.acting.load(ref)).incident
        if incident is None:
            return refused(UNKNOWN)
        removed, silencer = incident.silence, self.silencer
        if removed is None:
            return refused(f"Incident {incident.id} is not silenced from Slack.")
        if silencer is None or silencer.name != removed.backend:
            return refused(
                f"This silence lives in {escape(removed.backend)}, which queuepilot no longer "
                f"uses: remove silence `{escape(removed.silence_id)}` there."
            )
        name = await self.acting.name(actor)
        lock = await self._lock(incident, f"{name} is changing its silence")
        if isinstance(lock, Held):
            return refused(f"Incident {incident.id}'s silence is changing right now: {lock.what}.")
        try:
            await within(silencer.expire(removed.silence_id), self._timeout_s, silencer.name)
            # Removed after the resolve, the summary that said it stays is edited to say so.
            change = amending(_unsilenced(removed, actor, name))
            return await self.acting.commit(ref, change, with_timeline=True)
        except BackendError as exc:
            reason = escape(str(exc))
            return failed(f"Could not remove the silence: {reason}. It is still in force.")
        finally:
            await lock.release()

    @property
    def _timeout_s(self) -> float:
        return self.config.backend_timeout_seconds

    async def _lock(self, incident: Incident, doing: str) -> Lock | Held:
        # Held past two calls' deadlines (made and read back): the commit follows them.
        ttl_s = 2 * deadline_of(self._timeout_s) + 5
        return await self.acting.interactions.lock(incident.id, "silence", doing=doing, ttl_s=ttl_s)


def _silence_refusal(incident: Incident | None, silencer: Silencer | None) -> str:
    if silencer is None:
        return NOT_CONFIGURED
    if incident is None:
        return UNKNOWN
    if not incident.is_open:
        return f"Incident {incident.id} is already resolved: there is nothing to silence."
    current = incident.silence
    if current is not None:
        return (
            f"Incident {incident.id} is already silenced until {slack_date(current.until)} by "
            f"{person(current.by, current.by_name)}. `/queue unsilence {incident.id}` removes "
            "it; then silence it again for another duration."
        )
    if not incident.silence_matchers:
        return (
            f"Incident {incident.id}'s alert carries no labels a silence could select it by: "
            "silence it in Grafana or Alertmanager."
        )
    return ""


def _silenced(made: ActiveSilence, seconds: int, read: SilenceState | str | None) -> Decide:
    def decide(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, Outcome]:
        text = f"Silenced for {_span(seconds)} in {made.backend}{KEPT if made.kept else ''}"
        event = Event(
            at=made.at, kind="silenced", text=text, actor=made.by, actor_name=made.by_name
        )
        updated = with_action(silenced(incident, made), event)
        seen = seen_of(made.backend, read, incident.silence_matchers)
        until = slack_date(made.until)
        answer = (
            f"You silenced incident {incident.id} until {until} "
            f"({escape(made.backend)} silence `{escape(made.silence_id)}`)."
        )
        if not incident.is_open and made.kept:
            answer += " The incident had resolved meanwhile; the silence stays until it ends."
        elif not incident.is_open:
            answer += " The incident had resolved meanwhile, so it ends now, as at a resolve."
        # In the thread, as the silence's end is: the root shows only the silence in force.
        reply = Reply("action", BAND_ACTION, render_seen(updated, event, f"until {until}", seen))
        events = (event, Event(at=now, kind=SILENCE_SEEN, text=seen_said(seen, at=_dated)))
        return Commit(updated, events=events, replies=(reply,)), Outcome(True, answer)

    return decide


def _unsilenced(removed: ActiveSilence, actor: Actor, name: str) -> Decide:
    def decide(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit | None, Outcome]:
        if incident.silence is None or incident.silence.silence_id != removed.silence_id:
            return None, Outcome(True, f"Incident {incident.id}'s silence is already gone.")
        text = f"Silence removed from {removed.backend}"
        event = Event(at=now, kind="unsilenced", text=text, actor=actor.user_id, actor_name=name)
        updated = with_action(unsilenced(incident, now=now), event)
        reply = Reply("action", BAND_ACTION, render_event(updated, event))
        answer = f"You removed incident {incident.id}'s silence: its alerts notify again."
        return Commit(updated, events=(event,), replies=(reply,)), Outcome(True, answer)

    return decide


def _span(seconds: int) -> str:
    return duration(timedelta(seconds=seconds))


@dataclass
class SilenceWatch:
    store: IncidentStore
    silencer: Silencer
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]

    async def tick(self) -> None:
        """Check every silence that is due; never raises."""
        try:
            due = await self.store.silence_watch.pending(self.clock().timestamp())
        except RedisError as exc:
            watch_log.warning("silence watch: Redis unavailable: %s", exc)
            return
        for incident_id in due:
            try:
                await self.check(incident_id)
            except (RedisError, BackendError) as exc:
                watch_log.warning("silence watch: incident %s: %s; retrying", incident_id, exc)
            except Exception:
                watch_log.exception("silence watch: incident %s failed", incident_id)

    async def check(self, incident_id: str) -> None:
        lease_s = deadline_of(self.config.backend_timeout_seconds) + 5
        watch = self.store.silence_watch
        claim = await watch.claim(incident_id, self.clock().timestamp(), lease_s)
        if claim is None:
            return  # not due any more
        try:
            await self._check(claim)
        except Exception:
            # Due again at once, as before the claim (a no-op when the check rescheduled it).
            with suppress(RedisError):
                await watch.reschedule(claim, self.clock().timestamp())
            raise

    async def _check(self, claim: Claim) -> None:
        watch, incident_id = self.store.silence_watch, claim.member
        incident = (await self.store.load(incident_id)).incident
        if incident is None or incident.silence is None:
            await watch.done(claim)
            return
        seen, now = incident.silence, self.clock()
        if not incident.is_open and seen.ends_at_resolve:
            await self._end_at_resolve(claim, incident, seen)
            return
        check_s, timeout_s = self.config.silence_check_seconds, self.config.backend_timeout_seconds
        try:
            state = await within(
                self.silencer.state(seen.silence_id), timeout_s, self.silencer.name
            )
        except BackendError:
            await watch.reschedule(claim, now.timestamp() + check_s)
            raise
        if state is not None and state.in_force:
            ends = state.ends_at or seen.until
            if abs((ends - seen.until).total_seconds()) > 1:
                # Someone changed its end in the backend: the root shows the real end.
                moved = seen.model_copy(update={"until": ends})
                await self._record(
                    incident_id,
                    seen,
                    lambda i, at: Commit(i.model_copy(update={"silence": moved, "updated_at": at})),
                )
            due = min(now.timestamp() + check_s, ends.timestamp())
            await watch.reschedule(claim, max(due, now.timestamp() + 1))
            return
        ended_at = state.ends_at if state is not None and state.ends_at else now
        text = "Silence ended: the alerts notify again"
        if ended_at < seen.until - ON_TIME:
            text = f"Silence removed in {seen.backend}, outside Slack"

        def ended(incident: Incident, at: datetime) -> Commit:
            event = Event(at=at, kind="unsilenced", text=text)
            updated = unsilenced(incident, now=at)
            reply = Reply("event", BAND_EVENT, render_event(updated, event))
            return Commit(updated, events=(event,), replies=(reply,))

        await self._record(incident_id, seen, ended)
        await watch.done(claim)

    async def _end_at_resolve(self, claim: Claim, incident: Incident, seen: ActiveSilence) -> None:
        """Expire the silence the bot made, its incident resolved: a re-fire must notify."""
        watch, now = self.store.silence_watch, self.clock()
        try:
            timeout_s = self.config.backend_timeout_seconds
            await within(self.silencer.expire(seen.silence_id), timeout_s, self.silencer.name)
        except BackendError as exc:
            tries = int(await watch.data(claim.member) or 0) + 1
            if exc.retryable and tries < END_ATTEMPTS:
                wait = wait_after(tries, first=END_FIRST_BACKOFF_S, maximum=END_MAX_BACKOFF_S)
                watch_log.warning(
                    "incident %s: ending its silence %s failed (%s); again in %.0f s",
                    incident.id, seen.silence_id, exc, wait,
                )  # fmt: skip
                await watch.reschedule(claim, now.timestamp() + wait, str(tries))
                return
            await self._record(incident.id, seen, _unended(seen, str(exc)))
            # Its tries counted afresh: a reopen lets the next resolve end it again.
            next_s = now.timestamp() + self.config.silence_check_seconds
            await watch.reschedule(claim, next_s, "0")
            return

        def ended(incident: Incident, at: datetime) -> Commit:
            text = f"Silence ended in {seen.backend} at resolve"
            event = Event(at=at, kind="unsilenced", text=text)
            return Commit(unsilenced(incident, now=at), events=(event,))

        await self._record(incident.id, seen, ended)
        await watch.done(claim)

    async def _record(
        self, incident_id: str, seen: ActiveSilence, change: Callable[[Incident, datetime], Commit]
    ) -> None:
        def recorded(
            incident: Incident, now: datetime, _: list[Event]
        ) -> tuple[Commit | None, None]:
            if incident.silence != seen:
                return None, None  # someone acted on it meanwhile: their change stands
            return change(incident, now), None

        await self.store.commit_fresh(
            incident_id, amending(recorded), clock=self.clock, with_timeline=True
        )


def _unended(seen: ActiveSilence, reason: str) -> Callable[[Incident, datetime], Commit]:
    def change(incident: Incident, at: datetime) -> Commit:
        text = f"Could not end its silence in {seen.backend} at resolve: {reason}"
        event = Event(at=at, kind=SILENCE_UNENDED, text=text)
        stays = seen.model_copy(update={"unended": reason})
        updated = incident.model_copy(update={"silence": stays, "updated_at": at})
        removes = f"`/queue unsilence {escape(incident.id)}` removes it"
        detail = f"It stays until {slack_date(seen.until)}: {removes}."
        reply = Reply("event", BAND_EVENT, render_event(updated, event, detail=detail))
        return Commit(updated, events=(event,), replies=(reply,))

    return change


def _dated(moment: datetime) -> str:
    """A silence's end as its line keeps it: with its date, as a silence may run for days."""
    return f"{moment:%Y-%m-%d %H:%M} UTC"
