"""Block Kit rendering: every message within Slack's limits and inert for hostile alert text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import (
    Event,
    Incident,
    Links,
    Resolution,
    Snapshot,
    Status,
    peak_types_of,
    record_status,
    resolve_drained,
)
from bot.domain.message import Rendered
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.replies import render_event, render_status, render_summary
from bot.render.root import ACTIONS_BLOCK_ID, incident_ref_of, render_root
from sandbox.slack_limits import validate_blocks
from tests.support.incidents import T0, changed, make_incident

EVIL = "<!channel> <!here> <!everyone> <@U0EVIL> <https://evil.example|click> &<> "


def acknowledged(incident: Incident, by: str = "U123ABC", name: str = "ann") -> Incident:
    return changed(
        incident,
        acknowledged_by=by,
        acknowledged_name=name,
    )


def resolved(incident: Incident, *, by: str | None = None) -> Incident:
    update: dict[str, Any] = {
        "status": Status.RESOLVED,
        "resolved_at": incident.started_at + timedelta(hours=1, minutes=18),
        "resolution": Resolution.MANUAL if by else Resolution.ALERT,
        "resolved_by": by,
        "resolved_by_name": "ursula" if by else "",
    }
    if not by:
        update["numbers"] = QueueNumbers()
        update["runner_types"] = {}
    return changed(incident, **update)


def hostile_incident(**changes: Any) -> Incident:
    """Everything an alert sender controls, huge and full of Slack control sequences."""
    huge = (EVIL * 200)[:10_000]
    runner_types = {
        f"{i:03d}{EVIL}".ljust(300, "&"): RunnerQueue(queued=i, longest_wait_mins=i * 1.5)
        for i in range(500)
    }
    fields: dict[str, Any] = {
        "title": huge,
        "priority": huge,
        "team": huge,
        "summary": huge,
        "description": huge + "!",
        "runner_types": runner_types,
        "other_values": {f"{i}{EVIL}" * 20: i / 3 for i in range(50)},
        "links": Links(
            runbook="https://evil.example|click",
            alert="https://evil.example/" + "&" * 5000,
            silence="www.time.com/" + EVIL,
            dashboard="javascript:alert(1)",
            panel="https://ok.example/" + "a" * 1900 + "?x=<!channel>",
        ),
    }
    return make_incident(**(fields | changes))


def no_numbers(incident: Incident, **others: float) -> Incident:
    return changed(
        incident,
        numbers=QueueNumbers(),
        peak=QueueNumbers(),
        runner_types={},
        other_values=others,
    )


def incidents() -> Iterator[tuple[str, Incident]]:
    for kind, base in (("normal", make_incident()), ("hostile", hostile_incident())):
        yield f"{kind}-firing", base
        yield f"{kind}-acknowledged", acknowledged(base)
        yield f"{kind}-resolved-manually", resolved(acknowledged(base), by="U999")
        yield f"{kind}-resolved-by-alert", resolved(base)
        yield f"{kind}-test", base.model_copy(update={"is_test": True})
        yield f"{kind}-no-numbers", no_numbers(base, C=3.0, reducer=2.5)
        cleared = {"numbers": QueueNumbers(), "peak": QueueNumbers()}
        yield f"{kind}-only-other-values", changed(base, **cleared)
        yield f"{kind}-nothing-at-all", no_numbers(base).model_copy(update={"links": Links()})
        yield f"{kind}-hostile-actors", resolved(acknowledged(base, EVIL), by=EVIL)
        yield f"{kind}-reopened", base.model_copy(update={"reopened": 2, "firing_count": 3})


INCIDENTS = list(incidents())
IDS = [name for name, _ in INCIDENTS]


def timeline(count: int, text: str = "Acknowledged") -> list[Event]:
    return [
        Event(at=T0 + timedelta(minutes=i), kind="acknowledged", text=f"{text} {i}", actor="U1")
        for i in range(count)
    ]


# --- what every message must satisfy ---------------------------------------------------------

ALLOWED_TOKEN = re.compile(
    r"<@[UW][A-Z0-9]+>"
    r"|<!date\^\d+\^\{[a-z_]+\}(?: \{[a-z_]+\})?(?: \(\{ago\}\))?\|[0-9: UTC-]+>"
    r"|<https?://[^\s|<>]+\|[^<>|]+>"
)
ENTITY = re.compile(r"&(?:amp|lt|gt);")


def texts_of(value: Any) -> Iterator[str]:
    """Every `text` string in a block tree: what Slack would parse."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                yield item
            else:
                yield from texts_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts_of(item)


def assert_inert(text: str) -> None:
    """Only the tokens the renderer builds; no stray `<`, `>` or unescaped `&` anywhere else."""
    for banned in ("<!channel", "<!here", "<!everyone", "<@U0EVIL", "<https://evil"):
        assert banned not in text
    rest = ENTITY.sub("", ALLOWED_TOKEN.sub("", text))
    assert not re.search(r"[<>&]", rest), text[:300]


def assert_valid(rendered: Rendered) -> None:
    assert isinstance(rendered, Rendered)
    assert 0 < len(rendered.text) <= 3000
    assert "<@" not in rendered.text, "fallback text must not mention anyone"
    assert_inert(rendered.text)
    assert 0 < len(rendered.blocks) <= 50
    for block in rendered.blocks:
        parsed = Block.parse(block)
        parsed.validate_json()
        assert parsed.to_dict() == block  # to_dict validates nested elements; nothing unknown
        assert_limits(block)
        for text in texts_of(block):
            assert text
            assert_inert(text)
    json.dumps(rendered.blocks)


def assert_limits(block: dict[str, Any]) -> None:
    """Limits slack_sdk does not check itself."""
    for field in block.get("fields", ()):
        assert len(field["text"]) <= 2000
    for element in block.get("elements", ()):
        if element["type"] == "mrkdwn":
            assert len(element["text"]) <= 3000
        if element["type"] == "button":
            assert len(element["value"]) <= 2000
    if block["type"] == "context":
        assert len(block["elements"]) <= 10


@pytest.mark.parametrize(("name", "incident"), INCIDENTS, ids=IDS)
def test_root_is_valid_and_inert(name: str, incident: Incident) -> None:
    assert_valid(render_root(incident, now=T0))


@pytest.mark.parametrize(("name", "incident"), INCIDENTS, ids=IDS)
def test_status_is_valid_and_inert(name: str, incident: Incident) -> None:
    later = T0 + timedelta(minutes=10)
    current = incident.snapshot(later)
    assert_valid(render_status(incident, previous=None, current=current, now=later))
    previous = make_incident(runner_types={"gone" + EVIL: RunnerQueue(1, 1)}).snapshot(T0)
    assert_valid(render_status(incident, previous=previous, current=current, now=later))
    hostile_before = hostile_incident().snapshot(T0)
    assert_valid(render_status(incident, previous=hostile_before, current=current, now=later))


@pytest.mark.parametrize(("name", "incident"), INCIDENTS, ids=IDS)
def test_summary_is_valid_and_inert(name: str, incident: Incident) -> None:
    now = T0 + timedelta(hours=2)
    assert_valid(render_summary(incident, [], now=now))
    assert_valid(render_summary(incident, timeline(3), now=now))
    huge = [
        Event(at=T0, kind="notified", text=(EVIL * 100)[: 5000 + i], actor=EVIL if i % 2 else "U1")
        for i in range(300)
    ]
    assert_valid(render_summary(incident, huge, now=now))


@pytest.mark.parametrize(("name", "incident"), INCIDENTS, ids=IDS)
def test_events_are_valid_and_inert(name: str, incident: Incident) -> None:
    for event in [
        Event(at=T0, kind="reopened", text="Alert fired again: incident reopened"),
        Event(at=T0, kind="acknowledged", text="Acknowledged", actor="U123ABC"),
        Event(at=T0, kind="alerts_changed", text=(EVIL * 300)[:10_000], actor=EVIL),
        Event(at=T0, kind="made-up", text=EVIL),
    ]:
        assert_valid(render_event(incident, event))


# --- the root message ------------------------------------------------------------------------


def root_texts(incident: Incident) -> list[str]:
    return list(texts_of(render_root(incident, now=T0).blocks))


def block_of(rendered: Rendered, block_type: str) -> list[dict[str, Any]]:
    return [block for block in rendered.blocks if block["type"] == block_type]


def test_root_header_shows_state_priority_and_title() -> None:
    root = render_root(make_incident(), now=T0)
    assert root.blocks[0] == {
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": "🔴 P2 · Jobs queueing in autoscaled machines",
            "emoji": True,
        },
    }
    assert root.text == (
        "🔴 P2 · Jobs queueing in autoscaled machines: longest wait 114 min, 14 queued"
    )


def test_root_header_without_priority_and_for_a_test_incident() -> None:
    header = render_root(make_incident(priority=None, is_test=True), now=T0).blocks[0]
    assert header["text"]["text"] == "🔴 [TEST] Jobs queueing in autoscaled machines"
    assert "🧪 Grafana test notification" in root_texts(make_incident(is_test=True))[1]


def test_root_header_of_a_huge_title_is_truncated_with_an_ellipsis() -> None:
    header = render_root(make_incident(title="&" * 10_000), now=T0).blocks[0]["text"]["text"]
    assert len(header) <= 150
    assert header.endswith("&amp;…")


def test_firing_status_line_names_the_incident_id() -> None:
    assert root_texts(make_incident())[1] == "🔴 *Firing* · not acknowledged · ID *12*"


def test_acknowledged_status_line_mentions_the_owner() -> None:
    line = root_texts(acknowledged(make_incident()))[1]
    assert line == "🔴 *Firing* · acknowledged by <@U123ABC> · ID *12*"


def test_an_owner_that_is_not_a_user_id_is_shown_as_text() -> None:
    line = root_texts(acknowledged(make_incident(), by="bob <!here>"))[1]
    assert "acknowledged by bob &lt;!here&gt;" in line


def test_resolved_root_turns_green_and_says_how_and_how_long() -> None:
    manual = render_root(resolved(make_incident(), by="U999"), now=T0)
    assert manual.blocks[0]["text"]["text"].startswith("✅ P2 · ")
    assert list(texts_of(manual.blocks))[1] == "✅ *Resolved* by <@U999> after 1 h 18 min · ID *12*"
    assert manual.text == "✅ Resolved: P2 · Jobs queueing in autoscaled machines"
    by_alert = root_texts(resolved(make_incident()))[1]
    assert by_alert == "✅ *Resolved* (alert cleared) after 1 h 18 min · ID *12*"


def test_key_numbers_against_what_the_rule_said_of_its_thresholds() -> None:
    # The reference alert's rule says which threshold was crossed, not where it is.
    root = render_root(make_incident(), now=T0)
    numbers = [f["text"] for block in root.blocks for f in block.get("fields", ())]
    assert numbers == [
        "Longest wait: *114 min* (over the rule's threshold)",
        "Queued jobs: *14* (no type over the rule's threshold)",
    ]


def test_key_numbers_against_thresholds_a_rule_states() -> None:
    incident = make_incident(
        numbers=QueueNumbers(114, 14, 60, 20), peak=QueueNumbers(114, 14, 60, 20)
    )
    fields = [f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())]
    assert fields == [
        "Longest wait: *114 min* (threshold 60 min)",
        "Queued jobs: *14* (threshold 20 for a runner type)",
    ]


def test_peak_is_shown_when_it_differs_from_now() -> None:
    incident = make_incident(
        numbers=QueueNumbers(90, 14, 60, 20), peak=QueueNumbers(130.5, 14, 60, 20)
    )
    fields = [f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())]
    assert fields[0] == "Longest wait: *90 min* (threshold 60 min, peak 130 min)"
    assert fields[1] == "Queued jobs: *14* (threshold 20 for a runner type)"


def test_the_peak_queue_goes_beside_the_alerts_only_as_the_same_quantity() -> None:
    """A sum over runner types read live is no peak of the alert's own figure (its rule's
    maximum, of one type): beside it, nothing; beside the total of the types it names, that."""
    peaks = {"linux.2xlarge": RunnerQueue(queued=30), "linux.4xlarge": RunnerQueue(queued=6)}
    figure = make_incident(
        numbers=QueueNumbers(None, 14), peak=QueueNumbers(None, 36), peak_types=peaks
    )
    alone = figure.model_copy(update={"runner_types": {}})
    assert headline(alone)[1] == ["Queued jobs: *14*"]
    assert headline(figure)[1] == ["Queued jobs: *14* (peak 36)"]  # 4 + 10 named


def test_after_the_alert_cleared_the_peaks_remain() -> None:
    """Said as the worst seen, not as what the alert says; a peak queue no snapshot summed over
    runner types is the alert's own figure, and says so."""
    root = render_root(resolved(make_incident(peak=QueueNumbers(130, 16, 60, 20))), now=T0)
    [block] = [b for b in root.blocks if b.get("fields")]
    assert block["text"]["text"] == "*Worst seen*"
    assert [f["text"] for f in block["fields"]] == [
        "Peak longest wait: *130 min* (threshold 60 min)",
        "Peak queued jobs (as the alert said): *16* (threshold 20)",
    ]


def test_only_the_numbers_present_are_shown() -> None:
    incident = make_incident(
        numbers=QueueNumbers(max_queue_size=3), peak=QueueNumbers(), runner_types={}
    )
    fields = [f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())]
    assert fields == ["Queued jobs: *3*"]


def test_without_queue_numbers_other_values_are_shown_generically() -> None:
    incident = no_numbers(make_incident(), C=1.0, reducer=114.25)
    fields = [f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())]
    assert fields == ["C = *1*", "reducer = *114.2*"]


def test_other_values_respect_the_ten_field_limit() -> None:
    incident = no_numbers(make_incident(), **{f"v{i}": float(i) for i in range(14)})
    fields = [f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())]
    assert len(fields) == 10
    assert fields[-1] == "+5 more values"


def test_runner_types_are_listed_worst_first() -> None:
    incident = make_incident(
        runner_types={
            "small": RunnerQueue(queued=50, longest_wait_mins=5),
            "unknown": RunnerQueue(),
            "gpu": RunnerQueue(queued=2, longest_wait_mins=114),
            "arm": RunnerQueue(queued=9, longest_wait_mins=114),
            "only-queued": RunnerQueue(queued=100),
        }
    )
    listing = next(t for t in root_texts(incident) if t.startswith("*Runner types*"))
    assert listing.splitlines() == [
        "*Runner types* (worst first)",
        # With the alert's numbers alone, one runner per queued job (its judgement's advice), in
        # the words a live reading's line uses.
        "• arm: *9* queued · longest wait *114 min* · +9 runners would drain it in 30 min",
        "• gpu: *2* queued · longest wait *114 min* · +2 runners would drain it in 30 min",
        "• small: *50* queued · longest wait *5 min* · +50 runners would drain it in 30 min",
        "• only-queued: *100* queued · longest wait not known: the alert does not say · "
        "+100 runners would drain it in 30 min",
        "• unknown: no numbers",
    ]


def test_many_runner_types_are_capped_with_a_count() -> None:
    incident = make_incident(runner_types={f"type-{i:02d}": RunnerQueue(i, i) for i in range(40)})
    listing = next(t for t in root_texts(incident) if t.startswith("*Runner types*"))
    rows = listing.splitlines()[1:]
    assert len(rows) == 16
    advice = "+39 runners would drain it in 30 min"
    assert rows[0] == f"• type-39: *39* queued · longest wait *39 min* · {advice}"
    assert rows[-1] == "+25 more runner types"


def test_runner_type_names_are_escaped() -> None:
    incident = make_incident(runner_types={"<!channel> & co": RunnerQueue(1, 1)})
    assert "• &lt;!channel&gt; &amp; co: *1* queued" in "\n".join(root_texts(incident))


def test_context_shows_id_start_team_source_and_notifications() -> None:
    context = block_of(render_root(make_incident(notifications=3), now=T0), "context")[0]
    assert [e["text"] for e in context["elements"]] == [
        "Incident *12*",
        "Started <!date^1758042000^{date_short_pretty} {time} ({ago})|2025-09-16 17:00 UTC>",
        "Team: pytorch-dev-infra",
        "Source: Grafana",
        "3 notifications",
    ]
    alertmanager = make_incident(source="alertmanager", team=None, notifications=1)
    elements = block_of(render_root(alertmanager, now=T0), "context")[0]["elements"]
    assert [e["text"] for e in elements][2:] == ["Source: Alertmanager", "1 notification"]


def test_links_only_present_and_only_http_ones_linked() -> None:
    incident = make_incident(
        links=Links(runbook="www.time.com", alert="https://g.example/a?x=1&y=2", panel="")
    )
    links = block_of(render_root(incident, now=T0), "context")[1]
    assert [e["text"] for e in links["elements"]] == [
        "📖 Runbook: www.time.com",
        "<https://g.example/a?x=1&amp;y=2|🔔 View alert>",
    ]


def test_no_links_no_links_block() -> None:
    root = render_root(make_incident(links=Links()), now=T0)
    assert len(block_of(root, "context")) == 1


@pytest.mark.parametrize(
    ("backend", "label"),
    [
        (None, "🔕 Silence in Grafana"),
        ("Grafana", "🔕 Silence in Grafana"),
        ("Alertmanager", "🔕 Grafana's silence form (this incident is silenced in Alertmanager)"),
    ],
    ids=["not-silenced", "silenced-in-grafana", "silenced-in-alertmanager"],
)
def test_the_silence_link_names_where_the_silence_is(backend: str | None, label: str) -> None:
    from bot.domain.incident.incidents import ActiveSilence, silenced

    grafana = "https://grafana.example/alerting/silence/new?matcher=alertname%3DQ"
    incident = make_incident(links=Links(silence=grafana))
    if backend is not None:
        made = ActiveSilence(
            silence_id="s1", backend=backend, until=T0 + timedelta(hours=1), by="U1", at=T0
        )
        incident = silenced(incident, made)
    links = block_of(render_root(incident, now=T0), "context")[1]
    assert [e["text"] for e in links["elements"]] == [f"<{grafana}|{label}>"]


def test_firing_root_offers_exactly_the_documented_actions() -> None:
    actions = block_of(render_root(make_incident(), now=T0), "actions")
    assert len(actions) == 1
    assert actions[0]["block_id"] == ACTIONS_BLOCK_ID == "incident_actions"
    elements = actions[0]["elements"]
    assert [e["action_id"] for e in elements] == [
        "incident_ack",
        "incident_silence",
        "incident_scale",
        "incident_diagnose",
        "incident_resolve",
    ]
    buttons = [e for e in elements if e["type"] == "button"]
    assert {b["value"] for b in buttons} == {"12:u12"}, "the short ID and the UID"
    assert [b["text"]["text"] for b in buttons] == [
        "Acknowledge",
        "Scale up…",
        "Run diagnostics",
        "Resolve",
    ]


def test_silence_select_offers_durations_in_seconds_ended_at_resolve_or_kept() -> None:
    elements = block_of(render_root(make_incident(), now=T0), "actions")[0]["elements"]
    select = next(e for e in elements if e["action_id"] == "incident_silence")
    assert select["type"] == "static_select"
    assert select["placeholder"]["text"] == "Silence…"
    assert "value" not in select
    durations = [
        ("1800", "30 minutes"),
        ("3600", "1 hour"),
        ("7200", "2 hours"),
        ("14400", "4 hours"),
        ("28800", "8 hours"),
        ("86400", "24 hours"),
    ]
    ends, kept = select["option_groups"]
    assert ends["label"]["text"] == "Ends when it resolves"
    assert [(o["value"], o["text"]["text"]) for o in ends["options"]] == durations
    assert kept["label"]["text"] == "Kept after it resolves"
    assert [(o["value"], o["text"]["text"]) for o in kept["options"]] == [
        (f"{seconds}:keep", said) for seconds, said in durations
    ]


@pytest.mark.parametrize(
    ("changes", "text", "confirm"),
    [
        (
            {"numbers": QueueNumbers(40, 0, 60, 10)},
            "This closes the incident and stops its status updates. If the alert fires again, "
            "it reopens.",
            "Resolve",
        ),
        # Still live: the one question says what is, and confirming resolves anyway.
        (
            {},
            "Still live: the longest wait 114 min (the alert last said it was over its "
            "threshold), and the alert is still firing. Resolving anyway closes the incident and "
            "stops its status updates. If the alert fires again, it reopens.",
            "Resolve anyway",
        ),
    ],
)
def test_resolve_is_dangerous_and_asks_once_what_is_still_live(
    changes: dict[str, Any], text: str, confirm: str
) -> None:
    incident = make_incident(**changes)
    elements = block_of(render_root(incident, now=T0), "actions")[0]["elements"]
    resolve = next(e for e in elements if e["action_id"] == "incident_resolve")
    assert resolve["style"] == "danger"
    assert resolve["confirm"]["title"]["text"] == "Resolve incident 12?"
    assert resolve["confirm"]["text"]["text"] == text
    assert resolve["confirm"]["confirm"]["text"] == confirm
    assert resolve["confirm"]["deny"]["text"] == "Cancel"


def test_acknowledged_root_offers_to_take_over_instead() -> None:
    elements = block_of(render_root(acknowledged(make_incident()), now=T0), "actions")[0][
        "elements"
    ]
    take_over = next(e for e in elements if e["action_id"] == "incident_ack")
    assert take_over["text"]["text"] == "Take over"
    assert "style" not in take_over
    assert len(elements) == 5


def test_the_first_post_of_the_root_names_the_owner_and_edits_mention_them() -> None:
    incident = acknowledged(make_incident())
    posted = render_root(incident, now=T0, mentions=False)
    edited = render_root(incident, now=T0)
    assert "<@" not in json.dumps(posted.blocks) + posted.text
    assert "acknowledged by *ann*" in json.dumps(posted.blocks)
    assert "acknowledged by <@U123ABC>" in json.dumps(edited.blocks)


def test_resolved_root_has_no_actions() -> None:
    for incident in (resolved(make_incident()), resolved(make_incident(), by="U1")):
        assert block_of(render_root(incident, now=T0), "actions") == []


def test_the_incident_ref_can_be_read_back_from_the_message() -> None:
    root = render_root(make_incident(id="42", uid="9f3a"), now=T0)
    assert incident_ref_of({"blocks": root.blocks}) == "42:9f3a"
    assert incident_ref_of({"blocks": []}) is None
    assert incident_ref_of({"blocks": ["not a block", 7]}) is None
    assert incident_ref_of({}) is None


def test_root_does_not_depend_on_now() -> None:
    incident = make_incident()
    assert render_root(incident, now=T0) == render_root(incident, now=T0 + timedelta(days=3))


# --- status replies --------------------------------------------------------------------------


def status_of(
    incident: Incident, previous: Snapshot | None, current: Snapshot, minutes_in: int = 65
) -> Rendered:
    now = incident.started_at + timedelta(minutes=minutes_in)
    return render_status(incident, previous=previous, current=current, now=now)


def test_first_status_has_numbers_without_changes() -> None:
    incident = make_incident()
    status = status_of(incident, None, incident.snapshot(T0 + timedelta(minutes=65)))
    texts = list(texts_of(status.blocks))
    assert texts[0] == (
        "*📊 Status update · <!date^1758045900^{time}|18:05 UTC>*\n"
        "Firing for *1 h 5 min* · not acknowledged"
    )
    assert texts[1:3] == ["Longest wait: *114 min*", "Queued jobs: *14*"]
    assert "▲" not in status.text and "▼" not in status.text
    assert status.text == "Status update: longest wait 114 min, queued jobs 14"


def test_status_reports_changes_since_the_previous_post() -> None:
    incident = acknowledged(make_incident())
    previous = Snapshot(
        at=T0,
        numbers=QueueNumbers(102, 16),
        runner_types={"gpu": RunnerQueue(10, 100), "gone": RunnerQueue(3, 7)},
    )
    current = Snapshot(
        at=T0 + timedelta(minutes=10),
        numbers=QueueNumbers(114, 14),
        runner_types={"gpu": RunnerQueue(10, 114), "new": RunnerQueue(4, 2.5)},
    )
    status = status_of(incident, previous, current)
    texts = list(texts_of(status.blocks))
    # Its age at its reading, whenever the sender posts it: one reply's minute, not two.
    assert texts[0].endswith("Firing for *10 min* · acknowledged by *ann*")
    assert "<@" not in json.dumps(status.blocks) + status.text, "a status pings nobody"
    assert texts[1:3] == ["Longest wait: *114 min* (▲ +12 min)", "Queued jobs: *14* (▼ -2)"]
    assert texts[3].splitlines() == [
        "*By runner type*",
        "• gpu: 10 queued (no change) · longest wait 114 min (▲ +14 min)",
        "• new: 4 queued · longest wait 2.5 min",
        "• gone: no longer queueing",
    ]
    assert status.text == ("Status update: longest wait 114 min (▲ +12 min), queued jobs 14 (▼ -2)")


def test_status_without_numbers_says_so() -> None:
    incident = no_numbers(make_incident())
    status = status_of(incident, None, incident.snapshot(T0))
    assert "_No queue numbers in the alert._" in list(texts_of(status.blocks))
    assert status.text == "Status update: no queue numbers"


def test_status_of_many_runner_types_is_capped() -> None:
    current = Snapshot(at=T0, runner_types={f"t{i:03d}": RunnerQueue(i, i) for i in range(100)})
    status = status_of(make_incident(), None, current)
    rows = list(texts_of(status.blocks))[-1].splitlines()
    assert rows[1].startswith("• t099: 99 queued")
    assert rows[-1] == "+85 more runner types"


# --- summary ---------------------------------------------------------------------------------


def test_summary_of_a_manual_resolve() -> None:
    incident = resolved(
        acknowledged(make_incident(peak=QueueNumbers(130, 16), notifications=4)), by="U999"
    )
    events = [
        Event(at=T0, kind="opened", text="Alert fired: <!channel>"),
        Event(
            at=T0 + timedelta(minutes=3),
            kind="acknowledged",
            text="Acknowledged",
            actor="U1",
            actor_name="al",
        ),
    ]
    summary = render_summary(incident, events, now=T0 + timedelta(hours=5))
    texts = list(texts_of(summary.blocks))
    assert texts[0] == (
        "✅ *Incident 12 resolved* by *ursula*\nP2 · Jobs queueing in autoscaled machines"
    )
    assert texts[1:7] == [
        "Duration: *1 h 18 min*",
        "Peak longest wait: *130 min*",
        "Peak queued jobs (as the alert said): *16*",
        "Acknowledged by *ann*",
        "Actions taken: *1*, by *al*",
        "Notifications: *4*",
    ]
    assert texts[7].splitlines() == [
        "*What was done*",
        "<!date^1758042000^{time}|17:00 UTC> · Alert fired: &lt;!channel&gt;",
        "<!date^1758042180^{time}|17:03 UTC> · Acknowledged · by *al*",
    ]
    assert "<@" not in json.dumps(summary.blocks) + summary.text, "a summary pings nobody"
    assert summary.text == (
        "Incident 12 resolved after 1 h 18 min: P2 · Jobs queueing in autoscaled machines"
    )


def test_a_summary_of_several_types_says_its_peak_is_their_sum() -> None:
    """The demo's summary said "Peak queued jobs: 36" above "linux.2xlarge: 30 queued": both
    true (36 is every type at once), read as two answers to one question."""
    peaks = {"linux.2xlarge": RunnerQueue(queued=30), "linux.4xlarge": RunnerQueue(queued=6)}
    incident = make_incident(peak=QueueNumbers(None, 36), peak_types=peaks)
    texts = list(texts_of(render_summary(resolved(incident), [], now=T0).blocks))
    assert "Peak queued jobs (all runner types): *36*" in texts
    peak_rows = next(t for t in texts if t.startswith("*Peak by runner type*")).splitlines()
    assert peak_rows[1:] == ["• linux.2xlarge: 30 queued", "• linux.4xlarge: 6 queued"]
    one = make_incident(peak=QueueNumbers(None, 30), peak_types=dict(list(peaks.items())[:1]))
    assert "Peak queued jobs: *30*" in texts_of(render_summary(resolved(one), [], now=T0).blocks)


def test_summary_of_an_alert_resolve_without_numbers() -> None:
    incident = resolved(no_numbers(make_incident()).model_copy(update={"reopened": 1}))
    texts = list(texts_of(render_summary(incident, [], now=T0).blocks))
    assert texts[0].startswith("✅ *Incident 12 resolved* (alert cleared)\n")
    assert "_No queue numbers in the alert._" in texts
    assert not any(text.startswith("Resolved") for text in texts), "said once, in the head"
    assert "Reopened: *1×*" in texts


def test_summary_keeps_the_most_recent_twenty_events() -> None:
    summary = render_summary(resolved(make_incident()), timeline(45), now=T0)
    lines = "\n".join(texts_of(summary.blocks[2:-1])).splitlines()
    assert lines[:2] == ["*What was done*", "_25 earlier events not shown_"]
    assert len(lines) == 22
    assert lines[2].endswith("· Acknowledged 25 · by *U1*"), "no name known: the ID, unlinked"
    assert lines[-1].endswith("· Acknowledged 44 · by *U1*")


def test_summary_while_still_firing_counts_to_now() -> None:
    summary = render_summary(make_incident(), [], now=T0 + timedelta(minutes=30))
    texts = list(texts_of(summary.blocks))
    assert texts[0].startswith("🔴 *Incident 12 still firing*")
    assert texts[1] == "Duration: *30 min*"


# --- event replies ---------------------------------------------------------------------------


def test_the_acknowledge_reply_mentions_the_new_owner() -> None:
    event = Event(at=T0, kind="acknowledged", text="Acknowledged", actor="U123ABC")
    reply = render_event(make_incident(), event)
    assert list(texts_of(reply.blocks)) == ["👀 Acknowledged · by <@U123ABC>"]
    assert reply.text == "Incident 12: Acknowledged"


def test_other_event_replies_name_the_actor_without_a_mention() -> None:
    event = Event(at=T0, kind="silenced", text="Silenced for 1 h", actor="U1", actor_name="al")
    reply = render_event(make_incident(), event)
    assert list(texts_of(reply.blocks)) == ["🔕 Silenced for 1 h · by *al*"]


def test_event_reply_escapes_alert_text() -> None:
    event = Event(at=T0, kind="alerts_changed", text="2 alerts firing now (<!here>, a&b)")
    reply = render_event(make_incident(), event)
    assert list(texts_of(reply.blocks)) == ["🔀 2 alerts firing now (&lt;!here&gt;, a&amp;b)"]


def test_unknown_event_kinds_get_a_bullet() -> None:
    reply = render_event(make_incident(), Event(at=T0, kind="new-kind", text="Something"))
    assert list(texts_of(reply.blocks)) == ["• Something"]


def test_a_cut_alert_says_so_on_the_root() -> None:
    cut = (
        "silence link has 200,000 matchers, 64 kept",
        "summary cut to 3000 of <9,000> characters",
    )
    root = render_root(make_incident(truncated=cut), now=T0)
    shown = json.dumps(root.blocks)
    assert "Alert cut to fit" in shown and "200,000 matchers, 64 kept" in shown
    assert "&lt;9,000&gt;" in shown, "escaped like any alert text"
    assert validate_blocks(root.blocks) == []


def test_a_silence_shows_on_the_root_and_in_status_replies_without_a_ping() -> None:
    from bot.domain.incident.incidents import ActiveSilence, silenced

    until = T0 + timedelta(hours=2)
    silence = ActiveSilence(
        silence_id="abc", backend="Grafana", until=until, by="U7", by_name="sam", at=T0
    )
    incident = silenced(make_incident(), silence)
    first_post = json.dumps(
        render_root(incident, now=T0, mentions=False).blocks, ensure_ascii=False
    )
    assert "🔕 silenced until <!date^" in first_post and "by *sam*" in first_post
    assert "<@U7>" not in first_post, "the first post notifies: it names, never mentions"
    elements = [
        e["action_id"]
        for b in render_root(incident, now=T0).blocks
        if b["type"] == "actions"
        for e in b["elements"]
    ]
    assert "incident_unsilence" in elements and "incident_silence" not in elements
    status = render_status(incident, previous=None, current=incident.snapshot(T0), now=T0)
    assert "🔕 silenced until" in json.dumps(status.blocks, ensure_ascii=False)


# -- one headline: live numbers when there is a live reading, the alert's otherwise -------------


def headline(incident: Incident) -> tuple[str, list[str]]:
    """The root's numbers block: its label and its fields."""
    [block] = [b for b in render_root(incident, now=T0).blocks if b.get("fields")]
    return block["text"]["text"], [f["text"] for f in block["fields"]]


def live_view(**gpu: Any) -> FleetSnapshot:
    types = {
        "linux.g5.4xlarge.nvidia.gpu": RunnerTypeMetrics(queued=9, **gpu),
        "linux.2xlarge": RunnerTypeMetrics(queued=0),
    }
    return FleetSnapshot(at=T0 + timedelta(minutes=5), source="hud", runner_types=types)


def test_the_headline_is_the_alerts_labelled_with_its_source_and_time() -> None:
    incident = make_incident(
        numbers=QueueNumbers(97, 23, 60, 20), alerted_at=T0 + timedelta(minutes=1)
    )
    label, numbers = headline(incident)
    assert label.startswith("*As the alert says* · Grafana at <!date^")
    assert numbers[0] == "Longest wait: *97 min* (threshold 60 min, peak 114 min)"


def test_a_live_reading_replaces_the_alerts_headline_never_beside_it() -> None:
    """The seed's disagreement: the alert said 97 min and 23 queued, the HUD reads 114 and 9."""
    incident = make_incident(
        numbers=QueueNumbers(97, 23, 60, 20), live=live_view(longest_wait_mins=114)
    )
    label, numbers = headline(incident)
    assert label.startswith("*Now* · live from the HUD at <!date^")
    assert numbers == [
        "Longest wait: *114 min* (threshold 60 min)",
        "Queued jobs: *9* (threshold 20 for a runner type)",
    ]
    shown = "\n".join(root_texts(incident))
    assert "97 min" not in shown and "*23*" not in shown


def test_a_wait_from_arcs_starts_past_the_top_bucket_reads_over_never_a_number() -> None:
    live = live_view(longest_wait_mins=60, wait_over=True, wait_of_starts=True)
    incident = make_incident(live=live.model_copy(update={"source": "prometheus"}))
    label, numbers = headline(incident)
    assert label.startswith("*Now* · live from Prometheus")
    assert numbers[0] == "Slowest recent start: *over 60 min*"
    listing = "\n".join(root_texts(incident))
    assert "slowest recent start *over 60 min*" in listing


def test_a_live_reading_without_numbers_for_the_incident_leaves_the_alerts_headline() -> None:
    """A listener being recreated serves nothing: "Queued jobs: 0" would be a guess."""
    empty = FleetSnapshot(
        at=T0, source="prometheus", runner_types={}, missing=("linux.g5.4xlarge.nvidia.gpu",)
    )
    label, numbers = headline(make_incident(live=empty))
    assert label.startswith("*As the alert says*")
    assert numbers[1] == "Queued jobs: *14* (no type over the rule's threshold)"


def test_a_status_says_a_wait_over_the_top_bucket_as_over_and_a_start_as_a_start() -> None:
    over = RunnerQueue(queued=9, longest_wait_mins=60, wait_over=True, wait_of_starts=True)
    current = Snapshot(
        at=T0 + timedelta(minutes=5),
        numbers=QueueNumbers(slowest_start_mins=60, max_queue_size=9),
        runner_types={"linux.g5.4xlarge.nvidia.gpu": over},
    )
    previous = Snapshot(
        at=T0,
        numbers=QueueNumbers(slowest_start_mins=40, max_queue_size=12),
        runner_types={"linux.g5.4xlarge.nvidia.gpu": RunnerQueue(12, 40, None, True)},
    )
    status = render_status(make_incident(), previous=previous, current=current, now=current.at)
    assert status.text.startswith("Status update: slowest recent start over 60 min, queued jobs 9")
    shown = "\n".join(texts_of(status.blocks))
    assert "Slowest recent start: *over 60 min*" in shown
    assert "+20 min" not in shown  # "over 60" is no number to subtract from
    assert "slowest recent start over 60 min" in shown  # the runner type's own line


def test_a_peak_keeps_what_its_wait_was_measured_as() -> None:
    name = "linux.g5.4xlarge.nvidia.gpu"
    before = {name: RunnerQueue(queued=9, longest_wait_mins=60, wait_over=True)}
    grown = peak_types_of(before, {name: RunnerQueue(queued=12, longest_wait_mins=60)})
    assert grown[name] == RunnerQueue(12, 60, True, None)  # more queued; still "over 60"
    longer = peak_types_of(grown, {name: RunnerQueue(queued=3, longest_wait_mins=75)})
    assert longer[name] == RunnerQueue(12, 75, None, None)  # a job's age, measured: 75


def test_a_drained_incident_shows_its_worst_seen_as_its_summary_does() -> None:
    """The alert said 36 queued (its rule's maximum over its window); the readings then saw 28
    at most; the queue drained. The resolved root shows the worst seen, 28, as the summary's
    peak does, not the alert's 36 as if it were still news."""
    incident = make_incident(numbers=QueueNumbers(12, 36, queue_size_threshold=10))
    for minute, queued in ((10, 28), (20, 0)):
        at = T0 + timedelta(minutes=minute)
        metrics = RunnerTypeMetrics(queued=queued, longest_wait_mins=9 if queued else 0)
        live = FleetSnapshot(at=at, source="prometheus", runner_types={"linux.2xlarge": metrics})
        incident = record_status(incident, as_snapshot(incident, live, at), live=live)
    resolved = resolve_drained(incident, now=T0 + timedelta(minutes=25))
    root = json.dumps(render_root(resolved, now=T0 + timedelta(minutes=25)).blocks)
    summary = json.dumps(render_summary(resolved, [], now=T0 + timedelta(minutes=25)).blocks)
    assert "*Worst seen*" in root and "Peak queued jobs: *28*" in root
    assert "36" not in root
    assert "Peak queued jobs: *28*" in summary


def test_a_threshold_is_said_of_what_the_rule_holds_to_it() -> None:
    """The rule holds a runner type's queue to its threshold: beside one type's queue it is the
    threshold; beside a total over several (4 + 10 against 12), it is a type's, or 14 against
    12 would read as crossed when no type was."""
    one = {"linux.2xlarge": RunnerQueue(queued=14, longest_wait_mins=20)}
    two = {
        "linux.2xlarge": RunnerQueue(queued=4, longest_wait_mins=20),
        "linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=10, longest_wait_mins=30),
    }
    for types, said in ((one, "(threshold 12)"), (two, "(threshold 12 for a runner type)")):
        incident = make_incident(numbers=QueueNumbers(30, 10, 60, 12), runner_types=types)
        fields = [
            f["text"] for b in render_root(incident, now=T0).blocks for f in b.get("fields", ())
        ]
        assert f"Queued jobs: *14* {said}" in fields, fields
