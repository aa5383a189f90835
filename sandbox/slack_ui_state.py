"""What a Slack client holds beyond the workspace's messages: triggers, open modals, response URLs.

The local Slack page is one person's client. Slack hands an app a `trigger_id` with every
interaction (good once, for 3 seconds, to open a modal in front of that person) and a
`response_url` (good for a few answers to that person or that message). This is that
bookkeeping, kept beside the `Workspace` and serialised by the same lock.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from sandbox.slack_model import SlackError

TRIGGER_TTL_S = 3.0
# Slack: "use a response_url up to 5 times within 30 minutes".
RESPONSE_URL_USES = 5
RESPONSE_URL_TTL_S = 30 * 60


@dataclass
class ResponseTarget:
    """Where answers to one response_url go."""

    channel: str
    user: str
    message_ts: str | None
    created: float = field(default_factory=time.monotonic)
    uses: int = 0


@dataclass
class UiState:
    triggers: dict[str, tuple[str, float]] = field(default_factory=dict)
    exchanged: set[str] = field(default_factory=set)
    # Per person, the modal's views, bottom first (views.push stacks them).
    modals: dict[str, list[str]] = field(default_factory=dict)
    # Errors an app answered a submission with, by view ID, shown under their inputs.
    view_errors: dict[str, dict[str, str]] = field(default_factory=dict)
    responses: dict[str, ResponseTarget] = field(default_factory=dict)

    def reset(self) -> None:
        self.triggers.clear()
        self.exchanged.clear()
        self.modals.clear()
        self.view_errors.clear()
        self.responses.clear()

    def issue_trigger(self, user: str) -> str:
        trigger_id = f"{int(time.time())}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}"
        self.triggers[trigger_id] = (user, time.monotonic())
        return trigger_id

    def take_trigger(self, trigger_id: str) -> str | None:
        """The person a trigger was issued for, once; None for a trigger this client never
        issued (tests make their own). Slack refuses a late or reused one."""
        if trigger_id in self.exchanged:
            raise SlackError("exchanged_trigger_id")
        issued = self.triggers.pop(trigger_id, None)
        if issued is None:
            return None
        self.exchanged.add(trigger_id)
        user, at = issued
        if time.monotonic() - at > TRIGGER_TTL_S:
            raise SlackError("expired_trigger_id")
        return user

    def modal_of(self, user: str) -> list[str]:
        return self.modals.setdefault(user, [])

    def close(self, user: str, *, everything: bool = False) -> None:
        stack = self.modal_of(user)
        closed = list(stack) if everything else stack[-1:]
        del stack[len(stack) - len(closed) :]
        for view_id in closed:
            self.view_errors.pop(view_id, None)

    def new_response_url(self, channel: str, user: str, message_ts: str | None) -> str:
        token = secrets.token_urlsafe(18)
        self.responses[token] = ResponseTarget(channel, user, message_ts)
        return token

    def use_response_url(self, token: str) -> ResponseTarget:
        target = self.responses.get(token)
        if target is None:
            raise SlackError("no_such_response_url", status=404)
        if target.uses >= RESPONSE_URL_USES or (
            time.monotonic() - target.created > RESPONSE_URL_TTL_S
        ):
            raise SlackError("used_up", status=404)
        target.uses += 1
        return target
