"""Scale up from Slack: the modal's two steps, `/queue scale`, permissions, caps, idempotency,
and the real calls: a signed webhook to a receiver that verifies it, and an ARC scale set's
merge patch through a Kubernetes-shaped API."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.chart_admission import chart_policy
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.running import RunningBot, eventually, leader_of, run_bot
from tests.support.scale import (
    RUNNER,
    form_values,
    open_incident,
    view_submission,
    webhook_settings,
)
from tests.support.slack import (
    CHANNEL,
    USER,
    Slack,
    click,
    ephemeral_texts,
    post_event,
    slash,
    thread_texts,
)


async def open_form(running: RunningBot, slack: Slack, root: Any) -> dict[str, Any]:
    assert (await click(running, root, "incident_scale")).status_code == 200
    views = await eventually(
        lambda: (
            [v for v in slack.emulator.views() if "Now:" in json.dumps(v["blocks"])]
            or [v for v in slack.emulator.views() if "cannot report" in json.dumps(v["blocks"])]
        ),
        what="the form with capacity",
    )
    return views[-1]


async def test_scale_modal_reviews_confirms_and_calls_the_signed_webhook(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    receiver.capacity[RUNNER] = 12
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        blocks = json.dumps(form["blocks"], ensure_ascii=False)
        assert RUNNER in blocks, "the incident's runner type is preselected"
        assert "cannot report capacity in advance" in blocks
        assert "Recommended: *+14 runners would drain it in 30 min*" in blocks, "a runner a job"
        assert "One request adds at most +10: *+4 more after this one*" in blocks
        assert '"initial_value": "10"' in blocks, "prefilled with the most one request may add"

        response = await post_event(running.http, view_submission(form, form_values(RUNNER, "4")))
        step = response.json()
        assert step["response_action"] == "update"
        confirm = step["view"]
        assert confirm["callback_id"] == "incident_scale_confirm"
        shown = json.dumps(confirm["blocks"], ensure_ascii=False)
        assert f"Scale *{RUNNER}* by *+4*" in shown
        assert "Cannot be undone: your receiver decides what a scale-up does" in shown
        assert "Keep it after" not in blocks, "nothing to keep: it cannot be put back"
        assert not receiver.accepted, "nothing is called before the confirmation"

        confirm_view = {**confirm, "id": form["id"]}
        response = await post_event(running.http, view_submission(confirm_view, {}))
        assert response.json() == {"response_action": "clear"}
        await eventually(lambda: receiver.accepted, what="the webhook called")
        (call,) = receiver.accepted
        assert call["runner_type"] == RUNNER and call["delta"] == 4
        assert call["target"] == "gpu-pool" and call["incident_id"] == "1"
        assert call["requested_by"] == "alice"
        await eventually(
            lambda: any("12 → 16 runners" in t for t in thread_texts(slack, root.ts)),
            what="before → after in the thread",
        )
        await eventually(
            lambda: any(
                "You scaled" in t and "It cannot be undone by queuepilot" in t
                for t in ephemeral_texts(slack)
            ),
            what="the answer, saying it stays",
        )

        # A replayed request (same signature, same request_id) is refused by the receiver.
        headers, body = receiver.raw[0]
        replay = {k: v for k, v in headers.items() if k.startswith("x-queuepilot")}
        replay["content-type"] = "application/json"
        answer = await asyncio.to_thread(
            httpx.post,
            receiver.url,
            content=body,
            headers=replay,  # type: ignore[attr-defined]
        )
        assert answer.status_code == 401 and receiver.refused == ["replayed request"]
        stale = dict(replay, **{"x-queuepilot-timestamp": str(int(time.time()) - 3600)})
        answer = await asyncio.to_thread(
            httpx.post,
            receiver.url,
            content=body,
            headers=stale,  # type: ignore[attr-defined]
        )
        assert receiver.refused[-1] == "timestamp outside the replay window"
        metrics = (await running.http.get("/metrics")).text
        assert 'queuepilot_actions_total{action="scale",outcome="ok"} 1.0' in metrics


async def test_the_form_refuses_an_amount_over_the_cap_under_the_field(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        response = await post_event(running.http, view_submission(form, form_values(RUNNER, "11")))
        answer = response.json()
        assert answer["response_action"] == "errors"
        assert "At most +10 runners per request" in answer["errors"]["amount"]


async def test_queue_scale_refuses_over_the_cap_and_scales_within_it(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +50"))
        await eventually(
            lambda: any("At most +10" in t for t in ephemeral_texts(slack)), what="the cap"
        )
        assert not receiver.raw, "nothing was called"
        await post_event(running.http, slash(f"scale {RUNNER} +3"))
        await eventually(lambda: receiver.accepted, what="scaled")
        assert receiver.accepted[0]["delta"] == 3


@pytest.mark.parametrize(
    ("allowed", "user", "verdict"),
    [
        ("", "U0ALICE", "turned off"),
        ("U0BOB", "U0ALICE", "not allowed to scale"),
        ("S0ONCALL", "U0ALICE", "scaled"),
        ("S0ONCALL", "U0BOB", "not allowed to scale"),
    ],
)
async def test_only_allowed_people_and_user_groups_may_scale(
    settings_for: Any,
    slack: Slack,
    receiver: ScaleReceiver,
    allowed: str,
    user: str,
    verdict: str,
) -> None:
    settings = webhook_settings(settings_for, receiver, scale_allowed_users=allowed)
    async with run_bot(settings) as running:
        await open_incident(running, slack)
        body = slash(f"scale {RUNNER} +2").replace(f"user_id={USER}", f"user_id={user}")
        await post_event(running.http, body)
        answer = await eventually(lambda: [m.text for m in slack.emulator.ephemerals(CHANNEL)])
        if verdict == "scaled":
            await eventually(lambda: receiver.accepted, what="scaled")
            assert "You scaled" in answer[0]
        else:
            assert verdict in answer[0] and "SCALE_ALLOWED_USERS" in answer[0]
            assert not receiver.raw, "a refused request calls nothing"


async def test_a_scale_up_refused_at_the_button_is_kept_for_the_summary(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """Alice may not scale: Scale up… tells her so and opens no form; the incident's record
    keeps the refusal, which its summary says among what was done, also when the replica Slack
    reached is not the one that leads (which alone writes)."""
    settings = webhook_settings(settings_for, receiver, scale_allowed_users="U0BOB")
    async with run_bot(settings) as first, run_bot(settings) as second:
        running = await leader_of(first, second)
        follower = second if running is first else first
        root = await open_incident(running, slack)
        assert (await click(follower, root, "incident_scale")).status_code == 200
        await eventually(
            lambda: any("not allowed to scale" in t for t in ephemeral_texts(slack)), what="told"
        )
        assert not slack.emulator.views()

        async def kept() -> bool:  # by the leader, after the person was told
            return any(e.kind == "refused" for e in await running.bot.store.events("1"))

        await eventually(kept, what="the refusal on the incident's record")
        await post_event(running.http, slash("resolve 1"))
        summary = await eventually(
            lambda: [t for t in thread_texts(slack, root.ts) if "What was done" in t],
            what="the summary",
        )
    assert "Scale-up refused: You are not allowed to scale runners" in summary[0], summary
    assert "Actions taken: *1*, by *alice*" in summary[0], "her resolve; the refusal is none"


async def test_a_scale_up_allowed_at_the_button_hands_the_leader_nothing(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """Only a refusal at the button is work for the leader (its record on the timeline): a
    click that opens the form appends nothing to the requests stream."""
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        await open_form(running, slack, root)
        await eventually(lambda: not running.bot.lazy.pending, what="the click's work over")
        stream = await running.bot.redis.xinfo_stream(running.bot.request_stream.key)
        assert stream["entries-added"] == 0


async def test_the_same_confirmation_twice_and_a_second_modal_scale_once(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        step = await post_event(running.http, view_submission(form, form_values(RUNNER, "2")))
        confirm = {**step.json()["view"], "id": form["id"]}
        body = view_submission(confirm, {})
        await asyncio.gather(post_event(running.http, body), post_event(running.http, body))
        await eventually(lambda: receiver.accepted, what="scaled")
        # Another modal (another view ID), submitted right after: the cooldown refuses it.
        other = {**confirm, "id": "V0OTHER"}
        await post_event(running.http, view_submission(other, {}))
        await eventually(
            lambda: any("was just scaled" in t for t in ephemeral_texts(slack)), what="refusal"
        )
        assert len(receiver.accepted) == 1


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("500", "The scaler webhook answered 500: scaler broke"),
        ("404", "The scaler webhook answered 404"),
        ("unreachable", "The scaler webhook is unreachable"),
    ],
)
async def test_a_failing_scaler_is_told_and_nothing_is_recorded(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver, fault: str, expected: str
) -> None:
    extra: dict[str, Any] = {"backend_timeout_seconds": 10}
    if fault == "500":
        receiver.failures.append(500)
    if fault == "404":
        extra["scaler_webhook_url"] = receiver.url.replace("/scale", "/nope")  # type: ignore[attr-defined]
    if fault == "unreachable":
        extra["scaler_webhook_url"] = "http://127.0.0.1:9/scale"
    async with run_bot(webhook_settings(settings_for, receiver, **extra)) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +2"))
        answer = await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not scale" in t], what="told"
        )
        assert expected in answer[0] and "Nothing changed" in answer[0]
        assert not any("Scaled" in t for t in thread_texts(slack, root.ts))
        incident = await running.bot.store.get("1")
        assert incident is not None and not incident.recent_actions


async def test_a_scaler_whose_answer_is_lost_may_have_scaled_and_is_not_asked_again(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """The scaler took the request and never answered: it may have scaled. The person is told
    so, not "nothing changed", and asking again at once is refused rather than scaling twice."""
    release = receiver.hang()
    settings = webhook_settings(settings_for, receiver, backend_timeout_seconds=0.5)
    try:
        async with run_bot(settings) as running:
            root = await open_incident(running, slack)
            await post_event(running.http, slash(f"scale {RUNNER} +2"))
            answer = await eventually(
                lambda: [t for t in ephemeral_texts(slack) if "Could not tell" in t], what="told"
            )
            assert "did not answer" in answer[0] and "It may have been" in answer[0]
            assert "Nothing changed" not in answer[0]
            await post_event(running.http, slash(f"scale {RUNNER} +2"))
            again = await eventually(
                lambda: [t for t in ephemeral_texts(slack) if "was just scaled" in t],
                what="asking again refused",
            )
            assert "its answer was lost" in again[0]
            assert not any("Scaled" in t for t in thread_texts(slack, root.ts))
    finally:
        release.set()


def initial(form: dict[str, Any]) -> tuple[str | None, str | None]:
    """What the form submits untouched: the amount shown, and the choice of what to raise."""
    blocks = {b.get("block_id"): b for b in form["blocks"]}
    amount = blocks["amount"]["element"].get("initial_value")
    mode = blocks.get("mode", {}).get("element", {}).get("initial_option", {}).get("value")
    return amount, mode


def arc_settings(settings_for: Any, kube: FakeKubeApi, tmp_path: Path, **extra: Any) -> Any:
    values = {
        "scaler_backend": "arc",
        "scaler_kubeconfig": str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        "scaler_targets": json.dumps(
            {RUNNER: {"target": "arc-runners/mt-l-x86iavx512-8-64", "cap": 20, "ceiling": 150}}
        ),
        "scale_allowed_users": USER,
    }
    return settings_for(**{**values, **extra})


async def test_arc_raises_min_runners_with_a_merge_patch(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    runner_set = kube.add_from_fixture(minRunners=0, maxRunners=120)
    runner_set["status"]["currentRunners"] = 40
    async with run_bot(arc_settings(settings_for, kube, tmp_path)) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        assert "Now: 40 runners (min 0, max 120)" in json.dumps(form["blocks"])
        assert initial(form) == ("14", "raise_min"), "the advice fits under the maximum"
        step = await post_event(running.http, view_submission(form, form_values(RUNNER, "5")))
        confirm = step.json()["view"]
        shown = json.dumps(confirm["blocks"], ensure_ascii=False)
        assert "minRunners 0 → 5" in shown
        assert (
            "Put back when the incident resolves and its queue stays drained 30 min or after 4 h"
            in shown
        )
        await post_event(running.http, view_submission({**confirm, "id": form["id"]}, {}))
        await eventually(lambda: kube.patches, what="patched")
        path, content_type, body = kube.patches[0]
        assert path == (
            "/apis/actions.github.com/v1alpha1/namespaces/arc-runners/"
            "autoscalingrunnersets/mt-l-x86iavx512-8-64"
        )
        assert content_type == "application/merge-patch+json"
        assert body == {"metadata": {"resourceVersion": "318874529"}, "spec": {"minRunners": 5}}
        await eventually(
            lambda: any(
                "minRunners 0 → 5 (maxRunners 120)" in t for t in thread_texts(slack, root.ts)
            ),
            what="thread reply",
        )


async def test_arc_without_patch_rights_is_refused_with_who_and_the_role_to_fix(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The API server's 403 for a Role without `patch`: the person who asked reads who was
    refused, what, and the fix, and nothing is recorded to put back."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)["status"]["currentRunners"] = 40
    kube.denied_verbs = {"patch"}
    async with run_bot(arc_settings(settings_for, kube, tmp_path)) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +2"))
        [answer] = await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not scale" in t], what="told"
        )
        assert answer == (
            f"Could not scale `{RUNNER}`: The Kubernetes API answered 403 Forbidden: "
            "system:serviceaccount:queuepilot:queuepilot may not patch the AutoscalingRunnerSet "
            "arc-runners/mt-l-x86iavx512-8-64. Its Role in arc-runners must allow get and patch "
            "on autoscalingrunnersets (apiGroup actions.github.com). Nothing changed."
        )
        assert kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]["spec"]["minRunners"] == 0
        assert not any("Scaled" in t for t in thread_texts(slack, root.ts))
        incident = await running.bot.store.get("1")
        assert incident is not None and not incident.recent_actions


async def test_arc_past_the_admission_policys_ceiling_is_refused_in_the_policys_words(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The API server runs the chart's own admission policy, rendered with a ceiling of 40 for
    the set, while the bot's settings give it 150: the bot lets +15 (minRunners 30 → 45)
    through, the API server denies it, and the person reads the policy's refusal and its fix,
    not RBAC's; +10, to 40, is made."""
    kube.add_from_fixture(minRunners=30, maxRunners=120)["status"]["currentRunners"] = 40
    target = {"target": "arc-runners/mt-l-x86iavx512-8-64", "cap": 20, "ceiling": 40}
    kube.admission = chart_policy({RUNNER: target})
    settings = arc_settings(settings_for, kube, tmp_path, scale_cooldown_seconds=0)
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        await post_event(running.http, slash(f"scale {RUNNER} +15"))
        [answer] = await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not scale" in t], what="told"
        )
        assert answer == (
            f"Could not scale `{RUNNER}`: The Kubernetes API answered 403 Forbidden: its "
            "admission policy queuepilot.queuepilot-scaler denied the change: queuepilot's "
            "ServiceAccount may set minRunners of arc-runners/mt-l-x86iavx512-8-64 only up to "
            "its ceiling, 40, not 45. Its ceilings are SCALER_TARGETS' `ceiling`s, as the chart "
            "rendered them; the bot's own (the same entries) should match. To go past one, or "
            "change a set no entry names, change SCALER_TARGETS and `helm upgrade`. Nothing "
            "changed."
        )
        assert kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]["spec"]["minRunners"] == 30
        assert not any("Scaled" in t for t in thread_texts(slack, root.ts))

        await post_event(running.http, slash(f"scale {RUNNER} +10"))
        await eventually(
            lambda: any(
                "minRunners 30 → 40 (maxRunners 120)" in t for t in thread_texts(slack, root.ts)
            ),
            what="the scale-up within the ceiling in the thread",
        )
        assert kube.sets[("arc-runners", "mt-l-x86iavx512-8-64")]["spec"]["minRunners"] == 40


async def test_arc_at_its_maximum_offers_raising_max_runners_within_the_ceiling(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=120)  # the fixture runs 120: at the max
    settings = arc_settings(settings_for, kube, tmp_path, scale_cooldown_seconds=0)
    async with run_bot(settings) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        blocks = json.dumps(form["blocks"], ensure_ascii=False)
        assert "at its maximum (120 runners)" in blocks and "Raise maxRunners" in blocks
        assert initial(form) == ("14", "raise_max"), "a raised floor would change nothing"
        assert "maxRunners is chosen (120 → 134): the scale set is at its maximum" in blocks

        # Reviewed, a raised floor is refused under the amount, as ARC would refuse it.
        step = await post_event(
            running.http, view_submission(form, form_values(RUNNER, "5", "raise_min"))
        )
        answer = step.json()
        assert answer["response_action"] == "errors"
        assert "raising minRunners changes nothing" in answer["errors"]["amount"]

        # Raising minRunners anyway is refused with the reason; nothing is patched.
        await post_event(running.http, slash(f"scale {RUNNER} +5"))
        await eventually(
            lambda: any("raising minRunners changes nothing" in t for t in ephemeral_texts(slack)),
            what="refused",
        )
        assert not kube.patches

        step = await post_event(
            running.http, view_submission(form, form_values(RUNNER, "20", "raise_max"))
        )
        confirm = step.json()["view"]
        assert "maxRunners 120 → 140" in json.dumps(confirm["blocks"], ensure_ascii=False)
        await post_event(running.http, view_submission({**confirm, "id": form["id"]}, {}))
        await eventually(lambda: kube.patches, what="patched")
        assert kube.patches[0][2]["spec"] == {"maxRunners": 140}
        # ARC takes it on (its writes meanwhile would make the next patch a 409, read again).
        await eventually(kube.reacted, what="ARC took maxRunners 140 on")

        # The command can raise the ceiling too: 140 → 145.
        await post_event(running.http, slash(f"scale {RUNNER} +5 max"))
        await eventually(lambda: len(kube.patches) == 2, what="patched by the command")
        assert kube.patches[1][2]["spec"] == {"maxRunners": 145}
        await eventually(lambda: kube.reacted(times=2), what="ARC took maxRunners 145 on")

        # Past the ceiling (150): refused at review with the ceiling named, nothing patched.
        step = await post_event(
            running.http, view_submission(form, form_values(RUNNER, "15", "raise_max"))
        )
        answer = step.json()
        assert answer["response_action"] == "errors"
        assert "above the ceiling of 150" in answer["errors"]["amount"]
        assert len(kube.patches) == 2


async def test_hostile_modal_submissions_get_errors_or_a_clear_never_a_failure(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver
) -> None:
    """Any state and metadata under our callback IDs: answered 200 (errors, update or clear) or
    refused 400 when not in Slack's shape,
    nothing scaled without a valid confirmation, and the bot keeps serving."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.support.mutations import json_values, objects

    # No periodic job runs while Hypothesis draws (every five minutes here): APScheduler's jitter
    # draws from the `random` module on this loop's thread, which Hypothesis takes for a
    # strategy using it (HypothesisDeprecationWarning) when it lands mid-draw.
    quiet = webhook_settings(settings_for, receiver, status_tick_seconds=300)
    async with run_bot(quiet) as running:
        await open_incident(running, slack)
        answers: list[int] = []

        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            st.sampled_from(["incident_scale_modal", "incident_scale_confirm"]),
            objects,
            st.text(max_size=200) | st.builds(json.dumps, json_values),
        )
        def submit(callback: str, values: dict[str, Any], metadata: str) -> None:
            view = {
                "id": "V0FUZZ",
                "callback_id": callback,
                "private_metadata": metadata,
                "blocks": [],
            }
            body = view_submission(view, values)
            future = asyncio.run_coroutine_threadsafe(post_event(running.http, body), loop)
            answers.append(future.result(timeout=10).status_code)

        loop = asyncio.get_running_loop()
        await asyncio.to_thread(submit)
        # A state Slack never sends (values that are not objects of objects) reads as absent and
        # is answered under a field; what Bolt cannot read is a 400 from the boundary.
        assert set(answers) <= {200, 400} and 200 in answers, answers
        assert (await running.http.get("/healthz")).status_code == 200
        assert not receiver.accepted, "nothing confirmed, nothing scaled"


async def test_a_slow_kubernetes_api_leaves_the_next_step_in_time_with_capacity_unknown(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """A submitted scale form must be answered within Slack's 3 s: a capacity read that has not
    answered within its share of them is shown as unknown, rather than the modal left saying it
    took too long."""
    kube.add_from_fixture(minRunners=0, maxRunners=120)
    async with run_bot(arc_settings(settings_for, kube, tmp_path)) as running:
        root = await open_incident(running, slack)
        form = await open_form(running, slack, root)
        kube.get_delay_s = 5.0
        started = time.monotonic()
        step = await post_event(running.http, view_submission(form, form_values(RUNNER, "4")))
        took = time.monotonic() - started
        kube.get_delay_s = 0.0
    answer = step.json()
    assert took < 3.0, f"answered after {took:.1f} s"
    assert answer["response_action"] == "update", answer
    blocks = json.dumps(answer["view"]["blocks"], ensure_ascii=False)
    assert f"Scale *{RUNNER}* by *+4*" in blocks and "capacity unknown" in blocks, blocks
    assert not kube.patches


async def test_a_scaler_that_breaks_unexpectedly_leaves_the_type_free_to_scale(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure the backends do not classify (a bug) ends the attempt: the next person's
    scale-up of the type goes ahead, not refused as "just scaled" for the lock's lifetime."""
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        scaler = running.bot.core.scaling.scaler
        assert scaler is not None
        working, calls = scaler.scale, []

        async def broken_once(request: Any) -> Any:
            calls.append(request)
            if len(calls) == 1:
                raise RuntimeError("a bug in the scaler")
            return await working(request)

        monkeypatch.setattr(scaler, "scale", broken_once)
        await post_event(running.http, slash(f"scale {RUNNER} +2"))
        await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not tell whether" in t],
            what="the first request answered",
        )
        await post_event(running.http, slash(f"scale {RUNNER} +3"))
        await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "You scaled" in t], what="scaled"
        )
        assert not any("was just scaled" in t for t in ephemeral_texts(slack))
        assert [a["delta"] for a in receiver.accepted] == [3]
        await eventually(
            lambda: any("Scaled" in t for t in thread_texts(slack, root.ts)), what="the thread"
        )


async def test_a_confirmed_scale_up_whose_scaler_breaks_after_scaling_is_called_once_and_told(
    settings_for: Any, slack: Slack, receiver: ScaleReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scaler adds the runners, then fails in a way no backend classifies (a bug). From the
    confirmed Scale up… form (performed from the requests stream, which retries what raises) it
    is called once; the person is told it may have scaled and to look before asking again; the
    next person's scale-up is not refused as "just scaled"."""
    async with run_bot(webhook_settings(settings_for, receiver)) as running:
        root = await open_incident(running, slack)
        scaler = running.bot.core.scaling.scaler
        assert scaler is not None
        working, calls = scaler.scale, []

        async def scales_then_breaks(request: Any) -> Any:
            calls.append(request)
            result = await working(request)
            if len(calls) == 1:
                raise RuntimeError("a bug in the scaler, after it scaled")
            return result

        monkeypatch.setattr(scaler, "scale", scales_then_breaks)
        form = await open_form(running, slack, root)
        step = await post_event(running.http, view_submission(form, form_values(RUNNER, "2")))
        confirm = {**step.json()["view"], "id": form["id"]}
        assert (await post_event(running.http, view_submission(confirm, {}))).status_code == 200
        [told] = await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "Could not tell whether" in t],
            what="the person told",
        )
        assert "It may have been: look at its scale set or group before asking again" in told

        async def done() -> bool:
            return await running.bot.request_stream.backlog() == 0

        await eventually(done, what="the confirmation done")
        assert len(calls) == 1 and len(receiver.accepted) == 1, "called once, not retried"

        other = {**confirm, "id": "V0OTHER"}  # the next person's form
        await post_event(running.http, view_submission(other, {}))
        await eventually(
            lambda: [t for t in ephemeral_texts(slack) if "You scaled" in t], what="scaled"
        )
        assert not any("was just scaled" in t for t in ephemeral_texts(slack))
        assert len(calls) == 2
