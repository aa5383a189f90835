"""Both Scale up… forms end to end, as the reported defect was met: the served bot reading ARC's
listener metrics through a real Prometheus, an ARC scale set behind the Kubernetes stand-in,
Slack emulated. The scale set runs 16 of a maximum of 20 with its floor at 16: a raised floor
would be refused (`minRunners ≤ maxRunners`). Each form opens with the advice its message shows,
in a shape the set accepts; submitted untouched, it is reviewed as it will be applied, and ARC
accepts it: no refusal anywhere."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.scale import form_values, modal_click, view_submission
from tests.support.slack import (
    CHANNEL,
    USER,
    Slack,
    click,
    ephemeral_texts,
    post_event,
    thread_texts,
)

SET = ("arc-runners", QUEUEING)
# The set's listener: 16 runners, all busy, of a maximum of 20, its floor at 16.
SIXTEEN_OF_TWENTY = {
    "running_jobs": 16,
    "registered_runners": 16,
    "busy_runners": 16,
    "idle_runners": 0,
    "min_runners": 16,
    "max_runners": 20,
    "desired_runners": 16,
}


def settings(settings_for: Any, arc_fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path) -> Any:
    return settings_for(
        metrics_backend="prometheus",
        prometheus_url=arc_fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=2,
        # A reading stands for a fleet's minute: a rise shows over three readings, as by default.
        advice_rise_window=2,
        status_interval_seconds=1,
        status_tick_seconds=0.5,
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps(
            {QUEUEING: {"target": f"arc-runners/{QUEUEING}", "cap": 20, "ceiling": 150}}
        ),
        scale_allowed_users=USER,
        early_warning_queued=12,
    )


def sixteen_of_twenty(kube: FakeKubeApi) -> None:
    kube.add_from_fixture(minRunners=16, maxRunners=20)
    kube.write(manager="manager", status={"currentRunners": 16})


def text_of(message: Any) -> str:
    return (message.text + json.dumps(message.blocks, ensure_ascii=False)).replace("*", "")


async def opened_form(slack: Slack, opened: int) -> dict[str, Any]:
    """The form once it shows the capacity: the view the person has in front of them."""
    return (
        await eventually(
            lambda: [v for v in slack.emulator.views()[opened:] if "Now:" in json.dumps(v)],
            what="the form, with the capacity and the default",
            timeout=20,
        )
    )[-1]


def untouched(form: dict[str, Any]) -> tuple[str, str]:
    """What the form submits when nobody changes it: the amount and the choice it shows."""
    blocks = {b.get("block_id"): b for b in form["blocks"]}
    amount = blocks["amount"]["element"].get("initial_value")
    assert amount is not None, "the advice is filled in"
    return amount, blocks["mode"]["element"]["initial_option"]["value"]


async def review_and_confirm(
    running: RunningBot, form: dict[str, Any], amount: str, mode: str
) -> str:
    """Review as submitted untouched, then Scale up; the review's text."""
    values = form_values(QUEUEING, amount, mode)
    step = (await post_event(running.http, view_submission(form, values))).json()
    assert step["response_action"] == "update", step
    review = json.dumps(step["view"]["blocks"], ensure_ascii=False)
    confirm = {**step["view"], "id": form["id"]}
    assert (await post_event(running.http, view_submission(confirm, {}))).json() == {
        "response_action": "clear"
    }
    return review


def root_saying(slack: Slack, words: str) -> Any:
    """The channel's message that says `words` (the root, once it shows that advice)."""
    return next((m for m in slack.emulator.channel_messages(CHANNEL) if words in text_of(m)), None)


def advice_of(text: str) -> str:
    found = re.search(
        r"\+\d+ runners (?:would|\(the cap\); more would be needed to) drain it in 30 min; "
        r"raise the maximum by \d+ \(20 → \d+\)",
        text,
    )
    assert found is not None, text
    return found.group(0)


async def test_the_incidents_form_offers_the_roots_advice_as_arc_accepts_it(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """28 queued on 16 busy runners of a maximum of 20: +28 is past one request's cap, so the
    root says +20 (the cap) and that more would be needed. The form raises maxRunners 20 → 40
    (the cap), +4 more after it."""
    arc_fleet.queueing.set(assigned_jobs=44, **SIXTEEN_OF_TWENTY)
    sixteen_of_twenty(kube)
    async with run_bot(settings(settings_for, arc_fleet, kube, tmp_path)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await eventually(
            lambda: root_saying(slack, "+20 runners (the cap)"),
            what="the root with the live advice",
            timeout=30,
        )
        said = advice_of(text_of(root))
        assert said == (
            "+20 runners (the cap); more would be needed to drain it in 30 min; "
            "raise the maximum by 16 (20 → 36)"
        )

        opened = len(slack.emulator.views())
        assert (await click(running, root, "incident_scale")).status_code == 200
        form = await opened_form(slack, opened)
        shown = json.dumps(form["blocks"], ensure_ascii=False)
        assert f"Recommended: *{said}*" in shown, "the root's advice, in its words"
        assert untouched(form) == ("20", "raise_max")
        assert "+4 more after this one" in shown
        assert "maxRunners is chosen (20 → 40)" in shown

        review = await review_and_confirm(running, form, *untouched(form))
        assert f"Scale *{QUEUEING}* by *+20*" in review
        assert "After the scale-up: maxRunners 20 → 40." in review
        await eventually(
            lambda: kube.sets[SET]["spec"]["maxRunners"] == 40, what="ARC took the new maximum"
        )
        assert kube.sets[SET]["spec"]["minRunners"] == 16
        await eventually(
            lambda: any("maxRunners 20 → 40" in t for t in thread_texts(slack, root.ts)),
            what="the scale-up in the thread",
        )
        texts = [*thread_texts(slack, root.ts), *ephemeral_texts(slack)]
        assert not [t for t in texts if "Could not scale" in t or "above maxRunners" in t]


@pytest.mark.slow
async def test_the_warnings_form_offers_the_current_readings_advice_as_arc_accepts_it(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """A queue building on 16 of 20 runners warns before any alert. Its Scale up… offers the
    advice of the reading it shows (or a newer one, saying so), raising maxRunners, never a
    floor the set refuses."""
    listener = arc_fleet.queueing
    listener.set(assigned_jobs=20, **SIXTEEN_OF_TWENTY)
    sixteen_of_twenty(kube)
    building = True

    async def build() -> None:
        """A job more every second until the test has its warning."""
        assigned = 20.0
        while building:
            await asyncio.sleep(0.1)
            assigned += 0.1
            listener.set(assigned_jobs=round(assigned, 1))

    async with run_bot(settings(settings_for, arc_fleet, kube, tmp_path)) as running:
        task = asyncio.create_task(build())
        try:
            warning = await eventually(
                lambda: next(
                    (
                        m
                        for m in slack.emulator.channel_messages(CHANNEL)
                        if "Early warning" in m.text and "queue building" in m.text
                    ),
                    None,
                ),
                what="the early warning",
                timeout=60,
            )
        finally:
            building = False
            await task
        assert not any("Jobs queueing" in m.text for m in slack.emulator.channel_messages(CHANNEL))

        opened = len(slack.emulator.views())
        assert (await click(running, warning, "warning_scale")).status_code == 200
        form = await opened_form(slack, opened)
        shown = json.dumps(form["blocks"], ensure_ascii=False)
        assert "*Early warning* ·" in shown
        assert "queue building" not in shown, "the warning's words are an older reading's"
        assert "The fleet at <!date^" in shown and advice_of(shown)
        amount, mode = untouched(form)
        assert mode == "raise_max", "a raised floor would pass maxRunners"
        assert 1 <= int(amount) <= 20

        review = await review_and_confirm(running, form, amount, mode)
        raised = 20 + int(amount)
        assert f"After the scale-up: maxRunners 20 → {raised}." in review
        await eventually(
            lambda: kube.sets[SET]["spec"]["maxRunners"] == raised,
            what="ARC took the new maximum",
        )
        await eventually(
            lambda: any(
                f"alice scaled {QUEUEING} by +{amount}" in text_of(m)
                and f"maxRunners 20 → {raised}" in text_of(m)
                for m in slack.emulator.channel_messages(CHANNEL)
                if m.ts == warning.ts
            ),
            what="the scale-up on the warning's message",
        )
        assert kube.sets[SET]["spec"]["minRunners"] == 16
        assert not [t for t in ephemeral_texts(slack) if "Could not scale" in t]


@pytest.mark.slow
async def test_the_review_says_the_advice_moved_and_takes_the_new_amount(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The form opens at +8 (12 queued on 16 of 20: the maximum to 28); before the review the
    queue grows to 16 and the root moves to +12. The review says the advice moved and offers
    +12; taking it reviews +12, and ARC gets exactly that."""
    arc_fleet.queueing.set(assigned_jobs=28, **SIXTEEN_OF_TWENTY)
    sixteen_of_twenty(kube)
    async with run_bot(settings(settings_for, arc_fleet, kube, tmp_path)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await eventually(
            lambda: root_saying(slack, "+12 runners"),
            what="the root advising +12",
            timeout=30,
        )
        opened = len(slack.emulator.views())
        assert (await click(running, root, "incident_scale")).status_code == 200
        form = await opened_form(slack, opened)
        assert untouched(form) == ("8", "raise_max")

        arc_fleet.queueing.set(assigned_jobs=32, **SIXTEEN_OF_TWENTY)
        await eventually(
            lambda: root_saying(slack, "+16 runners") is not None,
            what="the root advising +16",
            timeout=30,
        )
        values = form_values(QUEUEING, "8", "raise_max")
        step = (await post_event(running.http, view_submission(form, values))).json()
        review = json.dumps(step["view"]["blocks"], ensure_ascii=False)
        assert "The advice moved since the form opened: +8 then, *+12* now" in review
        assert f"Scale *{QUEUEING}* by *+8*" in review

        confirm = {**step["view"], "id": form["id"], "hash": form["hash"]}
        taken = await post_event(running.http, modal_click(confirm, "scale_take_advice", "12"))
        assert taken.status_code == 200
        updated = await eventually(
            lambda: next(
                (
                    v
                    for v in slack.emulator.views()
                    if v["id"] == form["id"] and "by *+12*" in json.dumps(v["blocks"])
                ),
                None,
            ),
            what="the review of +12",
        )
        assert "moved" not in json.dumps(updated["blocks"])
        assert (await post_event(running.http, view_submission(updated, {}))).json() == {
            "response_action": "clear"
        }
        await eventually(
            lambda: kube.sets[SET]["spec"]["maxRunners"] == 32, what="ARC took +12 on its maximum"
        )
