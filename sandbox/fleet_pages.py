"""The pages a demo alert's links open, in place of Grafana's: the alert rule with its current
state (*View alert*), and the new-silence form (*Silence in Grafana*), which here says where the
demo's silences are made and lists those its Alertmanager holds. Plain HTML, every value escaped."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from html import escape

from sandbox.fleet_alerts import QueueRule, Silence, Silences, annotations_of

STATES = {"normal": "Normal", "pending": "Pending", "firing": "Firing"}
STYLE = "font-family:sans-serif;max-width:60em"


def rule_page(rule: QueueRule, silences: Silences, now: datetime, *, speed: float) -> str:
    """The rule as Grafana's rule view shows it: what it says, its condition in real minutes (as
    its payloads say them), its labels and state, and the silences that hold it now."""
    labels, c = rule.labels, rule.config
    notes = annotations_of(labels)
    summary, description = (escape(notes.get(k, "")) for k in ("summary", "description"))
    state = STATES.get(rule.state, rule.state)
    silenced = [s for s in silences.all() if s.state(now) == "active" and s.matches(labels)]
    condition = (
        f"Fires when a runner type has {c.fire_queued} jobs queued or one waited "
        f"{c.fire_wait_min / speed:g} min, for {c.pending_min / speed:g} min; recovers when none "
        f"has more than {c.recover_queued} queued nor waited over {c.recover_wait_min / speed:g} "
        f"min; notifies again every {c.repeat_min / speed:g} min while firing."
    )
    return _page(
        labels["alertname"],
        f"<p>Folder {escape(labels['grafana_folder'])} · rule UID "
        f"<code>{escape(labels['__alert_rule_uid__'])}</code> · state <b>{state}</b>"
        f"{' (silenced)' if silenced else ''}</p>"
        f"<p><b>{summary}</b><br>{description}</p>"
        f"<p>{escape(condition)}</p>"
        f"<h2>Labels</h2>{_table(('label', 'value'), sorted(labels.items()))}"
        f"<h2>Silences holding it</h2>{_silences(silenced, now)}",
    )


def silence_form(matchers: Iterable[str], silences: Silences, now: datetime) -> str:
    """Grafana's new-silence link: the matchers it carries, and where silences are made here."""
    asked = "".join(f"<li><code>{escape(m)}</code></li>" for m in matchers)
    return _page(
        "New silence",
        f"<p>The alert's link asks for a silence matching:</p><ul>{asked or '<li>nothing</li>'}"
        "</ul><p>In this demo silences are made from Slack: the incident's <b>Silence…</b> menu, "
        "or <code>/queue silence 2h</code>. The silences its Alertmanager holds:</p>"
        + _silences(silences.all(), now),
    )


def _silences(silences: list[Silence], now: datetime) -> str:
    if not silences:
        return "<p>None.</p>"
    rows = [
        (
            s.state(now),
            ", ".join(f"{m['name']}{_operator(m)}{m['value']}" for m in s.matchers),
            s.ends_at.strftime("%Y-%m-%d %H:%M UTC"),
            s.created_by,
            s.comment,
        )
        for s in silences
    ]
    return _table(("state", "matchers", "ends", "by", "comment"), rows)


def _operator(matcher: dict[str, object]) -> str:
    equal, regex = matcher.get("isEqual", True), matcher.get("isRegex", False)
    return ("=~" if regex else "=") if equal else ("!~" if regex else "!=")


def _table(head: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    cells = "".join(
        "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    heading = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table border=1 cellpadding=4><tr>{heading}</tr>{cells}</table>"


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><meta charset=utf-8><title>{escape(title)} · Simulated Grafana</title>"
        f"<body style='{STYLE}'><h1>{escape(title)}</h1>{body}"
        "<p><small>The demo's stand-in for Grafana's page; <a href='/'>the fleet</a>.</small></p>"
        "</body>"
    )
