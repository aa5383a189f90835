"""The trend as Slack's `data_visualization` line chart: always within Slack's limits (checked by
the emulator's own validator, which follows Slack's reference page), showing what the picture
shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.trend import Trend
from bot.domain.message import Rendered
from bot.render.chart import (
    ChartData,
    blames_charts,
    chart_block,
    chart_data,
    has_charts,
    series_labels,
    without_charts,
)
from sandbox.slack_limits import validate_blocks

START = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"


def trend_of(points: list[tuple[float, dict[str, float | None]]]) -> Trend:
    trend = Trend()
    for minute, queues in points:
        shown = {name: RunnerQueue(queued=q, longest_wait_mins=1.0) for name, q in queues.items()}
        at = START + timedelta(minutes=minute)
        trend = trend.appended(at, None, shown, limit=1000)
    return trend


def test_queued_jobs_per_runner_type_at_each_moment() -> None:
    trend = trend_of([(0, {"linux.2xlarge": 3, GPU: 1}), (5, {"linux.2xlarge": 9}), (10, {GPU: 4})])
    block = chart_block(chart_data("Queue trend · incident 7", trend, worst=[GPU, "linux.2xlarge"]))
    assert block is not None and validate_blocks([block]) == []
    chart = block["chart"]
    assert chart["type"] == "line"
    assert chart["axis_config"]["categories"] == ["08:00", "08:05", "08:10"]
    by_name = {s["name"]: [p["value"] for p in s["data"]] for s in chart["series"]}
    # A long runner type keeps its leading parts, then its last, within Slack's 20 characters,
    # no part cut; a moment whose reading did not show a type has it at 0 (not queueing then).
    assert by_name == {"linux.g5.4xlarge…gpu": [1, 0, 4], "linux.2xlarge": [3, 9, 0]}
    assert block["title"] == "Queue trend · incident 7"


def test_a_long_incident_is_shown_at_twenty_moments_ending_with_the_latest() -> None:
    trend = trend_of([(minute, {"a": float(minute)}) for minute in range(0, 300, 5)])
    block = chart_block(chart_data("t", trend, worst=["a"]))
    assert block is not None and validate_blocks([block]) == []
    [series] = block["chart"]["series"]
    values = [p["value"] for p in series["data"]]
    assert len(values) == 20 and values[0] == 0 and values[-1] == 295
    assert values == sorted(values)


def test_moments_within_one_minute_are_told_apart_by_their_seconds() -> None:
    trend = trend_of([(0, {"a": 1}), (0.25, {"a": 2}), (0.5, {"a": 3})])
    block = chart_block(chart_data("t", trend, worst=["a"]))
    assert block is not None
    assert block["chart"]["axis_config"]["categories"] == ["08:00:00", "08:00:15", "08:00:30"]


def test_nothing_to_draw_is_no_block() -> None:
    assert chart_block(ChartData("t")) is None
    assert chart_block(chart_data("t", trend_of([(0, {"a": 1})]), worst=["a"])) is None


def test_the_sender_can_take_the_chart_out() -> None:
    trend = trend_of([(0, {"a": 1}), (5, {"a": 2})])
    block = chart_block(chart_data("t", trend, worst=["a"]))
    assert block is not None
    message = Rendered("status", [{"type": "divider"}, block])
    assert has_charts(message) and not has_charts(without_charts(message))
    assert without_charts(message).blocks == [{"type": "divider"}]


NAMES = st.text(min_size=0, max_size=60)
QUEUES = st.dictionaries(NAMES, st.none() | st.floats(0, 1e9, allow_nan=False), max_size=8)


@pytest.mark.parametrize(
    ("names", "labels"),
    [
        # PyTorch's fleet: the size that tells two GPU types apart stays in the legend.
        (
            [
                "linux.g5.4xlarge.nvidia.gpu",
                "linux.g5.48xlarge.nvidia.gpu",
                "linux.2xlarge",
                "linux.rocm.gpu.2",
                "windows.4xlarge.nonephemeral",
            ],
            [
                "linux.g5.4xlarge…gpu",
                "linux.g5.48xlarge…",
                "linux.2xlarge",
                "linux.rocm.gpu.2",
                "windows.4xlarge…",
            ],
        ),
        # Types alike at the start keep their last parts too.
        (
            ["linux.idc.xpu.nightly.pool.a", "linux.idc.xpu.nightly.pool.b"],
            ["linux.idc.xpu…pool.a", "linux.idc.xpu…pool.b"],
        ),
        # Alike at the start and in as much of the end as fits: their ends alone.
        (
            ["linux.idc.xpu.nightly.a.longpoolname", "linux.idc.xpu.nightly.b.longpoolname"],
            ["…a.longpoolname", "…b.longpoolname"],
        ),
        # A name with no dot to cut at is cut plainly; alike at both ends, a number parts them.
        (["x" * 30, "x" * 31], ["xxxxxxxxxxxxxxxxxxx…", "xxxxxxxxxxxxxxxxx… 2"]),
    ],
    ids=["pytorch", "alike-at-the-start", "alike-at-both-ends", "alike-everywhere"],
)
def test_legend_names_say_which_runner_type(names: list[str], labels: list[str]) -> None:
    assert series_labels(names) == labels


@given(st.lists(st.text(alphabet="ab.x", max_size=40), min_size=1, max_size=20, unique=True))
def test_legend_names_fit_and_differ(names: list[str]) -> None:
    labels = series_labels(names)
    assert all(len(label) <= 20 for label in labels)
    assert len(set(labels)) == len(labels)


@settings(max_examples=150, deadline=None)
@given(
    moments=st.lists(
        st.tuples(st.floats(0, 10_000, allow_nan=False), QUEUES), min_size=0, max_size=60
    ),
    title=st.text(max_size=120),
)
def test_any_trend_gives_a_block_slack_takes(
    moments: list[tuple[float, dict[str, float | None]]], title: str
) -> None:
    trend = trend_of(sorted(moments, key=lambda m: m[0]))
    block = chart_block(chart_data(title, trend, worst=sorted(trend.names())))
    if block is not None:
        assert validate_blocks([block]) == [], block


@pytest.mark.parametrize(
    ("details", "blamed"),
    [
        # Slack points at the chart: a workspace that does not take the block.
        (["[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"], True),
        # It points at another block: the chart is not the problem, pictures would not help.
        (["[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text]"], False),
        # One of several problems is the chart's.
        (["[ERROR] x [json-pointer:/blocks/0/text]", "[ERROR] y [json-pointer:/blocks/1]"], True),
        # No pointer at all: the chart, the block a workspace is likeliest not to know.
        ([], True),
        # A pointer past the message's blocks says nothing of the chart.
        (["[ERROR] x [json-pointer:/blocks/9]"], False),
    ],
)
def test_a_refusal_is_the_charts_only_when_slack_points_at_it(
    details: list[str], blamed: bool
) -> None:
    text = {"type": "section", "text": {"type": "mrkdwn", "text": "status"}}
    chart = {"type": "data_visualization", "chart": {}}
    assert blames_charts(Rendered("status", [text, chart]), details) is blamed
    assert blames_charts(Rendered("status", [text]), details) is False  # no chart to blame
