"""The action core: what a responder can do to an incident, whether from a button, a modal or
`/queue`."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from bot.actions.diagnose import Diagnosing, Jobs, read_jobs
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting, Actor, Decided, Outcome, refused
from bot.actions.pilot import Piloting
from bot.actions.report import Report
from bot.actions.scale import Scaling
from bot.actions.silence import Silencing
from bot.config import Settings
from bot.domain.incident.headline import still_live
from bot.domain.incident.incident_fleet import judgement_of
from bot.domain.incident.incidents import (
    POSTMORTEM,
    Event,
    Incident,
    acknowledge,
    resolve_manually,
    with_action,
)
from bot.domain.queue_cost.jobs import workflows_seen
from bot.domain.reading.fleet import of_type
from bot.domain.reading.judgement import Judgement
from bot.domain.scale.scaling import ScaleOwner, ScalePreview
from bot.render.mrkdwn import escape
from bot.render.numbers import still_live_said
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_event, summaries
from bot.render.root import render_still_live
from bot.storage.incident_store import BAND_ACTION, Commit, Reply, postmortem_reply, summary_replies

__all__ = ["ActionCore", "Actor", "Outcome"]

NO_JOBS_SOURCE = "no jobs source is configured (JOBS_BACKEND=github or hud lists them)"


@dataclass
class ActionCore:
    """Each kind of action is its part's (`core.silencing.silence`, ...); acknowledge, resolve and
    the postmortem act on the incident alone, so they are the core's."""

    acting: Acting
    silencing: Silencing
    scaling: Scaling
    diagnosing: Diagnosing
    jobs: Jobs
    warnings: Warnings
    report: Report
    piloting: Piloting
    _: KW_ONLY
    config: Settings

    async def open_incidents(self, limit: int = 100) -> list[Incident]:
        return await self.acting.store.get_many((await self.acting.store.open_ids())[:limit])

    async def recent(self, limit: int = 10) -> list[Incident]:
        return await self.acting.store.get_many(await self.acting.store.recent_ids(limit))

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return await self.acting.store.incident_of_message(channel, ts)

    async def scale_owner(
        self, actor: Actor, *, ref: str, warning: str, runner_type: str
    ) -> ScaleOwner | Outcome:
        """What the Scale up… form scales for (an early warning, else an incident), or why not."""
        if warning:
            state = await self.scaling.refusal(actor) or await self.warnings.standing(
                runner_type, warning
            )
            return (
                state if isinstance(state, Outcome) else ScaleOwner((runner_type,), warning=state)
            )
        choice = await self.scaling.choices(actor, ref)
        if isinstance(choice, Outcome):
            return choice
        return ScaleOwner(tuple(choice[1]), incident=choice[0])

    async def scale_preview(
        self, owner: ScaleOwner, runner_type: str, *, timeout_s: float
    ) -> ScalePreview:
        """The form's numbers: an incident's advice for the type, else the current reading's."""
        advice: Judgement | None = None
        if owner.incident is not None:
            now, within = self.acting.clock(), self.config.drain_target_minutes
            advice = judgement_of(owner.incident, runner_type, now=now, within_mins=within)
        elif (reading := await self.diagnosing.readings.latest()) is not None and reading.fleet:
            found = of_type(reading.fleet.runner_types, runner_type)
            advice = found.judged if found is not None else None
        return await self.scaling.preview(
            runner_type, advice, timeout_s=timeout_s, until=owner.until
        )

    async def acknowledge(
        self, actor: Actor, ref: str, *, interaction: str | None = None
    ) -> Outcome:
        async def run() -> Outcome:
            name = await self.acting.name(actor)

            def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
                if not incident.is_open:
                    return None, refused(f"Incident {incident.id} is already resolved.")
                if incident.acknowledged.by == actor.user_id:
                    return None, Outcome(True, f"You already own incident {incident.id}.")
                previous = incident.acknowledged.name or incident.acknowledged.by
                if previous:
                    kind, text = "handed_over", f"Taken over from {previous}"
                    answer = f"You took incident {incident.id} over from {escape(previous)}."
                else:
                    kind, text = "acknowledged", "Acknowledged"
                    answer = f"You acknowledged incident {incident.id}."
                by = actor.user_id
                event = Event(at=now, kind=kind, text=text, actor=by, actor_name=name)
                updated = with_action(acknowledge(incident, by=by, name=name, now=now), event)
                reply = Reply("action", BAND_ACTION, render_event(updated, event))
                return Commit(updated, events=(event,), replies=(reply,)), Outcome(True, answer)

            return await self.acting.commit(ref, decide)

        return await self.acting.guarded("acknowledge", actor, interaction, run)

    async def resolve(
        self, actor: Actor, ref: str, *, anyway: bool = False, interaction: str | None = None
    ) -> Outcome:
        """Resolve by hand; while the queue is still live, only `anyway`."""

        async def run() -> Outcome:
            name = await self.acting.name(actor)

            def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decided:
                if not incident.is_open:
                    return None, Outcome(True, f"Incident {incident.id} is already resolved.")
                live = still_live(incident)
                if live is not None and not anyway:
                    # Typed without `anyway`: asked once, with what is still live.
                    asked = render_still_live(incident, live)
                    return None, Outcome(False, asked.text, "refused", tuple(asked.blocks))
                left = f" with {still_live_said(live, thresholds=False)}" if live else ""
                text = f"Resolved manually{left}"
                by = actor.user_id
                event = Event(at=now, kind="resolved", text=text, actor=by, actor_name=name)
                resolved = resolve_manually(incident, by=by, name=name, now=now)
                updated = with_action(resolved, event)
                summary = summaries(updated, [*timeline, event], now=now)
                replies = summary_replies(BAND_ACTION, summary, updated)
                commit = Commit(updated, events=(event,), replies=replies, stop_status=True)
                return commit, Outcome(True, f"You resolved incident {incident.id}{escape(left)}.")

            return await self.acting.commit(ref, decide, with_timeline=True)

        return await self.acting.guarded("resolve", actor, interaction, run)

    async def postmortem(
        self, actor: Actor, ref: str, *, interaction: str | None = None
    ) -> Outcome:
        """The incident's write-up, open or resolved, shared into its thread as a Markdown file."""

        async def run() -> Outcome:
            unread = "the jobs source could not be read: {exc}"
            now = self.acting.clock()
            jobs, note = await read_jobs(self.jobs.watch, now, unset=NO_JOBS_SOURCE, unread=unread)
            name = await self.acting.name(actor)

            def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decided:
                # Read once, kept: the copy on the alert's issue renders this record too.
                types = sorted(incident.shown_types or incident.runner_types)
                seen = workflows_seen(jobs, note, types=types, ended=incident.resolved.at)
                incident = incident.model_copy(update={"workflows": seen})
                markdown = render_postmortem(incident, timeline, now=now)
                text = (
                    "Postmortem draft (still firing)" if incident.is_open else "Postmortem drafted"
                )
                event = Event(
                    at=now, kind=POSTMORTEM, text=text, actor=actor.user_id, actor_name=name
                )
                reply = postmortem_reply(markdown, title=f"Postmortem · incident {incident.id}")
                commit = Commit(with_action(incident, event), events=(event,), replies=(reply,))
                return commit, Outcome(True, "The postmortem is on its way to the thread.")

            return await self.acting.commit(ref, decide, with_timeline=True)

        return await self.acting.guarded("postmortem", actor, interaction, run)
