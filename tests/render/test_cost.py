"""The cost sentence every surface shares, word for word."""

from __future__ import annotations

from bot.domain.queue_cost.cost import ARC, GITHUB, NO_PRS_GITHUB, NO_WORKFLOW_ARC, Tally, Waited
from bot.render.cost import cost_said


def test_arc_with_workflows_prs_and_branches() -> None:
    waited = Waited(
        source=ARC,
        threshold_mins=5,
        jobs=180,
        minutes=1240.4,
        jobs_past=63,
        minutes_past=412,
        longest_mins=38,
        workflows={
            "pull": Tally(120, 700, 40, 168.9),
            "trunk": Tally(50, 440, 20, 200),
            "nightly": Tally(10, 100.4, 3, 43.1),
            "lint": Tally(0, 0, 0, 0),
        },
        prs=17,
        branches=1,
    )
    assert cost_said(waited) == (
        "412 job-minutes past 5 min: 63 jobs in 3 workflows, trunk 49%, 17 PRs, 1 branch · "
        "1,240 job-minutes waited by 180 jobs · longest 38 min (ARC's job start times)"
    )


def test_github_says_what_it_cannot_tell() -> None:
    waited = Waited(
        source=GITHUB,
        threshold_mins=30,
        jobs=1,
        minutes=32.5,
        jobs_past=1,
        minutes_past=2.5,
        longest_mins=32.5,
        workflows={"pull": Tally(1, 32.5, 1, 2.5)},
        branches=1,
        not_known={"pull requests": NO_PRS_GITHUB},
    )
    assert cost_said(waited) == (
        "2.5 job-minutes past 30 min: 1 job in 1 workflow, pull 100%, 1 branch · "
        "32 job-minutes waited by 1 job · longest 32 min (GitHub's job times) · "
        "pull requests not known: GitHub's jobs do not say which pull request ran them"
    )


def test_arc_without_workflows_and_a_wait_past_its_top_bucket() -> None:
    not_known = {"workflows": NO_WORKFLOW_ARC}
    waited = Waited(
        source=ARC, threshold_mins=5, jobs=4, minutes=250, jobs_past=3, minutes_past=180,
        longest_mins=60, longest_over=True, workflows={"": Tally(4, 250, 3, 180)},
        not_known=not_known,
    )  # fmt: skip
    assert cost_said(waited) == (
        "180 job-minutes past 5 min: 3 jobs · 250 job-minutes waited by 4 jobs · longest over "
        f"60 min (ARC's job start times) · workflows not known: {NO_WORKFLOW_ARC}"
    )


def test_none_past_the_threshold_and_no_job_at_all() -> None:
    calm = Waited(
        source=GITHUB, threshold_mins=5, jobs=12, minutes=8.25, longest_mins=2, branches=0
    )
    assert cost_said(calm) == (
        "none waited past 5 min · 8.2 job-minutes waited by 12 jobs · longest 2 min "
        "(GitHub's job times)"
    )
    assert (
        cost_said(Waited(source=ARC, threshold_mins=5))
        == "no job got a runner (ARC's job start times)"
    )
