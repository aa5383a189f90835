"""Live queue metrics end to end: a real bot reading a real `prometheus` that scrapes ARC
listeners, or a HUD over HTTP, with Slack emulated: per-type numbers, the chart, the queue
draining, the incident resolving itself; a series that vanishes, and a backend that fails, which
never close anything."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.fakes.hud_api import FakeHud
from tests.support.payloads import FIXTURES, fixture_json
from tests.support.running import eventually, read_after, run_bot
from tests.support.servers import free_port
from tests.support.slack import CHANNEL, Slack

FIRING, RESOLVED = "grafana/queue-alert-firing.json", "grafana/queue-alert-resolved.json"
HUD_ROWS = FIXTURES / "backends" / "hud"
# What comes from live readings waits for Prometheus's first scrapes and a rate over two of them:
# seconds when quiet, past 30 s in a suite's run beside two busy loops (as the first chart).
LIVE_S = 120
AGGREGATE = "queued_jobs_aggregate"
GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "lf.linux.2xlarge"


@pytest.fixture
def hud() -> Iterator[tuple[FakeHud, RunningServer]]:
    fake = FakeHud()
    fake.rows[AGGREGATE] = json.loads((HUD_ROWS / f"{AGGREGATE}.json").read_text())
    server = serve_in_thread(fake.app)
    try:
        yield fake, server
    finally:
        server.stop()


def status_replies(slack: Slack, root_ts: str) -> list[Any]:
    return [m for m in slack.emulator.thread(CHANNEL, root_ts)[1:] if "Status update" in m.text]


async def resolved_on_drain(thread: Callable[[], list[Any]]) -> Any:
    """The root resolved by the drain rule (no resolved notification came), then its summary."""
    await eventually(
        lambda: "Resolved" in text_of(thread()[0]) and "queue drained" in text_of(thread()[0]),
        what="the root resolved on drain",
        timeout=LIVE_S,
    )
    return await eventually(
        lambda: next((m for m in thread()[1:] if "Peak by runner type" in text_of(m)), None),
        what="the summary",
    )


def live(settings_for: Any, url: str | None, **overrides: Any) -> Any:
    values = {
        "metrics_backend": "prometheus",
        "prometheus_url": url,
        "prometheus_rate_window": "30s",
        "metrics_interval_seconds": 1,
        "status_interval_seconds": 1,
        "drain_checks": 2,
        "drain_check_seconds": 1,
        "status_chart_every": 1,
        **overrides,
    }
    return settings_for(**values)


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def test_live_numbers_a_chart_and_the_incident_closes_itself_on_drain(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    settings = live(settings_for, arc_fleet.prometheus.url, chart_style="image")
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()
        root_ts = thread()[0].ts

        # The alert names no runner type: the incident shows the type that queues, live.
        await eventually(
            lambda: any(
                "Status update" in text_of(m) and f"{QUEUEING}: *43* queued" in text_of(m)
                for m in thread()[1:]
            ),
            what="a status with the live queue",
            timeout=LIVE_S,
        )
        assert all(HEALTHY not in text_of(m) for m in thread()[1:]), "a healthy type stays out"
        await eventually(
            lambda: (
                "live from Prometheus" in text_of(thread()[0])
                and "busy 120/120" in text_of(thread()[0])
            ),
            what="the root showing the live queue",
        )

        # The queue drains: the incident resolves itself, with no resolved notification.
        arc_fleet.queueing.set(assigned_jobs=120)
        summary = await resolved_on_drain(thread)
        # A steady queue posts one status, edited in place: its chart goes as a picture with the
        # summary, uploaded into the thread with files.upload v2, a PNG of the promised size.
        chart = await eventually(
            lambda: next((m for m in thread()[1:] if m.files), None), what="a chart", timeout=LIVE_S
        )
        data = slack.emulator.file_bytes(chart.files[0]["id"])
        assert data is not None and data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (800, 450)
        reserve = slack.emulator.calls("files.getUploadURLExternal")[-1]
        assert "queued from" in str(reserve.params.get("alt_txt", ""))

        assert f"{QUEUEING}: 43 queued" in text_of(summary)
        assert "(queue drained)" in text_of(summary)

        async def applied_and_sent() -> bool:
            bot = running.bot
            return await bot.stream.backlog() == 0 and await bot.queue.waiting(CHANNEL) == 0

        # The thread as the resolve left it: the summary's picture comes after the summary.
        await eventually(applied_and_sent, what="the resolve's replies sent")
        settled = [(m.ts, m.edits) for m in thread()]

        # A later resolved notification for it changes nothing.
        response = await running.send("grafana", fixture_json(RESOLVED))
        assert response.status_code == 202
        await eventually(applied_and_sent, what="the resolved notification applied")
        incident_id = await running.bot.core.incident_of_message(CHANNEL, root_ts)
        assert incident_id is not None
        assert await running.bot.store.status_due.due_at(incident_id) is None
        assert [m.ts for m in thread()] == [ts for ts, _ in settled]


async def test_the_root_follows_each_reading_between_statuses(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    """Statuses ten minutes apart, readings every second: the root shows the newest reading (the
    moment `/queue` and the forms show) without a reply for it."""
    settings = live(settings_for, arc_fleet.prometheus.url, status_interval_seconds=600)
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()

        await eventually(
            lambda: f"{QUEUEING}: *43* queued" in text_of(thread()[0]),
            what="the root with the live queue",
            timeout=LIVE_S,
        )
        replies = len(thread()) - 1
        arc_fleet.queueing.set(assigned_jobs=140)  # 20 queued on 120 busy runners
        await eventually(
            lambda: f"{QUEUEING}: *20* queued" in text_of(thread()[0]),
            what="the root following the next reading",
            timeout=LIVE_S,
        )
        assert len(thread()) - 1 == replies, "no reply for a reading between statuses"


async def test_an_alert_naming_linux_2xlarge_shows_the_numbers_of_scale_set_linux_2xlarge(
    settings_for: Any, slack: Slack
) -> None:
    """Real scale sets are named as Helm releases are (`linux-2xlarge`); the alert says the
    runs-on label (`linux.2xlarge`). Nothing configured: the incident still finds its numbers."""
    fleet = ArcFleet(names=("linux-2xlarge", "linux-4xlarge"))
    payload = fixture_json(FIRING)
    payload["alerts"][0]["labels"]["runner_type"] = "linux.2xlarge"
    try:
        async with run_bot(live(settings_for, fleet.prometheus.url)) as running:
            await running.send("grafana", payload)
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
            shown = await eventually(
                lambda: next(
                    (
                        text_of(m)
                        for m in status_replies(slack, roots[0].ts)
                        if "linux.2xlarge: *43* queued" in text_of(m)
                    ),
                    None,
                ),
                what="a status with the scale set's live queue",
                timeout=LIVE_S,
            )
    finally:
        fleet.stop()
    assert "linux-2xlarge" not in shown, "one name for one type: the alert's"
    assert "linux-4xlarge" not in shown, "a healthy type stays out"


async def test_an_alert_naming_a_scale_set_runner_scale_sets_maps_is_one_type_with_its_reading(
    settings_for: Any, slack: Slack
) -> None:
    """The example rule on ARC's metrics names the scale set (`gpu-a10g`); RUNNER_SCALE_SETS
    says it serves `linux.g5.4xlarge.nvidia.gpu`, the name the readings then carry. The incident
    shows one type with its live numbers, not "none of the alert's runner types is in the
    reading"."""
    gpu = "linux.g5.4xlarge.nvidia.gpu"
    fleet = ArcFleet(names=("gpu-a10g", "linux-4xlarge"))
    payload = fixture_json(FIRING)
    payload["alerts"][0]["labels"]["runner_type"] = "gpu-a10g"
    settings = live(
        settings_for, fleet.prometheus.url, runner_scale_sets=f'{{"{gpu}": "gpu-a10g"}}'
    )
    try:
        async with run_bot(settings) as running:
            await running.send("grafana", payload)
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
            shown = await eventually(
                lambda: next(
                    (
                        text_of(m)
                        for m in status_replies(slack, roots[0].ts)
                        if f"{gpu}: *43* queued" in text_of(m)
                    ),
                    None,
                ),
                what="a status with the mapped scale set's live queue",
                timeout=LIVE_S,
            )
    finally:
        fleet.stop()
    assert "gpu-a10g" not in shown, "one name for one type"
    assert "none of the alert's runner types" not in shown


async def test_a_failing_backend_says_so_and_never_closes_the_incident(
    settings_for: Any, slack: Slack
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with run_bot(live(settings_for, dead)) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

        def statuses() -> list[Any]:
            return status_replies(slack, roots[0].ts)

        # Several checks later (edits of a quiet status count): still open, on the alert's numbers.
        await eventually(
            lambda: sum(1 + m.edits for m in statuses()) >= 4, what="four statuses", timeout=LIVE_S
        )
        shown = text_of(statuses()[-1])
        assert "Prometheus is unreachable" in shown and "these are the alert" in shown
        assert "Longest wait: *114 min*" in shown
        assert "Resolved" not in text_of(slack.emulator.channel_messages(CHANNEL)[0])


async def test_queue_shows_the_live_queue_with_no_incident_open(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    from tests.support.slack import ephemeral_texts, post_event, slash

    async with run_bot(live(settings_for, arc_fleet.prometheus.url)) as running:

        async def answered() -> str | None:
            before = len(ephemeral_texts(slack))
            response = await post_event(running.http, slash(""))
            assert response.status_code == 200
            texts = await eventually(
                lambda: ephemeral_texts(slack)[before:], what="the answer", timeout=15
            )
            # Until prometheus has scraped both listeners, ask again.
            return (
                texts[0] if f"{QUEUEING}: *43* queued" in texts[0] and HEALTHY in texts[0] else None
            )

        text = await eventually(answered, what="the live queue", timeout=LIVE_S)
    assert "live from Prometheus" in text
    # Worst first: the queueing type before the healthy one, each with its runners.
    assert text.index(QUEUEING) < text.index(HEALTHY)
    assert "busy 120/120" in text and "busy 17/19" in text
    assert "No open incidents." in text


async def test_with_the_hud_the_incident_closes_itself_once_its_labels_leave_the_answer(
    settings_for: Any, slack: Slack, hud: tuple[FakeHud, RunningServer]
) -> None:
    fake, server = hud
    settings = live(
        settings_for, None, metrics_backend="hud", hud_url=server.url, hud_token=fake.token
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

        def thread() -> list[Any]:
            return slack.emulator.thread(CHANNEL, roots[0].ts)

        def shown(text: str) -> bool:
            return any(text in text_of(m) for m in thread()[1:])

        await eventually(
            lambda: shown(f"{GPU}: *17* queued") and shown(f"{CPU}: *37* queued"),
            what="a status with the HUD's queue",
            timeout=LIVE_S,
        )
        # CPU's jobs got runners: the HUD answers without its label. GPU still queues.
        fake.rows[AGGREGATE] = [r for r in fake.rows[AGGREGATE] if r["runner_label"] != CPU]
        # Said as the HUD said it: it lists jobs queued over 5 minutes, and none of CPU's. The
        # root follows each reading (a status reply for it waits a minute after the last).
        await eventually(
            lambda: f"{CPU}: none queued over 5 min" in text_of(thread()[0]),
            what="CPU drained",
            timeout=LIVE_S,
        )
        assert "Resolved" not in text_of(thread()[0])
        # Nothing queues any more: the HUD answers `[]`, and the incident resolves on its own.
        fake.rows[AGGREGATE] = []
        summary = await resolved_on_drain(thread)
        assert f"{CPU}: 37 queued" in text_of(summary)
        # Never "missing", never the alert's numbers standing in for an empty answer.
        said = " ".join(text_of(m) for m in thread())
        assert "no numbers for" not in said and "these are the alert" not in said


@pytest.mark.slow
async def test_with_a_hud_threshold_past_the_drain_limit_an_empty_answer_closes_nothing(
    settings_for: Any, slack: Slack, hud: tuple[FakeHud, RunningServer]
) -> None:
    """Asked for jobs queued over 30 minutes, the HUD's empty answer allows a job queued 29: it
    is said so, and the incident stays open (`serve` refuses this setting; a bot run without
    that check must still not close anything)."""
    fake, server = hud
    settings = live(
        settings_for,
        None,
        metrics_backend="hud",
        hud_url=server.url,
        hud_token=fake.token,
        hud_parameters={"queuedThresholdMinutes": 30},
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

        def statuses() -> list[Any]:
            return status_replies(slack, roots[0].ts)

        def shown(text: str) -> bool:
            return any(text in text_of(m) for m in statuses())

        await eventually(
            lambda: shown(f"{GPU}: *17* queued"), what="the HUD's queue", timeout=LIVE_S
        )
        aggregate = [params for name, params in fake.asked if name == AGGREGATE]
        assert aggregate[-1]["queuedThresholdMinutes"] == 30
        fake.rows[AGGREGATE] = []

        def root() -> str:
            return text_of(slack.emulator.channel_messages(CHANNEL)[0])

        # The root follows each reading (a status reply for it waits a minute after the last).
        await eventually(
            lambda: (
                f"{GPU}: none queued over 30 min" in root()
                and f"{CPU}: none queued over 30 min" in root()
            ),
            what="the empty answer said as the HUD said it",
            timeout=LIVE_S,
        )

        def readings() -> int:
            return sum(1 for name, _ in fake.asked if name == AGGREGATE)

        # Five more readings of the empty answer, each checked by a status a second apart:
        # drained, it would have resolved after DRAIN_CHECKS (2). Still open.
        seen = readings()
        await eventually(
            lambda: "Resolved" in root() or readings() >= seen + 5,
            what="five more readings",
            timeout=LIVE_S,
        )
        assert "Resolved" not in root()


async def test_with_prometheus_a_vanished_series_blocks_the_drain(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    async with run_bot(live(settings_for, arc_fleet.prometheus.url)) as running:
        await running.send("grafana", fixture_json(FIRING))
        roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

        def statuses() -> list[Any]:
            return status_replies(slack, roots[0].ts)

        await eventually(
            lambda: any(f"{QUEUEING}: *43* queued" in text_of(m) for m in statuses()),
            what="a status with the live queue",
            timeout=LIVE_S,
        )
        # The queueing set's listener is recreated: it serves no series while it comes back.
        # Its queue may be long: the incident must not read that as drained.
        with arc_fleet.queueing.lock:
            arc_fleet.queueing.gauges.clear()

        def root() -> str:
            return text_of(slack.emulator.channel_messages(CHANNEL)[0])

        # The root follows each reading (a status reply for it may wait a minute after the last).
        await eventually(
            lambda: f"no numbers for {QUEUEING}" in root(),
            what="the root saying the type is missing",
            timeout=LIVE_S,
        )
        # Drained would resolve after two checks a second apart: four readings later, still open.
        missing = (await running.bot.readings.stored()).tried_at
        await eventually(
            lambda: read_after(running, missing + timedelta(seconds=4)),
            what="four more readings",
        )
        assert "Resolved" not in root()
