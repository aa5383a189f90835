"""The trend drawn by Slack: a real bot reading a real `prometheus` scraping ARC listeners, Slack
emulated with its limits for the `data_visualization` block. By default the chart is a block in
every status and the summary, edited in place with them; a workspace that refuses the block gets
the message without it at once, and pictures from then on. Slack's refusal names the block it
refused (`response_metadata.messages`, "[ERROR] … [json-pointer:/blocks/3/type]"): the chart is
dropped when that block is the chart, and kept when it is another."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx

from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, direction_known, eventually, run_bot
from tests.support.slack import Slack

FIRING = "grafana/queue-alert-firing.json"
# The first chart needs Prometheus's first scrapes of both listeners, a rate over two of them
# and two statuses: ~8 s on a loaded 2-core machine, once past 30 s in a whole suite's run, and
# once past 60 s in a suite's run beside two busy loops (0.25's stressed runs).
FIRST_CHART_S = 120


def settings(settings_for: Any, url: str, **overrides: Any) -> Any:
    return settings_for(
        metrics_backend="prometheus",
        prometheus_url=url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=1,
        drain_checks=2,
        drain_check_seconds=1,
        status_chart_every=1,
        **overrides,
    )


async def first_chart(
    running: RunningBot, arc_fleet: ArcFleet, check: Any, what: str, thread: Any
) -> Any:
    """Wait for the first chart; when it does not come, say where the chain from the listeners
    to the status stopped: the scrapes, the bot's reading, the thread."""
    try:
        return await eventually(check, what=what, timeout=FIRST_CHART_S)
    except AssertionError as exc:
        async with httpx.AsyncClient(base_url=arc_fleet.prometheus.url, timeout=5) as prometheus:
            targets = (await prometheus.get("/api/v1/targets")).json()["data"]["activeTargets"]
        scrapes = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in targets]
        reading = await running.bot.readings.stored()
        said = reading and (
            reading.error or sorted(reading.fleet.runner_types if reading.fleet else [])
        )
        texts = [m.text[:80] for m in thread()]
        raise AssertionError(f"{exc}: scrapes {scrapes}; reading {said}; thread {texts}") from exc


def charts_in(message: Any) -> list[dict[str, Any]]:
    return [b for b in message.blocks if b.get("type") == "data_visualization"]


def chart_index(blocks: list[dict[str, Any]]) -> int:
    [index] = [i for i, b in enumerate(blocks) if b.get("type") == "data_visualization"]
    return index


def holds_chart(params: dict[str, Any]) -> bool:
    blocks = params.get("blocks")
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and b.get("type") == "data_visualization" for b in blocks
    )


def series_of(message: Any) -> dict[str, list[float]]:
    [chart] = charts_in(message)
    return {s["name"]: [p["value"] for p in s["data"]] for s in chart["chart"]["series"]}


async def test_slack_draws_the_trend_inside_the_statuses_and_the_summary(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    async with run_bot(settings(settings_for, arc_fleet.prometheus.url)) as running:
        await direction_known(running)
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()

        # A status whose chart has a line for the queueing type, at two moments or more.
        status = await first_chart(
            running,
            arc_fleet,
            lambda: next(
                (m for m in thread()[1:] if charts_in(m) and QUEUEING[:9] in str(charts_in(m))),
                None,
            ),
            "a status with the chart block",
            thread,
        )
        assert "Status update" in status.text
        [values] = [v for name, v in series_of(status).items() if name.startswith(QUEUEING[:9])]
        assert len(values) >= 2 and values[-1] == 43
        # The numbers stay put: the next statuses are quiet and edit this one, chart and all.
        await eventually(
            lambda: any(m.ts == status.ts and m.edits >= 1 for m in thread()), what="an edit"
        )

        arc_fleet.queueing.set(assigned_jobs=120)
        summary = await eventually(
            lambda: next(
                (m for m in thread()[1:] if "Peak by runner type" in m.text + str(m.blocks)), None
            ),
            what="the summary",
            timeout=30,
        )
        if not charts_in(summary):
            # The summary leaves the chart out only when the status shown last drew this very
            # trend (a quiet status edited to the last reading before the resolve, under load).
            last = [m for m in thread()[1:] if "Status update" in m.text][-1]
            assert charts_in(last), "the summary or the status before it carries the chart"
    # Drawn by Slack: nothing was uploaded, and Slack refused nothing.
    assert not slack.emulator.calls("files.getUploadURLExternal")
    assert all(c.ok for c in slack.emulator.calls("chat.postMessage"))
    assert all(not m.files for m in thread())


async def test_a_workspace_that_refuses_the_block_gets_the_message_without_it_and_pictures(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    slack.emulator.chart_blocks = False  # as a workspace that does not take the block
    async with run_bot(settings(settings_for, arc_fleet.prometheus.url)) as running:
        await direction_known(running)
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()
        # A steady queue posts one status, edited in place; a picture goes with a new status
        # or the summary: the queue drains.
        await eventually(
            lambda: (
                any("Status update" in m.text for m in thread()[1:])
                and "43 queued" in thread()[0].text
            ),
            what="the first status, and the root with the live queue",
            timeout=FIRST_CHART_S,
        )
        arc_fleet.queueing.set(assigned_jobs=120)
        picture = await first_chart(
            running,
            arc_fleet,
            lambda: next((m for m in thread()[1:] if m.files), None),
            "the chart as a picture",
            thread,
        )
        assert picture.files[0]["name"].endswith(".png")
        statuses = [m for m in thread()[1:] if "Status update" in m.text]
        assert statuses and not any(charts_in(m) for m in statuses)
        # The first chart may come in a status's post or in a quiet status's edit (it needs two
        # readings; the first status may go out before them), and a post and an edit drawn
        # before the refusal may both be in flight: refused, but never twice the same way.
        refused = Counter(c.method for c in slack.emulator.calls() if c.error == "invalid_blocks")
        assert refused, "the workspace refused the block"
        # Once refused, every replica knows: no status is refused twice.
        assert max(refused.values()) == 1, refused
        assert await running.bot.redis.exists(running.bot.store.keys.chart_blocks_refused)
    # What the bot was told, each time: Slack's refusal pointing at the chart block by its index.
    told = [c for c in slack.emulator.calls() if c.error == "invalid_blocks"]
    assert told
    for call in told:
        at = chart_index(call.params["blocks"])
        assert call.refusal["response_metadata"]["messages"] == [
            f"[ERROR] unsupported type: data_visualization [json-pointer:/blocks/{at}/type]"
        ]


async def test_a_refusal_naming_another_block_keeps_the_chart(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    """Slack refuses a status for its first block, a section: the chart is not to blame, so the
    status goes out as a new reply with its chart block, and the statuses go on drawing it; no
    picture takes its place."""
    first_block = [
        "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/0/text]",
        "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]",
    ]
    async with run_bot(settings(settings_for, arc_fleet.prometheus.url)) as running:
        await direction_known(running)
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()
        await first_chart(
            running,
            arc_fleet,
            lambda: next((m for m in thread()[1:] if charts_in(m)), None),
            "a status with the chart block",
            thread,
        )
        shown = {m.ts for m in thread()}
        # The quiet statuses edit that one: Slack refuses the next edit that holds a chart.
        slack.emulator.fail_next(
            "chat.update",
            status=200,
            error="invalid_blocks",
            messages=first_block,
            when=holds_chart,
        )
        refused = await eventually(
            lambda: next((c for c in slack.emulator.calls("chat.update") if not c.ok), None),
            what="the refused edit",
        )
        reposted = await eventually(
            lambda: next((m for m in thread()[1:] if m.ts not in shown), None),
            what="the status posted again",
        )
        assert "Status update" in reposted.text and charts_in(reposted)
        # The next status, the chart still a block: a quiet one edits the new reply, one whose
        # numbers moved is a reply of its own (the fleet's queue keeps changing).
        later = await eventually(
            lambda: next(
                (
                    m
                    for m in thread()[1:]
                    if (m.ts == reposted.ts and m.edits) or float(m.ts) > float(reposted.ts)
                ),
                None,
            ),
            what="the next status",
            timeout=30,
        )
        assert charts_in(later)
    assert refused.refusal["response_metadata"]["messages"] == first_block
    assert refused.params["blocks"][0]["type"] == "section" and holds_chart(refused.params)
    assert not any(m.files for m in thread()), "no picture in place of the block"
    assert not slack.emulator.calls("files.getUploadURLExternal")


async def test_a_summary_after_the_alert_resolved_has_its_picture_where_the_block_is_refused(
    settings_for: Any, slack: Slack, arc_fleet: ArcFleet
) -> None:
    """The summary carries the chart as a block; where the block is refused (or with
    CHART_STYLE=image) it must come as a picture, also when the alert's own `resolved` ends the
    incident rather than the drain."""
    slack.emulator.chart_blocks = False
    # Pictures with the summary only, so the one looked for is the summary's; the alert's resolve
    # ends the incident though jobs still queue (not followed until they drain).
    only_summary = settings(settings_for, arc_fleet.prometheus.url).model_copy(
        update={"status_chart_every": 0, "drain_follow_max": 0}
    )
    async with run_bot(only_summary) as running:
        await direction_known(running)
        await running.send("grafana", fixture_json(FIRING))
        thread = await slack.first_thread()
        refused = running.bot.store.keys.chart_blocks_refused
        await first_chart(
            running,
            arc_fleet,
            lambda: running.bot.redis.exists(refused),
            "a status with a trend to draw, its block refused",
            thread,
        )
        await running.send("grafana", fixture_json("grafana/queue-alert-resolved.json"))
        summary = await eventually(
            lambda: next((m for m in thread()[1:] if " resolved after " in m.text), None),
            what="the summary",
            timeout=30,
        )
        picture = await eventually(
            lambda: next((m for m in thread()[1:] if m.files), None),
            what="the summary's chart as a picture",
        )
        assert picture.files[0]["name"].endswith(".png")
        assert thread().index(picture) > thread().index(summary), "the summary's, after it"
        assert not any(m.files for m in thread()[1 : thread().index(summary)])
