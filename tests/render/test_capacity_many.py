"""The capacity report with many runner types and many responders: every type's line fits, and
the weekly post stays within Slack's limits."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.reading.capacity import TypeReport
from bot.render.capacity import MAX_TYPES, render_report, report_message


def test_many_types_and_many_scalers_keep_every_shown_type_and_the_sources() -> None:
    reports = [
        TypeReport(
            runner_type=f"linux.{i:02d}.2xlarge",
            incidents=3,
            firing=timedelta(hours=60 - i),
            peak_queued=40,
            scale_ups={f"responder-{j}": 30 - j for j in range(30)},
            minimum=1,
            maximum=20,
            recommendation="raise maxRunners 20 → 40",
        )
        for i in range(60)
    ]
    text = render_report(reports, days=7, kept_days=30)
    for i in range(MAX_TYPES):
        assert f"• *linux.{i:02d}.2xlarge*" in text
    assert "25 others" in text and "50 more runner types" in text
    assert "From queuepilot's own incidents" in text
    message = report_message(reports, days=7, kept_days=30)
    assert len(message.blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in message.blocks if b["type"] == "section")
    [chart] = [b for b in message.blocks if b["type"] == "data_visualization"]
    labels = chart["chart"]["axis_config"]["categories"]
    assert len(labels) <= 20 and len(set(labels)) == len(labels)
    assert all(len(label) <= 20 for label in labels)


def test_one_scale_up_is_said_in_the_singular_with_its_scaler() -> None:
    one = TypeReport(runner_type="linux.2xlarge", incidents=1, scale_ups={"alice": 1})
    two = TypeReport(runner_type="linux.4xlarge", incidents=1, scale_ups={"alice": 1, "bob": 1})
    text = render_report([one, two], days=7, kept_days=30)
    assert "1 scale-up (alice 1)" in text
    assert "2 scale-ups (alice 1, bob 1)" in text
