"""Text primitives: escaping, links, mentions, truncation, dates, fields and sections."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from bot.render.mrkdwn import (
    MAX_FIELD,
    MAX_FIELDS,
    MAX_SECTION,
    escape,
    fields,
    fit_lines,
    link,
    mention,
    person,
    plain_text,
    sections,
    slack_date,
    truncate,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain", "plain"),
        ("a & b", "a &amp; b"),
        ("<!channel>", "&lt;!channel&gt;"),
        ("<@U123>", "&lt;@U123&gt;"),
        ("<https://evil|click>", "&lt;https://evil|click&gt;"),
        ("&amp;", "&amp;amp;"),
        ("", ""),
    ],
)
def test_escape(raw: str, expected: str) -> None:
    assert escape(raw) == expected


@pytest.mark.parametrize(
    ("url", "label", "expected"),
    [
        ("https://grafana.example/d/x", "Dashboard", "<https://grafana.example/d/x|Dashboard>"),
        ("http://example.com/?a=1&b=2", "View", "<http://example.com/?a=1&amp;b=2|View>"),
        ("  https://example.com  ", "Trimmed", "<https://example.com|Trimmed>"),
        ("HTTPS://EXAMPLE.COM", "Upper", "<HTTPS://EXAMPLE.COM|Upper>"),
        ("https://example.com", "a <b> & c", "<https://example.com|a &lt;b&gt; &amp; c>"),
        ("www.time.com", "Runbook", "Runbook"),
        ("javascript:alert(1)", "Click", "Click"),
        ("ftp://example.com", "Files", "Files"),
        ("https://evil|click", "Runbook", "Runbook"),
        ("https://a.example/x y", "Spaces", "Spaces"),
        ("https://a.example/<!channel>", "Angle", "Angle"),
        ("https://a.example/" + "x" * 3000, "Long", "Long"),
        ("", "Empty", "Empty"),
        ("www.time.com", "<!here>", "&lt;!here&gt;"),
    ],
)
def test_link(url: str, label: str, expected: str) -> None:
    assert link(url, label) == expected


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("U123ABC", "<@U123ABC>"),
        ("W0ENTERPRISE", "<@W0ENTERPRISE>"),
        ("u123", "u123"),
        ("bob", "bob"),
        ("U123>", "U123&gt;"),
        ("<!here>", "&lt;!here&gt;"),
        ("U" + "A" * 40, "U" + "A" * 40),
        ("C123", "C123"),
    ],
)
def test_mention(user: str, expected: str) -> None:
    assert mention(user) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 10, "short"),
        ("exactly ten", 11, "exactly ten"),
        ("abcdefghij", 5, "abcd…"),
        ("ab &amp; cd", 5, "ab…"),
        ("ab&amp;cd", 7, "ab…"),
        ("ab&amp;cd", 8, "ab&amp;…"),
        ("x <@U123> tail", 8, "x…"),
        ("x <https://a.example|label> tail", 20, "x…"),
        ("trailing space   and more", 18, "trailing space…"),
    ],
)
def test_truncate(text: str, limit: int, expected: str) -> None:
    assert truncate(text, limit) == expected


def test_truncate_never_splits_an_entity_or_token() -> None:
    text = escape("&<>" * 50) + " <@U1> <!date^1^{time}|x> <https://a.example|b>" * 3
    whole = re.compile(r"(&(amp|lt|gt);|<[^<>]*>|[^&<>])*…")
    for limit in range(1, len(text)):
        cut = truncate(text, limit)
        assert len(cut) <= limit
        assert whole.fullmatch(cut), (limit, cut)


def test_slack_date_renders_in_the_readers_zone_with_a_utc_fallback() -> None:
    moment = datetime(2025, 9, 16, 19, 5, tzinfo=timezone(timedelta(hours=2)))
    assert slack_date(moment) == (
        "<!date^1758042300^{date_short_pretty} {time}|2025-09-16 17:05 UTC>"
    )
    assert slack_date(moment, "{time}") == "<!date^1758042300^{time}|17:05 UTC>"
    naive_is_utc = datetime(2025, 9, 16, 17, 5)
    assert slack_date(naive_is_utc) == slack_date(moment)


def test_fit_lines_keeps_whole_leading_lines() -> None:
    assert fit_lines(["aa", "bb", "cc"], 5) == ["aa", "bb"]
    assert fit_lines(["aa", "bb", "cc"], 8) == ["aa", "bb", "cc"]
    assert fit_lines(["toolong"], 3) == []


def test_fields_past_ten_say_how_many_were_left_out() -> None:
    block = fields([f"v{i}" for i in range(25)], more="+{n} more values")
    texts = [field["text"] for field in block["fields"]]
    assert len(texts) == MAX_FIELDS
    assert texts[-1] == "+16 more values"
    assert texts[0] == "v0"


def test_fields_are_truncated_to_the_field_limit() -> None:
    block = fields([escape("<" * 5000)])
    text = block["fields"][0]["text"]
    assert len(text) <= MAX_FIELD
    assert text.endswith("&lt;…")


def test_sections_pack_lines_within_the_section_limit() -> None:
    lines = ["x" * 1000] * 7 + ["y" * 5000]
    blocks = sections(lines)
    # Three 1000-char lines plus two newlines are 3002: two lines per section.
    assert [len(b["text"]["text"]) for b in blocks] == [2001, 2001, 2001, 1000, MAX_SECTION]
    assert blocks[-1]["text"]["text"].endswith("…")


def test_an_answer_kept_as_plain_text_reads_as_slack_showed_it() -> None:
    """A refusal's answer, kept on the timeline: its date as the UTC fallback, the person's name
    without bold, a link as its label, a mention as the ID, entities as what they stand for."""
    until = datetime(2025, 1, 1, 20, 23, tzinfo=UTC)
    answer = (
        f"Already silenced until {slack_date(until)} by {person('U1', 'a<b>')}: "
        f"{link('https://x.example/?a=1&b=2', 'runbook & more')} <@U0ALICE> "
        f"`/queue unsilence 12` {escape('x & y <z>')}"
    )
    assert plain_text(answer) == (
        "Already silenced until 2025-01-01 20:23 UTC by a<b>: runbook & more U0ALICE "
        "`/queue unsilence 12` x & y <z>"
    )
