"""A silence read back after it was made: in force and selecting the alert as Alertmanager
matches (a missing label is empty, a regex anchored), or why not, in the words its reply says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.domain.alerting.alerts import Matcher
from bot.domain.incident.silence_seen import SilenceState, seen_of, selects
from bot.render.follow_ups import seen_said

ENDS = datetime(2026, 3, 4, 15, 2, tzinfo=UTC)
ASKED = (Matcher("alertname", "RunnerQueue"), Matcher("runner_type", "linux.2xlarge"))


def read(state: str = "active", *matchers: Matcher, starts: datetime | None = None) -> SilenceState:
    return SilenceState("s1", state, ENDS, starts, matchers or ASKED)


@pytest.mark.parametrize(
    ("matcher", "holds"),
    [
        (Matcher("alertname", "RunnerQueue"), True),
        (Matcher("alertname", "Other"), False),
        (Matcher("alertname", "Runner", is_regex=True), False),  # anchored: not a substring
        (Matcher("alertname", "Runner.*", is_regex=True), True),
        (Matcher("alertname", "a)|(RunnerQueue", is_regex=True), True),  # ^(?:a)|(b)$
        (Matcher("runner_type", "linux.2xlarge", is_equal=False), False),
        (Matcher("runner_type", "linux\\..*", is_equal=False, is_regex=True), False),
        (Matcher("team", "ci", is_equal=False), True),  # a missing label is "" and not "ci"
        (Matcher("team", "ci"), False),
        (Matcher("team", "", is_equal=True), True),
        (Matcher("team", ".+", is_regex=True), False),
    ],
)
def test_a_matcher_holds_as_alertmanager_matches_the_alerts_labels(
    matcher: Matcher, holds: bool
) -> None:
    assert selects(matcher, ASKED) is holds


def test_the_incidents_own_matcher_holds_though_it_names_no_value_to_test() -> None:
    link = Matcher("severity", "page", is_equal=False)  # from a Grafana silence link
    assert selects(link, (*ASKED, link))


def test_active_and_matching_says_where_until_when() -> None:
    seen = seen_of("Alertmanager", read(), ASKED)
    assert seen.holds is True
    assert seen_said(seen) == "active in Alertmanager until 15:02 UTC, matching the alert"


def test_pending_says_until_its_start() -> None:
    starts = datetime(2026, 3, 4, 14, 2, tzinfo=UTC)
    seen = seen_of("Grafana", read("pending", starts=starts), ASKED)
    assert seen.holds is True
    assert seen_said(seen) == "pending in Grafana until its start at 14:02 UTC, matching the alert"


def test_expired_or_unknown_to_the_backend_is_a_warning() -> None:
    expired = seen_of("Alertmanager", read("expired"), ASKED)
    assert expired.holds is False and seen_said(expired) == "Alertmanager shows it expired"
    gone = seen_of("Grafana", None, ASKED)
    assert gone.holds is False and seen_said(gone) == "Grafana does not know it"


def test_matchers_that_miss_the_alert_are_named() -> None:
    other = Matcher("alertname", "Other")
    seen = seen_of("Alertmanager", read("active", other, ASKED[1]), ASKED)
    assert seen.holds is False
    assert seen_said(seen) == 'its matchers do not match the alert: alertname="Other"'


def test_a_silence_wider_than_asked_still_matches() -> None:
    seen = seen_of("Alertmanager", read("active", ASKED[0]), ASKED)
    assert seen.holds is True


def test_an_unread_answer_is_not_known_never_done() -> None:
    seen = seen_of("Alertmanager", "Alertmanager did not answer within 10 s", ASKED)
    assert seen.holds is None
    assert seen_said(seen) == "not known: Alertmanager did not answer within 10 s"
    bare = seen_of("Grafana", SilenceState("s1", "active", ENDS), ASKED)
    assert bare.holds is None
    assert seen_said(bare) == "not known: Grafana showed the silence without its matchers"
