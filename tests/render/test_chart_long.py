"""The summary chart of a long incident (more statuses than the record keeps) still starts at
the alert's reading and holds the peak, and its readings are spread over the whole incident:
the record thins the middle of its trend, never the first, the peak or the latest."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.incident.incidents import TREND_POINTS, Incident, resolve_drained
from bot.storage.incident_store import state_json
from tests.render.test_chart_holds import OPENED, opened, reading, status, summary_chart


def two_hundred_statuses() -> Incident:
    """A status a minute for 200 minutes, the queue at its peak of 99 at the fifth, and 30
    otherwise, stored and loaded between statuses as the product does."""
    incident = opened()
    at = OPENED
    for minute in range(1, 201):
        at = OPENED + timedelta(minutes=minute)
        incident = status(incident, reading(at, 99 if minute == 5 else 30))
        incident = Incident.model_validate_json(state_json(incident))
    return resolve_drained(incident, now=at)


def test_a_summary_chart_of_200_readings_starts_at_the_first_and_holds_the_peak() -> None:
    incident = two_hundred_statuses()
    chart = summary_chart(incident)

    categories = chart["axis_config"]["categories"]
    assert categories[0] == "18:13", "the alert's reading"
    assert categories[-1] == "21:33", "the last status"
    [series] = chart["series"]
    values = {p["label"]: p["value"] for p in series["data"]}
    assert values["18:13"] == 14
    assert values["18:18"] == 99 and max(values.values()) == 99, "the peak, at its moment"
    assert "19:00" < categories[len(categories) // 2] < "20:50", "spread over the incident"
    assert len(incident.trend) == TREND_POINTS, "memory still bounded"


def test_a_chart_over_days_names_each_later_day_and_no_moment_twice() -> None:
    """Three days of a status every 30 minutes: 14:00 is on the chart more than once a day."""
    incident = opened()
    at = OPENED
    for step in range(1, 3 * 48):
        at = OPENED + timedelta(minutes=30 * step)
        incident = status(incident, reading(at, 40 if step == 100 else 20))
    chart = summary_chart(resolve_drained(incident, now=at))

    categories = chart["axis_config"]["categories"]
    assert categories[0] == "18:13" and categories[-1].startswith("Nov 25 ")
    assert len(set(categories)) == len(categories), categories
    assert all(len(c) <= 20 for c in categories), "Slack's limit for a category"
    values = {p["label"]: p["value"] for p in chart["series"][0]["data"]}
    assert values["Nov 24 20:13"] == 40, "the peak, named with its day"
