"""The early warning's Dismiss button: no warning for that runner type for an hour.

Anyone in the channel may dismiss: it silences nothing, it only holds back a forecast. The
message says who dismissed it and until when (their name, not a mention); the alert, if it
fires, opens its incident as always.
"""

from __future__ import annotations

from datetime import UTC, timedelta

from bot.actions.flow import Acting, Actor, Outcome
from bot.domain.early_warning import Phase
from bot.render.early_warning import DISMISS_FOR_S
from bot.render.mrkdwn import escape, slack_date, truncate
from bot.storage.warnings import WarningStore


class Warnings:
    def __init__(self, acting: Acting, store: WarningStore) -> None:
        self._acting = acting
        self._store = store

    async def dismiss(
        self, actor: Actor, runner_type: str, uid: str, *, interaction: str | None = None
    ) -> Outcome:
        return await self._acting.guarded(
            "dismiss_warning", actor, interaction, lambda: self._dismiss(actor, runner_type, uid)
        )

    async def _dismiss(self, actor: Actor, runner_type: str, uid: str) -> Outcome:
        state = await self._store.get(runner_type)
        name = truncate(escape(runner_type), 200)
        if state is None or state.uid != uid or state.phase is not Phase.ACTIVE:
            return Outcome(False, f"The early warning for {name} has ended already.", "refused")
        now = self._acting.clock()
        until = now + timedelta(seconds=DISMISS_FOR_S)
        who = await self._acting.name(actor)
        dismissed = state.changed(
            now.timestamp(), phase=Phase.DISMISSED, by=who, until=until.timestamp()
        )
        if not await self._store.save(dismissed):
            return Outcome(False, f"The early warning for {name} changed meanwhile: try again.")
        when = slack_date(until.astimezone(UTC), "{time}")
        return Outcome(True, f"No early warning for {name} until {when}.")
