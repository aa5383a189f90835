"""`/queue postmortem [ID]` and the summary's Postmortem button: the incident's write-up, shared
into its thread as a Markdown file.

Read-mostly: the only change to the incident is a line on its timeline ("Postmortem drafted"),
committed with the file's reply like every action (`Acting.commit`), so the file is posted once
per click whatever the replicas. Works on a resolved incident (the usual case, from the summary)
and on an open one, whose file says it is a draft of an incident still firing. The jobs source,
when there is one, is read before the commit, holding no state (`bot.actions.diagnose` does the
same): a slow source never holds up the incident.
"""

from __future__ import annotations

from datetime import datetime

from bot.actions.flow import UNKNOWN, Acting, Actor, Decide, Decision, Outcome, refused
from bot.backends.errors import BackendError
from bot.domain.incidents import Event, Incident, with_action
from bot.domain.jobs import JobsView
from bot.fleet.jobs import JobsWatch
from bot.render.postmortem import render_postmortem
from bot.storage.incident_store import Commit, postmortem_reply

ANSWER = "The postmortem is on its way to the thread."
NO_JOBS_SOURCE = "no jobs source is configured (JOBS_BACKEND=github or hud lists them)"


class Postmortems:
    def __init__(self, acting: Acting, jobs: JobsWatch | None = None) -> None:
        self._acting = acting
        self._jobs = jobs

    async def postmortem(
        self, actor: Actor, ref: str, *, interaction: str | None = None
    ) -> Outcome:
        return await self._acting.guarded(
            "postmortem", actor, interaction, lambda: self._draft(actor, ref)
        )

    async def markdown(self, incident: Incident, timeline: list[Event], now: datetime) -> str:
        """The write-up drawn again for the alert's GitHub issue, when its moment is told: the
        thread's file, with the jobs source read then (seconds later, as a rule)."""
        jobs, note = await self._jobs_view(now)
        return render_postmortem(incident, timeline, now=now, jobs=jobs, jobs_note=note)

    async def _draft(self, actor: Actor, ref: str) -> Outcome:
        if (await self._acting.load(ref)).incident is None:
            return refused(UNKNOWN)
        jobs, note = await self._jobs_view(self._acting.clock())
        name = await self._acting.name(actor)
        return await self._acting.commit(ref, _drafted(actor, name, jobs, note), with_timeline=True)

    async def _jobs_view(self, now: datetime) -> tuple[JobsView | None, str]:
        """The jobs behind the queue, or why there are none, in a few words."""
        if self._jobs is None:
            return None, NO_JOBS_SOURCE
        try:
            return await self._jobs.view(now=now), ""
        except BackendError as exc:
            return None, f"the jobs source could not be read: {exc}"


def _drafted(actor: Actor, name: str, jobs: JobsView | None, note: str) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        markdown = render_postmortem(incident, timeline, now=now, jobs=jobs, jobs_note=note)
        text = "Postmortem drafted" if not incident.is_open else "Postmortem draft (still firing)"
        event = Event(at=now, kind="postmortem", text=text, actor=actor.user_id, actor_name=name)
        reply = postmortem_reply(markdown, title=f"Postmortem · incident {incident.id}")
        commit = Commit(with_action(incident, event), events=(event,), replies=(reply,))
        return Decision(Outcome(True, ANSWER), commit)

    return decide
