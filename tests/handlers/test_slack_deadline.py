"""Slack's 3 seconds: whatever is slow behind a request (Slack's own API while Bolt authorizes,
user groups while the scale form checks who may scale), Slack gets its answer in time and the
person gets theirs: the next step, a refusal, or the modal kept open saying it took too long.

The bot runs over HTTP against the session's redis-server and the Slack emulator, made slow for
one method at a time with `SlackEmulator.stall`.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from bot.render.scale_modal import AMOUNT_BLOCK, SCALE_VIEW, TYPE_BLOCK, ScaleForm
from handlers.slack_boundary import TOO_LONG
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.scale import (
    RUNNER,
    form_values,
    open_incident,
    view_submission,
    webhook_settings,
)
from tests.support.slack import CHANNEL, Slack, button_value, ephemeral_texts, post_event, slash

SLACK_DEADLINE_S = 3.0
# The operator lists groups; the person is only in the last one (the emulator's S0ONCALL).
GROUPS = "S0SRE,S0INFRA,S0DBA,S0ONCALL"


def scale_form(root: Any) -> dict[str, Any]:
    """The scale modal as Slack sends it back on submit, without opening it first (opening it
    would check the groups and leave them cached)."""
    form = ScaleForm(button_value(root, "incident_scale"), CHANNEL, RUNNER)
    blocks = [
        {"type": "input", "block_id": TYPE_BLOCK, "label": {"type": "plain_text", "text": "T"}},
        {"type": "input", "block_id": AMOUNT_BLOCK, "label": {"type": "plain_text", "text": "N"}},
    ]
    return {
        "id": "V0SCALE",
        "callback_id": SCALE_VIEW,
        "private_metadata": form.dump(),
        "blocks": blocks,
    }


async def timed(http: httpx.AsyncClient, body: str) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    response = await post_event(http, body)
    return time.monotonic() - started, response


async def test_a_user_group_member_gets_the_next_step_in_time_when_groups_are_slow(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """Four groups, each answered in 1 s: asked one after another they took 4 s."""
    settings = webhook_settings(settings_for, receiver, scale_allowed_users=GROUPS)
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        slack.emulator.stall("usergroups.users.list", 1.0)
        submission = view_submission(scale_form(root), form_values(RUNNER, "4"))
        took, response = await timed(running.http, submission)
    assert took < SLACK_DEADLINE_S, f"answered after {took:.1f} s"
    step = response.json()
    assert step["response_action"] == "update", step
    assert f"Scale *{RUNNER}* by *+4*" in json.dumps(step["view"]["blocks"], ensure_ascii=False)


async def test_when_groups_do_not_answer_the_form_says_so_in_time_and_later_allows(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """Groups that do not answer in time allow nobody this time (1.5 s each, one after another:
    6 s); their lookups go on, so once Slack answers them the same submission is allowed."""
    settings = webhook_settings(settings_for, receiver, scale_allowed_users=GROUPS)
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        slack.emulator.stall("usergroups.users.list", 30)
        submission = view_submission(scale_form(root), form_values(RUNNER, "4"))
        took, response = await timed(running.http, submission)
        assert took < SLACK_DEADLINE_S, f"answered after {took:.1f} s"
        refused = response.json()
        assert refused["response_action"] == "errors", refused
        assert "not allowed to scale" in refused["errors"][TYPE_BLOCK]

        slack.emulator.stall("usergroups.users.list", 0)  # Slack answers the held lookups

        async def allowed() -> bool:
            answer = (await post_event(running.http, submission)).json()
            return answer["response_action"] == "update"

        await eventually(allowed, what="the cached groups allow the same submission")
    lookups = slack.emulator.calls("usergroups.users.list")
    oncall = [c for c in lookups if c.params.get("usergroup") == "S0ONCALL"]
    assert len(oncall) == 1, "asked once: the retries found its lookup under way, then cached"


async def test_a_command_is_acknowledged_in_time_while_bolt_waits_on_slack(
    running_bot: RunningBot, slack: Slack
) -> None:
    """Bolt checks the bot's token (`auth.test`) on its first request: with Slack slow to answer
    that, the 200 came after it, too late; now Slack has its 200 in time and the answer follows."""
    slack.emulator.stall("auth.test", 5)
    took, response = await timed(running_bot.http, slash("help"))
    assert took < SLACK_DEADLINE_S, f"answered after {took:.1f} s"
    assert response.status_code == 200
    answers = await eventually(lambda: ephemeral_texts(slack), what="the command's answer")
    assert "/queue" in answers[0]


async def test_a_modal_submitted_while_bolt_waits_stays_open_saying_it_took_too_long(
    running_bot: RunningBot, slack: Slack
) -> None:
    """A plain ack would close the modal and lose what the person typed, saying nothing."""
    slack.emulator.stall("auth.test", 5)
    root = await open_incident(running_bot, slack)
    submission = view_submission(scale_form(root), form_values(RUNNER, "4"))
    took, response = await timed(running_bot.http, submission)
    assert took < SLACK_DEADLINE_S, f"answered after {took:.1f} s"
    assert response.json() == {"response_action": "errors", "errors": {TYPE_BLOCK: TOO_LONG}}
