"""Rolling back to 0.27.0 (test_rollback.py) while something is in flight, the checkout leading
until it stops: a click its last replica has not finished 5 s after SIGTERM is handed back to the
requests stream, and 0.27.0, leading next, does it; a scale-up reviewed in the checkout's Scale up…
form and confirmed once only 0.27.0 serves is done. Each person is told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
from tests.support.processes import REPO, BotProcess
from tests.support.releases import (
    FIRING,
    KEYS,
    deliver,
    dump,
    leads,
    min_runners,
    notify,
    press,
    ready,
    release_tree,
    replica,
    roots,
    shared_settings,
    terminated,
)
from tests.support.running import eventually
from tests.support.scale import RUNNER, form_values, view_submission
from tests.support.slack import Slack, button_value, ephemeral_texts, signed
from tests.system.test_rollback import PREVIOUS, PREVIOUS_RELEASE

ADDS = 5


@pytest.mark.slow
async def test_a_click_under_way_when_the_checkout_stops_is_not_lost(
    redis_url: str, slack: Slack, store: redis.Redis, tmp_path: Path
) -> None:
    """The checkout's last replica stops, 0.27.0 beside it, while a click of its is under way:
    Slack, asked who clicked, has not answered yet (a slow backend may take its 10 s too)."""
    previous = release_tree(PREVIOUS_RELEASE, tmp_path / PREVIOUS)
    (tmp_path / "next").mkdir()
    new = replica(slack, redis_url, REPO, tmp_path / "next", "next")
    processes = [new]
    try:
        await ready(new, REPO)
        old = replica(slack, redis_url, previous, previous, PREVIOUS)
        processes.append(old)
        await ready(old, previous)
        assert await leads(new), "the checkout, up first, leads"
        await notify(new, "grafana", fixture_json(FIRING))
        [first] = await eventually(lambda: roots(slack), what="incident 1's root")
        slack.emulator.stall("users.info", 60)
        await deliver(new, press(button_value(first, "incident_ack"), "incident_ack", first.ts))
        await eventually(lambda: slack.emulator.calls("users.info"), what="the click under way")
        await terminated(new)
        slack.emulator.stall("users.info", 0)
        await eventually(
            lambda: ephemeral_texts(slack) == ["You acknowledged incident 1."],
            what="the person told, once",
        )
        await eventually(lambda: store.xlen(KEYS.requests) == 0, what="no click left")
    except BaseException:
        dump(slack, processes)
        raise
    finally:
        for process in processes:
            process.kill()


@pytest.mark.slow
async def test_a_scale_up_reviewed_on_the_checkout_and_confirmed_after_it_stopped_is_done(
    redis_url: str,
    slack: Slack,
    arc_kube: FakeKubeApi,
    grafana: FakeSilenceApi,
    tmp_path: Path,
) -> None:
    """Someone reviews a scale-up in the checkout's form and presses Scale up once the
    checkout's last replica has stopped: Slack sends the submission to 0.27.0."""
    kube = arc_kube
    previous = release_tree(PREVIOUS_RELEASE, tmp_path / PREVIOUS)
    env = shared_settings(kube, grafana, tmp_path)
    (tmp_path / "next").mkdir()
    new = replica(slack, redis_url, REPO, tmp_path / "next", "next", **env)
    processes = [new]
    try:
        await ready(new, REPO)
        old = replica(slack, redis_url, previous, previous, PREVIOUS, **env)
        processes.append(old)
        await ready(old, previous)
        assert await leads(new), "the checkout, up first, leads"
        await notify(new, "grafana", fixture_json(FIRING))
        [first] = await eventually(lambda: roots(slack), what="incident 1's root")
        await deliver(new, press(button_value(first, "incident_scale"), "incident_scale", first.ts))
        [form] = await eventually(
            lambda: [v for v in slack.emulator.views() if "Now:" in json.dumps(v)],
            what="the checkout's form, with the capacity",
        )
        step = await submitted(new, view_submission(form, form_values(RUNNER, str(ADDS))))
        assert step["response_action"] == "update", step
        await terminated(new)

        confirmed = {**step["view"], "id": form["id"]}
        assert await submitted(old, view_submission(confirmed, {})) == {"response_action": "clear"}
        await eventually(lambda: min_runners(kube) == ADDS, what="scaled", timeout=5)
        await eventually(
            lambda: any(t.startswith(f"You scaled `{RUNNER}`") for t in ephemeral_texts(slack)),
            what="the person told",
        )
    except BaseException:
        dump(slack, processes)
        raise
    finally:
        for process in processes:
            process.kill()


async def submitted(process: BotProcess, body: str) -> dict[str, Any]:
    """A modal's submission to one replica, and what it answered Slack."""
    async with httpx.AsyncClient(base_url=process.url, timeout=10) as http:
        response = await http.post("/slack/events", content=body, headers=signed(body))
    assert response.status_code == 200, f"{process.name}: {response.status_code} {response.text}"
    return dict(response.json())
