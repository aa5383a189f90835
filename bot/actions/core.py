"""The action core: what a responder can do to an incident, whichever surface they used.

Buttons, modals and `/queue` subcommands all land here, so all get the same permission check,
the same idempotency, the same timeline entries and the same answers (see `bot.actions.flow` for the
path every action takes). Acknowledge and resolve only change state; silence
(`bot.actions.silence`),
scale up (`bot.actions.scale`) and diagnostics (`bot.actions.diagnose`) call a backend first;
the queued jobs (`bot.actions.jobs`) only read one; the postmortem (`bot.actions.postmortem`)
shares a write-up of the incident into its thread.
"""

from __future__ import annotations

import logging
from datetime import datetime

from bot.actions.diagnose import Diagnosing
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting, Actor, Decide, Decision, Outcome, refused
from bot.actions.jobs import Jobs
from bot.actions.postmortem import Postmortems
from bot.actions.report import Report
from bot.actions.scale import Scaling
from bot.actions.scale_form import ScaleForms
from bot.actions.silence import Silencing
from bot.config import Settings
from bot.domain.incidents import Event, Incident, acknowledge, resolve_manually, with_action
from bot.domain.still_live import still_live
from bot.render.mrkdwn import escape
from bot.render.replies import render_event, summaries
from bot.render.still_live import render_still_live
from bot.storage.incident_store import BAND_ACTION, Commit, Reply, summary_replies

__all__ = ["ActionCore", "Actor", "Outcome"]

log = logging.getLogger(__name__)


class ActionCore:
    def __init__(
        self,
        acting: Acting,
        silencing: Silencing,
        scaling: Scaling,
        diagnosing: Diagnosing,
        jobs: Jobs | None = None,
        warnings: Warnings | None = None,
        report: Report | None = None,
        *,
        config: Settings,
    ) -> None:
        self._acting = acting
        self._store = acting.store
        self.silence = silencing.silence
        self.unsilence = silencing.unsilence
        self.scaling = scaling
        self.scale = scaling.scale
        self.scale_forms = ScaleForms(
            scaling, diagnosing.readings, warnings, clock=acting.clock, config=config
        )
        self.diagnose = diagnosing.diagnose
        self.readings = diagnosing.readings
        self.jobs = (jobs or Jobs(acting, None)).jobs
        # The write-up names the workflows behind the queue from the same jobs source.
        self._postmortems = Postmortems(acting, jobs.watch if jobs is not None else None)
        self.warnings = warnings
        # Where incidents open (SLACK_CHANNEL and the routes'): `/queue` typed in one of them
        # answers for that channel and the runner types it owns; anywhere else (a DM), for all.
        self.routing = config.routing
        self.channels = self.routing.channels
        self._report = report

    async def post_weekly_report(self) -> None:
        if self._report is not None:
            await self._report.post_weekly()

    async def report(
        self, actor: Actor, days: int, runner_type: str | None, *, interaction: str | None = None
    ) -> Outcome:
        if self._report is None:
            return Outcome(False, "Capacity reports need the fleet's readings.", "refused")
        return await self._report.report(actor, days, runner_type, interaction=interaction)

    async def dismiss_warning(
        self, actor: Actor, runner_type: str, uid: str, *, interaction: str | None = None
    ) -> Outcome:
        if self.warnings is None:
            return Outcome(False, "Early warnings are turned off.", "refused")
        return await self.warnings.dismiss(actor, runner_type, uid, interaction=interaction)

    # -- finding incidents -----------------------------------------------------------------

    async def open_incidents(self, limit: int = 100) -> list[Incident]:
        """The most recently opened open incidents, at most `limit` of them."""
        return await self._store.get_many((await self._store.open_ids())[:limit])

    async def open_count(self) -> int:
        return await self._store.open_count()

    async def recent(self, limit: int = 10) -> list[Incident]:
        return await self._store.get_many(await self._store.recent_ids(limit))

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return await self._store.incident_of_message(channel, ts)

    async def postmortem(
        self, actor: Actor, ref: str, *, interaction: str | None = None
    ) -> Outcome:
        """The incident's write-up as a Markdown file in its thread (resolved or still open)."""
        return await self._postmortems.postmortem(actor, ref, interaction=interaction)

    async def postmortem_markdown(
        self, incident: Incident, timeline: list[Event], now: datetime
    ) -> str:
        """The write-up as `postmortem` shares it, for the alert's GitHub issue."""
        return await self._postmortems.markdown(incident, timeline, now)

    # -- acknowledge and resolve -----------------------------------------------------------

    async def acknowledge(
        self, actor: Actor, ref: str, *, interaction: str | None = None
    ) -> Outcome:
        async def run() -> Outcome:
            name = await self._acting.name(actor)
            return await self._acting.commit(ref, _acknowledge(actor, name))

        return await self._acting.guarded("acknowledge", actor, interaction, run)

    async def resolve(
        self, actor: Actor, ref: str, *, anyway: bool = False, interaction: str | None = None
    ) -> Outcome:
        """Resolve by hand; while the queue is still live, only `anyway` (asked once more)."""

        async def run() -> Outcome:
            name = await self._acting.name(actor)
            decide = _resolve(actor, name, anyway=anyway)
            return await self._acting.commit(ref, decide, with_timeline=True)

        return await self._acting.guarded("resolve", actor, interaction, run)


def _acknowledge(actor: Actor, name: str) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        if not incident.is_open:
            return Decision(refused(f"Incident {incident.id} is already resolved."))
        if incident.acknowledged_by == actor.user_id:
            return Decision(Outcome(True, f"You already own incident {incident.id}."))
        previous = incident.acknowledged_name or incident.acknowledged_by
        if previous:
            kind, text = "handed_over", f"Taken over from {previous}"
            answer = f"You took incident {incident.id} over from {escape(previous)}."
        else:
            kind, text = "acknowledged", "Acknowledged"
            answer = f"You acknowledged incident {incident.id}."
        event = Event(at=now, kind=kind, text=text, actor=actor.user_id, actor_name=name)
        updated = with_action(acknowledge(incident, by=actor.user_id, name=name, now=now), event)
        reply = Reply("action", BAND_ACTION, render_event(updated, event))
        return Decision(Outcome(True, answer), Commit(updated, events=(event,), replies=(reply,)))

    return decide


def _resolve(actor: Actor, name: str, *, anyway: bool) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        if not incident.is_open:
            return Decision(Outcome(True, f"Incident {incident.id} is already resolved."))
        live = still_live(incident)
        if live is not None and not anyway:
            # The alert would open it again: asked once more, with what is still live.
            asked = render_still_live(incident, live)
            return Decision(Outcome(False, asked.text, "refused", tuple(asked.blocks)))
        text = f"Resolved manually with {live.text}" if live else "Resolved manually"
        event = Event(at=now, kind="resolved", text=text, actor=actor.user_id, actor_name=name)
        resolved = resolve_manually(incident, by=actor.user_id, name=name, now=now)
        updated = with_action(resolved, event)
        summary = summaries(updated, [*timeline, event], now=now)
        replies = summary_replies(BAND_ACTION, summary, updated)
        commit = Commit(updated, events=(event,), replies=replies, stop_status=True)
        left = f" with {escape(live.text)}" if live else ""
        return Decision(Outcome(True, f"You resolved incident {incident.id}{left}."), commit)

    return decide
