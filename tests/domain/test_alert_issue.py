"""Which GitHub issue is the alert's, and what it is told: alerting-infra's conventions, the
moments in order, and the comments' Markdown (escaped, marked, within GitHub's limits)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.issues import issue_of
from bot.domain.alerting.alert_issue import (
    THREAD_MOMENT,
    IssueLink,
    Moment,
    comment_mark,
    group_mark,
    is_alert_issue,
    issue_labels,
    issue_title,
    moment_key,
    pending,
    priority_label,
    team_labels,
    tells_issue,
)
from bot.domain.incident.incidents import Event
from bot.render.alert_issue import MAX_BODY, WORD_JOINER, comment, issue_body, unlinked
from bot.render.postmortem import md_escape, render_postmortem
from tests.support.incidents import T0, make_incident

RUNBOOK = "https://runbooks.example/queue"


@pytest.mark.parametrize(
    ("given_priority", "label"),
    [("P2", "P2"), (" p1 ", "P1"), ("3", "P3"), ("P7", None), ("high", None), (None, None)],
)
def test_priority_is_spelled_as_alerting_infra_spells_it(given_priority, label):
    assert priority_label(given_priority) == label


@pytest.mark.parametrize(
    ("team", "labels"),
    [
        ("  PyTorch Dev Infra ", ("Team:pytorch-dev-infra",)),
        # alerting-infra #195: one label per team, never "Team:dev-infra,-pytorch-dev-infra".
        ("dev-infra, pytorch-dev-infra", ("Team:dev-infra", "Team:pytorch-dev-infra")),
        ("a,, A ,b", ("Team:a", "Team:b")),
        ("", ()),
        (None, ()),
        # GitHub refuses a label past 50 characters: each is cut to fit.
        ("x" * 60 + ", short", ("Team:" + "x" * 45, "Team:short")),
    ],
)
def test_one_team_label_per_team_lower_case_with_hyphens_within_50(team, labels):
    assert team_labels(team) == labels
    assert all(len(label) <= 50 for label in team_labels(team))


def test_title_and_labels_follow_alerting_infra():
    incident = make_incident()
    assert issue_title(incident) == "[P2] Jobs queueing in autoscaled machines"
    assert issue_labels(incident) == (
        "area:alerting",
        "Pri:P2",
        "Team:pytorch-dev-infra",
        "Source:grafana",
    )
    unknown = make_incident(priority=None, team=None, source="alertmanager")
    assert issue_title(unknown) == "Jobs queueing in autoscaled machines"
    assert issue_labels(unknown) == ("area:alerting", "Source:alertmanager")
    assert len(issue_title(make_incident(title="x" * 400))) == 256


def test_the_title_is_the_rules_name_without_queuepilots_suffixes():
    """Slack's title says "(no data)" or "(+1 more)"; alerting-infra's issue names the rule."""
    rule = "viable/strict is broken"
    assert issue_title(make_incident(title=f"{rule} (no data)", rule=rule)) == f"[P2] {rule}"
    several = make_incident(title="QueueHigh (+1 more)", rule="QueueHigh")
    assert issue_title(several) == "[P2] QueueHigh"


JOBS = "[P2] Jobs queueing in autoscaled machines"


@pytest.mark.parametrize(
    ("title", "body", "labels", "is_it"),
    [
        ("[P2] Jobs queueing in autoscaled machines", "", ("Team:pytorch-dev-infra",), True),
        ("[p2]  jobs queueing in autoscaled machines ", "", (), True),
        ("[P1] Jobs queueing in autoscaled machines", "", (), False),  # another priority's
        ("[P2] Jobs queueing in autoscaled machines", "", ("Team:other",), False),
        (JOBS, "", ("Team:other", "Team:pytorch-dev-infra"), True),
        ("Something else", "x\n<!-- queuepilot:group:5f3c -->\n", (), True),
        ("Something else", "<!-- queuepilot:group:aaaa -->", (), False),
        # Another group of the same rule: its issue, though the title is the same.
        ("[P2] Jobs queueing in autoscaled machines", "<!-- queuepilot:group:aaaa -->", (), False),
    ],
)
def test_the_alerts_issue_is_found_by_title_or_mark(title, body, labels, is_it):
    assert is_alert_issue(make_incident(), title, body, labels) is is_it


KEY, OTHER_KEY = "a" * 64, "b" * 64
TEAMS = ("Team:dev-infra", "Team:pytorch-dev-infra")


@pytest.mark.parametrize(
    ("body", "labels", "is_it"),
    [
        (f"- *Fingerprint*: `{KEY}`\n", TEAMS, True),
        # The same rule, another alert of it: alerting-infra opened each its own issue.
        (f"- *Fingerprint*: `{OTHER_KEY}`\n", TEAMS, False),
        ("", TEAMS, True),  # no key: the title says it
        (f"- *Fingerprint*: `{KEY}`\n", ("Team:dev-infra,-pytorch-dev-infra",), False),
        (f"- *Fingerprint*: `{KEY}`\n", ("Team:dev-infra",), False),  # not every team of ours
    ],
)
def test_alerting_infras_issue_is_found_by_its_key_and_one_label_per_team(body, labels, is_it):
    incident = make_incident(team="dev-infra, pytorch-dev-infra", pipeline_key=KEY)
    assert is_alert_issue(incident, issue_title(incident), body, labels) is is_it


def _event(kind: str, minutes: int, **fields: Any) -> Event:
    return Event(at=T0 + timedelta(minutes=minutes), kind=kind, text=kind, **fields)


def test_moments_are_told_in_order_once_and_never_the_status():
    timeline = [
        _event("opened", 0),
        _event("status", 5),
        _event("acknowledged", 6, actor="U1", actor_name="alice"),
        _event("status", 10),
        _event("scaled", 11, actor="U1"),
        _event("diagnosed", 12),
        _event("resolved", 40),
    ]
    link = IssueLink(repo="o/r", number=3)
    keys = [m.key for m in pending(link, timeline)]
    assert keys[0] == THREAD_MOMENT
    assert [k.split("|")[1] for k in keys[1:]] == [
        "acknowledged",
        "scaled",
        "diagnosed",
        "resolved",
    ]
    told = IssueLink(repo="o/r", number=3, told=(THREAD_MOMENT, moment_key(timeline[2])))
    assert [m.event.kind for m in pending(told, timeline) if m.event] == [
        "scaled",
        "diagnosed",
        "resolved",
    ]
    assert tells_issue([timeline[1]]) is False
    assert tells_issue([timeline[2]]) is True


def test_each_comment_ends_with_its_own_mark():
    incident = make_incident()
    ack = _event("acknowledged", 6, actor="U1", actor_name="alice")
    key = moment_key(ack)
    said = comment(incident, Moment(key, ack), now=T0)
    assert said.rstrip().endswith(comment_mark(incident, key))
    assert "**Acknowledged** by alice" in said
    assert comment_mark(incident, key) != comment_mark(incident, THREAD_MOMENT)
    other = make_incident(uid="u99")
    assert comment_mark(other, key) != comment_mark(incident, key)


def test_the_thread_comment_links_the_thread_and_only_a_web_link():
    incident = make_incident()
    url = "https://example.slack.com/archives/C1/p1700000000000100"
    said = comment(incident, Moment(THREAD_MOMENT), thread_url=url, now=T0)
    assert f"]({url})" in said
    hostile = comment(incident, Moment(THREAD_MOMENT), thread_url="javascript:alert(1)", now=T0)
    assert "javascript" not in hostile


def test_the_resolve_comment_carries_the_summary():
    incident = make_incident()
    resolved = _event("resolved", 95, actor="U1", actor_name="alice")
    said = comment(incident, Moment(moment_key(resolved), resolved), timeline=[resolved], now=T0)
    assert said.startswith("**Resolved** by alice")
    assert "### Summary" in said and "### Impact" in said
    assert "| Priority | P2 |" in said


def test_no_comment_on_the_issue_links_the_issue_itself():
    """The resolve comment's summary and the postmortem's copy list the incident's links: on the
    issue, all but the issue; the postmortem file in Slack still links it."""
    issue = "https://github.com/pytorch/alerting-infra/issues/7"
    linked = make_incident()
    linked = linked.model_copy(
        update={"links": linked.links.model_copy(update={"issue": issue, "runbook": RUNBOOK})}
    )
    resolved = _event("resolved", 95, actor="U1", actor_name="alice")
    drafted = Event(at=resolved.at, kind="postmortem", text="Postmortem drafted")
    for event in (resolved, drafted):
        said = comment(linked, Moment(moment_key(event), event), timeline=[resolved, event], now=T0)
        assert f"Runbook: <{RUNBOOK}>" in said and issue not in said, said
    assert issue in render_postmortem(linked, [resolved], now=T0)


def test_outside_text_is_escaped_and_a_long_postmortem_is_cut_to_githubs_limit():
    incident = make_incident()
    text = "@here <img src=x> [click](https://evil.example) #1"
    event = Event(at=T0, kind="silenced", text=text, actor="U1", actor_name="@mallory")
    said = comment(incident, Moment(moment_key(event), event), now=T0)
    assert f"\\@{WORD_JOINER}here" in said and "\\<img" in said
    assert not re.search(r"(?<!\\)[<@]", said.split("<!--")[0])  # nothing unescaped
    assert not re.search(r"(?<!\\)\]\(", said)  # no link: every `]` escaped
    assert f"\\@{WORD_JOINER}mallory" in said
    long = Event(at=T0, kind="postmortem", text="Postmortem drafted")
    many = [Event(at=T0, kind="scaled", text="x" * 300, actor="U1") for _ in range(250)]
    cut = comment(incident, Moment(moment_key(long), long), timeline=[*many, long], now=T0)
    assert "x" * 300 in cut, "the write-up itself, cut"
    assert len(cut) <= MAX_BODY
    assert cut.rstrip().endswith(comment_mark(incident, moment_key(long)))


J = WORD_JOINER
REFERENCES = [
    ("@channel and @here", f"\\@{J}channel and \\@{J}here"),
    ("mail ops@evil.example", f"mail ops\\@{J}evil.example"),
    # Issue references GitHub would link (and back-reference): `#12`, `GH-12`, `o/r#12`.
    ("see #12, GH-3 and pytorch/pytorch#4", f"see \\#{J}12, GH{J}\\-3 and pytorch/pytorch\\#{J}4"),
    ("# heading, gh-x and a#b", "\\# heading, gh-x and a\\#b"),
]


@pytest.mark.parametrize(("text", "told"), REFERENCES)
def test_githubs_text_gets_a_word_joiner_where_github_would_link_a_mention_or_an_issue(
    text: str, told: str
) -> None:
    """After `\\@` and `\\#`, inside `GH\\-`: what `md_escape` wrote, and nothing else."""
    assert unlinked(md_escape(text)) == told
    assert J not in md_escape(text), "the file shared in Slack carries none"


def test_an_opened_issues_body_carries_the_group_mark_and_escaped_text():
    incident = make_incident(summary="<script>alert(1)</script> @team")
    body = issue_body(incident)
    assert group_mark(incident) in body
    assert "<script>" not in body and f"\\@{WORD_JOINER}team" in body
    assert "- **Runbook**: <https://github.com/pytorch/test-infra/wiki/runbook>" in body


# GitHub's answers are outside input: any JSON is an issue or a BackendError, never a crash.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
ISSUE_LIKE = st.fixed_dictionaries(
    {"number": st.integers() | st.booleans() | st.none()},
    optional={
        "html_url": JSON,
        "title": JSON,
        "body": JSON,
        "labels": st.lists(JSON, max_size=3),
        "state": JSON,
        "pull_request": JSON,
    },
)


@given(JSON | ISSUE_LIKE)
def test_any_answer_is_an_issue_or_a_clear_error(item):
    try:
        issue = issue_of(item)
    except BackendError as exc:
        assert exc.retryable
    else:
        assert isinstance(issue.number, int)
        assert all(isinstance(label, str) for label in issue.labels)
