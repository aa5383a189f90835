"""Each measure's peak as the summary and the postmortem say it: under its own label, the same
value at the same moment in both (they render the one record)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

MEASURES = ("longest wait", "slowest recent start")


def assert_peaks_agree(summary: str, markdown: str) -> None:
    """`summary`: the summary's text or blocks as JSON (Slack's date tokens); `markdown`: the
    postmortem file (UTC times)."""
    for measure in MEASURES:
        in_summary = re.search(rf"Peak {measure}: \*([^*]+)\* at <!date\^(\d+)\^", summary)
        in_file = re.search(rf"Peak {measure}: \*\*([^*]+)\*\* at (\S+ \d\d:\d\d) UTC", markdown)
        assert (in_summary is None) == (in_file is None), (measure, summary, markdown)
        if in_summary is not None and in_file is not None:
            moment = datetime.fromtimestamp(int(in_summary[2]), UTC).strftime("%Y-%m-%d %H:%M")
            assert (in_summary[1], moment) == (in_file[1], in_file[2]), (summary, markdown)
