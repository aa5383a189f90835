"""The alert's GitHub issue: which issue is the alert's, and what it is told, as pure functions.
PyTorch's alerting pipeline (pytorch/alerting-infra) titles an alert's issue `[P2] <title>` and
labels it `area:alerting`, `Pri:P2`, `Team:<team>`, `Source:<source>`; we find and open issues
the same way, so a team running both sees one convention."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from bot.domain.incidents import Event, Incident

AREA_LABEL = "area:alerting"
# Timeline kinds a comment tells; everything else (statuses, notifications) stays in Slack.
MOMENTS = frozenset(
    {"acknowledged", "handed_over", "silenced", "unsilenced", "scaled", "scale_reverted"}
    | {"diagnosed", "resolved", "reopened", "postmortem"}
)
THREAD_MOMENT = "thread"  # the first thing an issue hears: where the incident's thread is
MAX_TITLE = 256  # GitHub's


def priority_label(priority: str | None) -> str | None:
    """`P0`…`P3` ("p2", "2" and " P2 " are P2), else None."""
    found = re.fullmatch(r"P?([0-3])", (priority or "").strip().upper())
    return f"P{found[1]}" if found else None


def team_label(team: str | None) -> str | None:
    return re.sub(r"\s+", "-", team.strip().lower()) if team and team.strip() else None


def issue_title(incident: Incident) -> str:
    priority = priority_label(incident.priority)
    title = incident.title.strip()
    full = f"[{priority}] {title}" if priority else title
    return full if len(full) <= MAX_TITLE else full[: MAX_TITLE - 1] + "…"


def issue_labels(incident: Incident) -> tuple[str, ...]:
    priority, team = priority_label(incident.priority), team_label(incident.team)
    optional = (f"Pri:{priority}" if priority else "", f"Team:{team}" if team else "")
    return (AREA_LABEL, *filter(None, optional), f"Source:{incident.source}")


def is_alert_issue(incident: Incident, title: str, body: str, labels: tuple[str, ...]) -> bool:
    """Our mark of the alert group in its body, else its title when it carries no other
    group's mark; and no other team's label."""
    team = team_label(incident.team)
    teams = {label.partition(":")[2] for label in labels if label.lower().startswith("team:")}
    if team and teams and team not in {t.lower() for t in teams}:
        return False
    if group_mark(incident) in body:
        return True
    # An issue queuepilot opened for another group of the same rule (one Grafana rule, several
    # label groups: one title) is that incident's, closed when it resolves.
    if GROUP_MARK_START in body:
        return False
    return _words(title) == _words(issue_title(incident))


def _words(title: str) -> str:
    return " ".join(title.split()).casefold()


GROUP_MARK_START = "<!-- queuepilot:group:"


def group_mark(incident: Incident) -> str:
    """A hidden line in the body of an issue we opened: which alert group it is for."""
    return f"{GROUP_MARK_START}{incident.group_hash} -->"


def tells_issue(events: Sequence[Event]) -> bool:
    return any(event.kind in MOMENTS or event.kind == "opened" for event in events)


def moment_key(event: Event) -> str:
    return f"{event.at.isoformat()}|{event.kind}"


def comment_mark(incident: Incident, key: str) -> str:
    """A hidden line in a comment, so that a comment whose answer was lost is found, not made
    twice."""
    digest = hashlib.sha256(f"{incident.uid}|{key}".encode()).hexdigest()[:16]
    return f"<!-- queuepilot:moment:{digest} -->"


@dataclass(frozen=True)
class Moment:
    key: str
    event: Event | None = None


def moments(timeline: list[Event]) -> list[Moment]:
    told = [Moment(THREAD_MOMENT)]
    seen = {THREAD_MOMENT}
    for event in timeline:
        key = moment_key(event)
        if event.kind in MOMENTS and key not in seen:
            seen.add(key)
            told.append(Moment(key, event))
    return told


class IssueLink(BaseModel):
    """`ours`: we opened it, so we close and reopen it. `trying`: the moment (or "open") whose
    call was not answered: look for it before trying again."""

    repo: str
    number: int = 0  # 0: none linked yet
    url: str = ""
    ours: bool = False
    closed: bool = False
    searches: int = 0
    told: tuple[str, ...] = ()
    trying: str = ""
    failures: int = 0
    refused: str = ""

    model_config = ConfigDict(frozen=True)

    @property
    def linked(self) -> bool:
        return self.number > 0


def pending(link: IssueLink, timeline: list[Event]) -> list[Moment]:
    told = set(link.told)
    return [moment for moment in moments(timeline) if moment.key not in told]


def issue_number(url: str) -> int | None:
    tail = url.rstrip("/").rpartition("/")[2]
    return int(tail) if tail.isdigit() else None
