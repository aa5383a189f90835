"""Every moment a line says in UTC reaches Slack as a date token, shown in each reader's zone;
the same line kept as text (the postmortem, the GitHub issue) still says UTC."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.incident.incidents import Event, resolve_manually, with_action
from bot.render import mrkdwn as md
from bot.render.replies import render_event, render_summary
from bot.render.root import render_root
from tests.support.incidents import make_incident

AT = datetime(2026, 11, 28, 0, 5, tzinfo=UTC)
PLAIN = re.compile(r"\b(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)? UTC\b")


def outside_tokens(text: str) -> list[str]:
    """The plain UTC times of `text` that no `<!date^…>` token carries."""
    return PLAIN.findall(re.sub(r"<[^<>]*>", "", text))


def test_a_stored_lines_times_become_tokens_on_the_day_nearest_its_moment() -> None:
    line = (
        "alice scaled linux.2xlarge by +6 at 23:50 UTC; silenced until 2026-11-28 09:49 UTC; "
        "GitHub's quota resets at 00:10:05 UTC"
    )
    shown = md.in_zone(md.escaped(line, 500), AT)
    assert outside_tokens(shown) == []
    yesterday = int(datetime(2026, 11, 27, 23, 50, tzinfo=UTC).timestamp())
    assert f"<!date^{yesterday}^{{time}}|23:50 UTC>" in shown, "23:50 is five minutes before"
    until = int(datetime(2026, 11, 28, 9, 49, tzinfo=UTC).timestamp())
    assert f"<!date^{until}^{{date_short_pretty}} {{time}}|2026-11-28 09:49 UTC>" in shown
    assert "^{time_secs}|00:10:05 UTC>" in shown
    assert md.plain_text(shown) == line, "kept as text it still says UTC"


def test_a_token_already_made_and_escaped_text_are_left_as_they_are() -> None:
    line = f"{md.time_of(AT)} · &lt;b&gt; at 12:00 noon"
    assert md.in_zone(line, AT) == line


@given(
    words=st.lists(
        st.one_of(
            st.text(max_size=12),
            st.builds(lambda h, m: f"{h:02d}:{m:02d} UTC", st.integers(0, 23), st.integers(0, 59)),
        ),
        max_size=8,
    ),
    hours=st.floats(-1000, 1000),
)
def test_any_line_reads_the_same_as_text_and_says_no_plain_utc_time_in_slack(
    words: list[str], hours: float
) -> None:
    line = " ".join(words)
    escaped = md.escaped(line, 3000)
    shown = md.in_zone(escaped, AT + timedelta(hours=hours))
    assert outside_tokens(shown) == []
    assert md.plain_text(shown) == md.plain_text(escaped)


def test_the_thread_the_root_and_the_summary_say_a_stored_lines_time_in_the_readers_zone() -> None:
    said = "alice asked for +5 at 23:58 UTC and its answer was lost; silenced until 01:30 UTC"
    event = Event(at=AT, kind="scaled", text=said, actor="U1", actor_name="alice")
    incident = with_action(make_incident(), event)
    for rendered in (
        render_event(incident, event),
        render_root(incident, now=AT),
        render_summary(resolve_manually(incident, by="U1", name="alice", now=AT), [event], now=AT),
    ):
        blocks = json.dumps(rendered.blocks, ensure_ascii=False)
        assert "asked for +5" in blocks
        assert outside_tokens(blocks) == [], blocks
