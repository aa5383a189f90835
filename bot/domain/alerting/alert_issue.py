"""The alert's GitHub issue: which issue is the alert's, and what it is told. Found and opened
as pytorch/alerting-infra does (`[P2] <rule>`, labels `area:alerting`, `Pri:P2`, a `Team:<team>`
per team, `Source:<source>`), so a team running both sees one issue per alert."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from bot.domain.incident.incidents import ACKNOWLEDGED_BY_ACTING, AMENDED, Event, Incident
from bot.domain.scale.scale_ups import SCALE_OUTCOME
from bot.domain.shortened import shortened

AREA_LABEL = "area:alerting"
# Timeline kinds a comment tells; everything else (statuses, notifications) stays in Slack.
MOMENTS = frozenset(
    {"acknowledged", ACKNOWLEDGED_BY_ACTING, "handed_over", "silenced", "unsilenced", "scaled"}
    | {"scale_reverted", SCALE_OUTCOME, "pilot_undone", "pilot_dry_run"}
    | {"pilot_paused", "pilot_resumed", "pilot_declined"}
    | {"diagnosed", "alert_cleared", "resolved", "reopened", "postmortem", AMENDED}
)
THREAD_MOMENT = "thread"  # the first thing an issue hears: where the incident's thread is
MAX_TITLE = 256  # GitHub's
MAX_LABEL = 50  # GitHub refuses a longer label name (422)
# alerting-infra's issue body: ``- *Fingerprint*: `<hex>` `` (lambdas/collector/src/index.ts).
_PIPELINE_KEY = re.compile(r"\*Fingerprint\*: `([0-9a-f]{64})`")


def priority_label(priority: str | None) -> str | None:
    """`P0`…`P3` ("p2", "2" and " P2 " are P2), else None."""
    found = re.fullmatch(r"P?([0-3])", (priority or "").strip().upper())
    return f"P{found[1]}" if found else None


def team_labels(team: str | None) -> tuple[str, ...]:
    """A team lower-case, spaces as hyphens (alerting-infra's `extractTeams`)."""
    teams = (re.sub(r"\s+", "-", part.strip().lower()) for part in (team or "").split(","))
    return tuple(dict.fromkeys(f"Team:{t}"[:MAX_LABEL] for t in teams if t))


def issue_title(incident: Incident) -> str:
    """`[P2] <the rule's name>`, as alerting-infra titles it: no "(no data)" or "(+N more)"."""
    priority = priority_label(incident.priority)
    title = (incident.rule or incident.title).strip()
    return shortened(f"[{priority}] {title}" if priority else title, MAX_TITLE)


def issue_labels(incident: Incident) -> tuple[str, ...]:
    priority = priority_label(incident.priority)
    pri = (f"Pri:{priority}",) if priority else ()
    return (AREA_LABEL, *pri, *team_labels(incident.team), f"Source:{incident.source}")


def is_alert_issue(incident: Incident, title: str, body: str, labels: tuple[str, ...]) -> bool:
    """Our group mark in its body; else, with all our teams among its `Team:` labels,
    alerting-infra's key, else its title when it carries no other group's mark or key."""
    if group_mark(incident) in body:
        return True
    ours = {label.lower() for label in team_labels(incident.team)}
    teams = {label.lower() for label in labels if label.lower().startswith("team:")}
    if ours and teams and not ours <= teams:
        return False
    keyed = _PIPELINE_KEY.search(body)
    if keyed and incident.pipeline_key:
        return keyed[1] == incident.pipeline_key
    # Opened for another group of the same rule (one title): that incident's.
    return GROUP_MARK_START not in body and _words(title) == _words(issue_title(incident))


def _words(title: str) -> str:
    return " ".join(title.split()).casefold()


GROUP_MARK_START = "<!-- queuepilot:group:"


def group_mark(incident: Incident) -> str:
    return f"{GROUP_MARK_START}{incident.group_hash} -->"


def tells_issue(events: Sequence[Event]) -> bool:
    return any(event.kind in MOMENTS or event.kind == "opened" for event in events)


def moment_key(event: Event) -> str:
    return f"{event.at.isoformat()}|{event.kind}"


def comment_mark(incident: Incident, key: str) -> str:
    """So that a comment whose answer was lost is found, not made twice."""
    digest = hashlib.sha256(f"{incident.uid}|{key}".encode()).hexdigest()[:16]
    return f"<!-- queuepilot:moment:{digest} -->"


@dataclass(frozen=True)
class Moment:
    key: str
    event: Event | None = None


def moments(timeline: list[Event]) -> list[Moment]:
    told = {THREAD_MOMENT: Moment(THREAD_MOMENT)}
    for event in timeline:
        if event.kind in MOMENTS:
            key = moment_key(event)
            told.setdefault(key, Moment(key, event))
    return list(told.values())


class IssueLink(BaseModel, frozen=True):
    """`ours`: we close and reopen it. `trying`: the moment (or "open") whose call was not
    answered: look for it first. `repo`: where it is (transferred, maybe). `passed`: issues
    closed by their owner or gone, never linked again. `left`: GitHub refused it for good."""

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
    passed: tuple[int, ...] = ()
    left: bool = False

    @property
    def linked(self) -> bool:
        return self.number > 0


def pending(link: IssueLink, timeline: list[Event]) -> list[Moment]:
    told = set(link.told)
    return [moment for moment in moments(timeline) if moment.key not in told]


def issue_number(url: str) -> int | None:
    tail = url.rstrip("/").rpartition("/")[2]
    return int(tail) if tail.isdigit() else None
