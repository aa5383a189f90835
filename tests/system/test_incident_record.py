"""The incident's record, end to end: a bot reading a scripted queue from the HUD (its
`queued_jobs_aggregate`, rows the test sets), the Slack emulator, a real Redis. The summary's peak
is the most the root and the statuses showed, the alert's own figure included; the postmortem
shared in the thread shows the queue at its peak and as the drain left it, the scale-up that was
refused, and carries no invisible character."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.hud_api import FakeHud
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.scale import webhook_settings
from tests.support.slack import CHANNEL, USER, Slack, ephemeral_texts, post_event, slash

AGGREGATE = "queued_jobs_aggregate"
GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.4xlarge"
BOB = "U0BOB"  # bob, in the channel, not allowed to scale


def row(runner_type: str, queued: int, wait_mins: int) -> dict[str, Any]:
    """One HUD row: `queued` jobs of `runner_type` queued over the query's 30 minutes."""
    return {
        "runner_label": runner_type,
        "org": "pytorch",
        "repo": "pytorch",
        "num_queued_jobs": queued,
        "min_queue_time_minutes": 30,
        "max_queue_time_minutes": wait_mins,
    }


@pytest.fixture
def hud() -> Iterator[FakeHud]:
    fake = FakeHud()
    fake.rows[AGGREGATE] = []  # nothing read yet: the root shows the alert's numbers
    fake.rows["queued_jobs"] = []  # the jobs behind the queue, none listed
    server: RunningServer = serve_in_thread(fake.app)
    fake.url = server.url  # type: ignore[attr-defined]
    try:
        yield fake
    finally:
        server.stop()


def live_settings(settings_for: Any, hud: FakeHud, receiver: ScaleReceiver) -> Any:
    """Read every second, a status every second, resolved after two drained checks."""
    return webhook_settings(
        settings_for,
        receiver,
        scaler_targets=json.dumps({GPU: {"target": "gpu-pool", "cap": 10}}),
        metrics_backend="hud",
        hud_url=hud.url,  # type: ignore[attr-defined]
        hud_token=hud.token,
        metrics_interval_seconds=1,
        status_interval_seconds=1,
        drain_checks=2,
        drain_check_seconds=1,
    )


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


def thread(slack: Slack) -> list[Any]:
    roots = slack.emulator.channel_messages(CHANNEL)
    return slack.emulator.thread(CHANNEL, roots[0].ts)[1:] if roots else []


def said(slack: Slack, words: str) -> str | None:
    """The latest thread reply that says `words`."""
    found = [text_of(m) for m in thread(slack) if words in text_of(m)]
    return found[-1] if found else None


def on_root(slack: Slack, words: str) -> bool:
    """Whether the root says `words` now: it shows every reading, statuses only news."""
    roots = slack.emulator.channel_messages(CHANNEL)
    return bool(roots) and words in text_of(roots[0])


def root_posted(slack: Slack) -> str:
    """The root as first posted, before any edit."""
    [call] = [c for c in slack.emulator.calls("chat.postMessage") if "thread_ts" not in c.params]
    return str(call.params.get("blocks")) + str(call.params.get("text"))


async def drained(hud: FakeHud, slack: Slack) -> str:
    hud.rows[AGGREGATE] = []
    return await eventually(
        lambda: said(slack, "resolved after"), what="resolved by the drain", timeout=30
    )


async def test_the_summarys_peak_is_the_alerts_figure_the_root_showed_above_every_reading(
    settings_for: Any, slack: Slack, hud: FakeHud, receiver: ScaleReceiver
) -> None:
    """The root shows the alert's 14 queued before any reading; the readings then sum 9 across
    the types, and the queue drains. The summary's peak is the 14 people saw, said as the
    alert's; each type's peak is its own."""
    async with run_bot(live_settings(settings_for, hud, receiver)) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="the root")
        assert "Queued jobs: *14*" in root_posted(slack)

        hud.rows[AGGREGATE] = [row(GPU, 5, 40), row(CPU, 4, 35)]
        await eventually(
            lambda: "Queued jobs: *9*" in text_of(slack.emulator.channel_messages(CHANNEL)[0]),
            what="the root on the reading",
            timeout=30,
        )
        summary = await drained(hud, slack)
    assert "Peak queued jobs (as the alert said): *14*" in summary, summary
    assert "Peak longest wait: *114 min*" in summary, "the alert's wait, the longest shown"
    assert f"{GPU}: 5 queued" in summary and f"{CPU}: 4 queued" in summary


async def shared_file(running: RunningBot, slack: Slack) -> str:
    roots = slack.emulator.channel_messages(CHANNEL)
    await post_event(running.http, slash("postmortem 1"))

    def files() -> list[str]:
        texts = []
        for message in slack.emulator.thread(CHANNEL, roots[0].ts):
            for file in message.files:
                texts.append((slack.emulator.file_bytes(file["id"]) or b"").decode())
        return texts

    [markdown] = await eventually(files, what="the postmortem file", timeout=30)
    return markdown


async def test_the_postmortem_shows_the_queue_at_its_peak_the_refusal_and_nothing_invisible(
    settings_for: Any, slack: Slack, hud: FakeHud, receiver: ScaleReceiver
) -> None:
    alert = fixture_json("grafana/queue-alert-firing.json")
    title = "Jobs queueing for #12 @here\u200b\u202e"  # GitHub would link the first two
    for labels in (alert["groupLabels"], alert["commonLabels"]):
        labels["alertname"] = title
    async with run_bot(live_settings(settings_for, hud, receiver)) as running:
        await running.send("grafana", alert)
        await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="the root")
        hud.rows[AGGREGATE] = [row(GPU, 30, 40), row(CPU, 6, 35)]
        await eventually(lambda: on_root(slack, "Queued jobs: *36*"), what="the root", timeout=30)

        refused = slash(f"scale {GPU} +2").replace(f"user_id={USER}", f"user_id={BOB}")
        await post_event(running.http, refused)
        await eventually(
            lambda: any("not allowed to scale" in t for t in ephemeral_texts(slack)),
            what="bob told he may not scale",
        )
        hud.rows[AGGREGATE] = [row(GPU, 3, 31)]
        await eventually(lambda: on_root(slack, "Queued jobs: *3*"), what="the root", timeout=30)
        await drained(hud, slack)
        markdown = await shared_file(running, slack)

    assert not receiver.raw, "the refused scale-up called nothing"
    # The queue at its height, not as the drain left it; then where it was left.
    assert "The queue at its peak, " in markdown, markdown
    assert f"| {GPU} | 30 | longest wait 40 min | 30 | longest wait 40 min |" in markdown
    assert f"| {CPU} | 6 | longest wait 35 min | 6 | longest wait 35 min |" in markdown
    last = markdown.split("The last reading, ")[1].split("\n\n", 2)[1]
    assert f"| {GPU} | 0 | – |" in last, last
    # The refused request is on the record, not among the actions taken.
    assert f"| Scale-up of {GPU} by +2 refused: You are not allowed to scale runners" in markdown
    assert "| Requests refused | 1, by bob |" in markdown
    assert "| Actions taken |" not in markdown
    # Escaped for Markdown, with nothing invisible: no word joiner (GitHub's alone), no
    # zero-width space, no bidirectional override.
    assert "for \\#12 \\@here" in markdown
    invisible = [hex(ord(c)) for c in markdown if unicodedata.category(c) == "Cf"]
    assert invisible == []
