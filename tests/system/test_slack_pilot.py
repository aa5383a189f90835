"""The pilot's surfaces through the served bot, as people meet them: `/queue pilot` (signed slash
commands) and its `off`/`on`, refused to someone without scale permission; an unknown type
answered with the piloted ones; the act's Pause pilot button (a signed click); and the App Home's
Pilot section, in the same words. An ARC scale set behind the Kubernetes stand-in, Slack emulated,
Redis real; no incident is open, so the pilot has nothing to act on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sandbox.slack_interactions import Person
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, USER, Slack, block_action, post_event, slash
from tests.system.test_app_home import home_text, open_home

TYPE = "linux.2xlarge"
PILOT = {"up_to": 60, "step": 20, "hold_seconds": 180, "cooldown_seconds": 600}
BOB = "U0BOB"  # in the workspace, not in SCALE_ALLOWED_USERS


def answers(slack: Slack, user: str = USER) -> list[str]:
    return [m.text for m in slack.emulator.ephemerals(CHANNEL) if m.user == user]


async def asked(running: RunningBot, slack: Slack, text: str, user: str = USER) -> str:
    """`/queue <text>` typed by `user`, and the answer only they see."""
    before = len(answers(slack, user))
    body = slash(text).replace(f"user_id={USER}", f"user_id={user}")
    assert (await post_event(running.http, body)).status_code == 200
    found = await eventually(
        lambda: answers(slack, user)[before:], what=f"the answer to /queue {text}", timeout=15
    )
    return found[0]


async def test_queue_pilot_shows_switches_and_refuses_and_the_home_and_pause_button_agree(
    settings_for: Any, slack: Slack, arc_kube: FakeKubeApi, tmp_path: Path
) -> None:
    targets = {TYPE: {"target": f"arc-runners/{RECORDED}", "cap": 20, "pilot": PILOT}}
    settings = settings_for(
        scaler_backend="arc",
        scaler_kubeconfig=str(arc_kube.kubeconfig(tmp_path, arc_kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps(targets),
        scale_allowed_users=USER,
        home_numbers_seconds=3600,
    )
    async with run_bot(settings) as running:
        shown = await asked(running, slack, "pilot")
        assert f"*`{TYPE}`* · up_to 60, step 20, hold 3 min, period 1 min, cooldown 10 min" in shown
        assert "*on*:" in shown and "paused" not in shown

        said = await asked(running, slack, "pilot off")
        assert said == f"The pilot is paused for `{TYPE}` until someone turns it on."
        shown = await asked(running, slack, "pilot")
        assert "*paused* by *alice* <!date^" in shown and "paused from Slack" in shown

        assert "The pilot is on for" in await asked(running, slack, f"pilot on {TYPE}")
        assert "*on*:" in await asked(running, slack, "pilot")

        refused = await asked(running, slack, "pilot off", user=BOB)
        assert "not allowed to scale runners" in refused and "SCALE_ALLOWED_USERS" in refused
        assert "*on*:" in await asked(running, slack, "pilot"), "nothing paused"

        unknown = await asked(running, slack, "pilot off windows.4xlarge")
        assert unknown == f"`windows.4xlarge` has no pilot. Piloted: `{TYPE}`."

        # The Home shows the pilot as /queue pilot does.
        alice = Person(USER, "alice")
        assert (await open_home(running, alice, slack)).status_code == 200
        await eventually(
            lambda: "*Pilot*" in home_text(slack, USER), what="the Home's Pilot section"
        )
        assert f"*`{TYPE}`* · up_to 60, step 20, hold 3 min" in home_text(slack, USER)

        # The act's Pause pilot, clicked: the value names the act and its type.
        value = f"1:abc123|2026-11-28T14:02:00+00:00|{TYPE}"
        action = {"type": "button", "action_id": "pilot_pause", "value": value}
        before = len(answers(slack))
        click = block_action(action, message_ts="1700000000.000100")
        assert (await post_event(running.http, click)).status_code == 200
        said = (await eventually(lambda: answers(slack)[before:], what="the click's answer"))[0]
        assert said == f"The pilot is paused for `{TYPE}` until someone turns it on."
        assert "*paused* by *alice*" in await asked(running, slack, "pilot")
        await eventually(
            lambda: "*paused* by *alice*" in home_text(slack, USER),
            what="the Home showing the pause",
            timeout=20,
        )
