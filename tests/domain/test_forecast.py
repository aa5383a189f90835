"""The outlook of a queue, as status lines say it: tables of cases."""

from __future__ import annotations

import pytest

from bot.domain.forecast import outlook, runners_to_drain


@pytest.mark.parametrize(
    ("queued", "kwargs", "text"),
    [
        # Draining from rates: completions beat arrivals by 0.6/min; 15 jobs -> 25 min.
        (
            15,
            {"arrival_per_min": 2.0, "completion_per_min": 2.6},
            "draining ~0.6 jobs/min → clear in ~25 min",
        ),
        # Growing +3/min with 10-minute jobs: (10 + 3 * 30) * 10 / 30 = 33.3 -> 34 runners.
        (
            10,
            {"arrival_per_min": 5.0, "completion_per_min": 2.0, "job_duration_mins": 10.0},
            "growing +3.0 jobs/min: +34 runners would drain it in 30 min",
        ),
        # Growing, known only from the trend's slope; the job duration says how many runners.
        (
            6,
            {"slope_per_min": 0.4, "job_duration_mins": 5.0},
            "growing +0.4 jobs/min: +3 runners would drain it in 30 min",
        ),
        # Holding: the backlog alone decides: 30 jobs of 3 min drain in 30 min with 3 runners.
        (
            30,
            {"slope_per_min": 0.0, "job_duration_mins": 3.0},
            "holding steady: +3 runners would drain it in 30 min",
        ),
        # Draining from the trend, hours away.
        (120, {"slope_per_min": -1.0}, "draining ~1.0 jobs/min → clear in ~2.0 h"),
        # Nothing known but the queue: one runner per job, as PyTorch's scale-up-chron asks.
        (7, {}, "+7 runners would drain it in 30 min"),
    ],
)
def test_outlook_says_where_the_queue_is_heading(queued: float, kwargs: dict, text: str) -> None:
    result = outlook(queued, **kwargs)
    assert result is not None
    assert result.text == text


def test_rates_win_over_the_trend_and_an_empty_queue_has_no_outlook() -> None:
    from_rates = outlook(10, arrival_per_min=1, completion_per_min=3, slope_per_min=5)
    assert from_rates is not None and from_rates.growth_per_min == -2
    assert outlook(0, slope_per_min=3) is None
    assert outlook(None) is None


@pytest.mark.parametrize(
    ("kwargs", "runners", "advice"),
    [
        # 10 booting (the autoscaler asked, not registered yet) count against the 34 needed.
        ({"booting": 10}, 24, "+24 runners would drain it in 30 min (beyond the 10 booting)"),
        # They cover it all: nothing more to add, and it says why.
        ({"booting": 40}, 0, "the 40 runners booting should drain it in 30 min"),
        # At 20 of a maximum of 24: only 4 fit, and the advice says so.
        (
            {"maximum": 24, "running": 20},
            34,
            "+34 runners would drain it in 30 min; only 4 fit under the maximum of 24",
        ),
        # Within the maximum: nothing to say about it.
        ({"maximum": 100, "running": 20}, 34, "+34 runners would drain it in 30 min"),
    ],
)
def test_the_recommendation_counts_what_is_booting_and_what_fits(
    kwargs: dict, runners: int, advice: str
) -> None:
    rates = {"arrival_per_min": 5.0, "completion_per_min": 2.0, "job_duration_mins": 10.0}
    result = outlook(10, **rates, **kwargs)
    assert result is not None and result.needed == 34
    assert (result.runners, result.advice) == (runners, advice)


def test_a_draining_queue_gets_no_runners_however_many_would_fit() -> None:
    result = outlook(40, slope_per_min=-3.0, job_duration_mins=10.0, maximum=100, running=20)
    assert result is not None and result.runners is None and result.advice == ""
    assert result.text == "draining ~3.0 jobs/min → clear in ~14 min"


def test_an_empty_queue_filling_gets_what_would_hold_it() -> None:
    # Nothing queued yet, +1.5 jobs/min of 4-minute jobs: 6 more runners hold it.
    result = outlook(0, slope_per_min=1.5, job_duration_mins=4.0)
    assert result is not None and result.runners == 6


def test_a_custom_target_time_changes_the_runners() -> None:
    short = outlook(20, slope_per_min=0, job_duration_mins=6, within_mins=10)
    assert short is not None and short.runners == 12 and "in 10 min" in short.text


def test_runners_to_drain_matches_the_documented_formula() -> None:
    # ceil((Q + max(a - c, 0) * T) * D / T) = ceil((12 + 2 * 30) * 4 / 30) = ceil(9.6) = 10
    advice = runners_to_drain(12, job_duration_mins=4, arrival_per_min=5, completion_per_min=3)
    assert advice is not None and advice.runners == 10


def test_a_measured_job_duration_reads_in_whole_minutes() -> None:
    # The demo's GPU jobs averaged 16.21 min: the scale modal's reason said "~16.21 min".
    advice = runners_to_drain(40, job_duration_mins=16.21, within_mins=30)
    assert advice is not None
    assert advice.why == "drains 40 queued jobs of ~16 min in 30 min"


def test_a_gauge_that_is_not_a_number_is_not_known() -> None:
    """A backend's NaN (a division by a zero rate) is no queue and no duration: no advice from
    it, never a crash (diagnostics asked `runners_to_drain` for a NaN queue's runners)."""
    nan = float("nan")
    assert runners_to_drain(nan, job_duration_mins=6.0) is None
    advice = runners_to_drain(10, job_duration_mins=nan, arrival_per_min=nan)
    assert advice is not None and advice.runners == 10  # one a job: the duration is not known
