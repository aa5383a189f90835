"""PyTorch's alerting pipeline (pytorch/alerting-infra) as a stand-in: given the Grafana
notification queuepilot gets, it opens, comments on and closes the alert's GitHub issue on the
GitHub stand-in (`sandbox.github_issues`) as its collector Lambda does, after a delay that stands
for the way there (Grafana -> webhook Lambda -> SNS -> SQS, a 1 s batching window -> the
collector).

Built from its source at lambdas/collector/src (commit b01699c, "Support multiple teams per alert
(#195)"):
- transformers/grafana.ts: the first alert speaks for the notification; the title is its
  `rulename`, else its `alertname`, else the group's; the state its status; `Priority` and
  `Team`/`Teams` (annotations, then labels) are required, else the alert is dropped.
- transformers/base.ts: priority P0-P3 or 0-3; teams comma-separated, trimmed, lower-case, spaces
  as hyphens, each at most 50 characters and at most 10 of them, else the alert is dropped.
- fingerprint.ts: SHA-256 of the sorted `key=value` pairs of source, lower-case title, orgId and
  the first alert's fingerprint, joined by `|`: the alert's key in DynamoDB (a dict here).
- processor.ts `determineAction`: no state: CREATE if firing; OPEN and firing: COMMENT; OPEN and
  resolved: CLOSE; CLOSED and firing: CREATE (a new issue); an older notification: skipped.
- index.ts: the issue `[<priority>] <title>` with labels area:alerting, Pri:<priority>, one
  Team:<team> per team, Source:grafana and a body ending in the fingerprint; a failed GitHub call
  is logged and the state saved without the issue (never retried). Its label pre-creation
  (`ensureTeamLabels`) is left out: GitHub creates a missing label when an issue names it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

log = logging.getLogger(__name__)

ZERO_TIME = "0001-01-01T00:00:00Z"
HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
           "User-Agent": "pytorch-alerting"}  # fmt: skip


class Dropped(ValueError):
    """The collector refuses the notification (a missing priority, a team name too long...)."""


@dataclass(frozen=True)
class AlertEvent:
    title: str
    state: str  # FIRING | RESOLVED
    priority: str
    teams: tuple[str, ...]
    occurred_at: datetime
    fingerprint: str
    summary: str = ""
    description: str = ""


@dataclass
class AlertState:
    status: str  # OPEN | CLOSED
    issue_number: int | None
    last_provider_state_at: datetime


@dataclass
class AlertingPipeline:
    github_url: str
    repo: str
    token: str
    delay_s: float = 3.0  # the way from Grafana to the collector
    states: dict[str, AlertState] = field(default_factory=dict)  # DynamoDB's table
    actions: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, action)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def notify(self, payload: dict[str, Any]) -> None:
        """Grafana posted the notification: the collector gets it `delay_s` later."""
        task = asyncio.get_running_loop().create_task(self._later(payload))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settled(self) -> None:
        """Every notification so far processed."""
        await asyncio.gather(*self._tasks)

    async def _later(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay_s)
        await self.process(payload)

    async def process(self, payload: dict[str, Any]) -> str:
        """The collector's handling of one SQS record: the action it took."""
        try:
            event = alert_event(payload)
        except Dropped as exc:
            log.warning("alerting-infra stand-in: dropped: %s", exc)
            return "DROPPED"
        action = self._action(event)
        self.actions.append((event.fingerprint, action))
        state = self.states.get(event.fingerprint)
        number = state.issue_number if state else None
        async with httpx.AsyncClient(
            base_url=self.github_url, headers={**HEADERS, "Authorization": f"Bearer {self.token}"}
        ) as github:
            if action == "CREATE":
                number = await self._create(github, event)
            elif action == "CLOSE" and number is not None:
                await self._send(github, "PATCH", f"/{number}", {"state": "closed"})
            elif action == "COMMENT" and number is not None:
                body = (f"**Alert Update**\n- **State**: {event.state}\n- **Occurred At**: "
                        f"{event.occurred_at.isoformat()}\n\nThe alert condition is still "
                        f"active.\n\n**Fingerprint**: `{event.fingerprint}`")  # fmt: skip
                await self._send(github, "POST", f"/{number}/comments", {"body": body})
        if not action.startswith("SKIP"):
            status = "OPEN" if event.state == "FIRING" else "CLOSED"
            self.states[event.fingerprint] = AlertState(status, number, event.occurred_at)
        return action

    def _action(self, event: AlertEvent) -> str:
        state = self.states.get(event.fingerprint)
        if state is None:
            return "CREATE" if event.state == "FIRING" else "SKIP_STALE"
        if event.occurred_at < state.last_provider_state_at:
            return "SKIP_STALE"
        if event.state == "FIRING":
            return "CREATE" if state.status == "CLOSED" else "COMMENT"
        return "CLOSE" if state.status == "OPEN" else "SKIP_STALE"

    async def _create(self, github: httpx.AsyncClient, event: AlertEvent) -> int | None:
        body = "".join([
            f"**{event.summary}**\n\n" if event.summary else "", "**Alert Details**\n",
            f"- *Occurred At*: {event.occurred_at.isoformat()}\n", f"- *State*: {event.state}\n",
            f"- *Team{'s' if len(event.teams) > 1 else ''}*: {', '.join(event.teams)}\n",
            f"- *Priority*: {event.priority}\n",
            f"- *Description*: {event.description}\n" if event.description else "",
            "- *Source*: grafana\n", f"- *Fingerprint*: `{event.fingerprint}`\n",
        ])  # fmt: skip
        labels = ["area:alerting", f"Pri:{event.priority}",
                  *(f"Team:{team}" for team in event.teams), "Source:grafana"]  # fmt: skip
        title = f"[{event.priority}] {event.title}"
        answer = await self._send(github, "POST", "", {"title": title, "body": body,
                                                       "labels": labels})  # fmt: skip
        return int(answer["number"]) if answer else None

    async def _send(
        self, github: httpx.AsyncClient, method: str, tail: str, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        response = await github.request(method, f"/repos/{self.repo}/issues{tail}", json=body)
        if response.is_success:
            return dict(response.json())
        log.error("alerting-infra stand-in: %s %s: %s", method, tail, response.status_code)
        return None


def alert_event(payload: dict[str, Any]) -> AlertEvent:
    alert = (payload.get("alerts") or [payload])[0]
    labels = alert.get("labels") or payload.get("commonLabels") or {}
    annotations = alert.get("annotations") or payload.get("commonAnnotations") or {}
    title = next(
        (c.strip() for c in (labels.get("rulename"), labels.get("alertname"),
                             (payload.get("groupLabels") or {}).get("alertname"),
                             payload.get("title")) if isinstance(c, str) and c.strip()),
        "",
    )  # fmt: skip
    if not title:
        raise Dropped('Missing required field "rulename" or "alertname"')
    status = str(alert.get("status") or payload.get("status") or "").lower()
    state = {"firing": "FIRING", "alerting": "FIRING", "resolved": "RESOLVED", "ok": "RESOLVED"}
    if status not in state:
        raise Dropped(f"Unable to determine alert state. Received status: '{status}'")
    sources = (annotations, labels, payload)
    priority = _field(sources, ("priority",))
    team = _field(sources, ("teams", "team"))
    if not priority:
        raise Dropped('Missing required field "Priority"')
    if not team:
        raise Dropped('Missing required field "Team"')
    return AlertEvent(
        title=title,
        state=state[status],
        priority=_priority(str(priority)),
        teams=_teams(str(team)),
        occurred_at=_occurred_at(alert),
        fingerprint=_fingerprint(title, payload.get("orgId"), alert.get("fingerprint")),
        summary=str(annotations.get("summary") or "")[:1500],
        description=str(annotations.get("description") or "")[:1500],
    )


def _field(sources: tuple[dict[str, Any], ...], names: tuple[str, ...]) -> Any:
    """`extractFieldValue`: its case variants, the plural first, source by source."""
    variants = [v for n in names for v in (n, n.lower(), n.upper(), n.capitalize())]
    for source in sources:
        for variant in dict.fromkeys(variants):
            if source.get(variant) is not None:
                return source[variant]
    return None


def _priority(value: str) -> str:
    normalized = value.upper().strip()
    if normalized in ("P0", "P1", "P2", "P3"):
        return normalized
    if normalized in ("0", "1", "2", "3"):
        return f"P{normalized}"
    raise Dropped(f"Invalid priority value: '{value}'. Expected P0, P1, P2, P3, or 0-3.")


def _teams(value: str) -> tuple[str, ...]:
    teams = [team.strip() for team in value.split(",") if team.strip()]
    for team in teams:
        if len(team) > 50:
            raise Dropped(f"Team name too long (max 50 characters): '{team[:30]}...'")
    if not teams:
        raise Dropped("No valid team names found after parsing comma-delimited list")
    if len(teams) > 10:
        raise Dropped(f"Too many teams specified (max 10, got {len(teams)})")
    return tuple("-".join(team.lower().split()) for team in teams)


def _occurred_at(alert: dict[str, Any]) -> datetime:
    for candidate in (alert.get("startsAt"), alert.get("endsAt")):
        if candidate and candidate != ZERO_TIME:
            return datetime.fromisoformat(str(candidate))
    return datetime.now(UTC)


def _fingerprint(title: str, org_id: Any, alarm_id: Any) -> str:
    inputs = {"source": "grafana", "title": title.lower()}
    if org_id not in (None, ""):
        inputs["account_id"] = str(org_id)
    if alarm_id:
        inputs["alarm_id"] = str(alarm_id)
    canonical = "|".join(f"{key}={inputs[key]}" for key in sorted(inputs))
    return hashlib.sha256(canonical.encode()).hexdigest()
