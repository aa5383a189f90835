"""What the demo's page says of a runner type's queue, read from its text as a person reads it.

The root, a status reply and the diagnostics report each show one fleet reading: its time, the
"Queued jobs" headline (the root and a status), and the type's line: how many jobs queue, the
longest wait, and the reading's judgement: the direction and the advice ("▲ rising +1.2 jobs/min ·
+6 runners would drain it in 30 min", "▼ falling 2.0 jobs/min · none: it clears in ~7 min"), in
the words `bot.domain.reading.judgement.Judgement` gives all three.

They show the same reading only at certain moments, which the page itself tells apart: the root
and a status are rendered from the incident when they are sent, and every status commit adds a
point to the incident's trend, drawn as the sparkline of the type's line in both (no bars below
two points, then one bar a point up to `SPARK_POINTS`). So a live root whose bars are a status's
was rendered from that status's commit. Diagnostics make their reading the root's "Now" without a
trend point: the root that names them in its latest actions, with the bars of the status before
them, shows their reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.domain.incident.trend import BARS

# The judgement's parts: where the queue heads, and the advice.
OUTLOOK = re.compile(r"^(?:▲ rising|▼ falling|holding$|\+\d+ runners? |none: )")
DIAGNOSED = "Diagnostics: likely cause"  # the root's latest actions, once diagnostics ran


@dataclass(frozen=True)
class TypeLine:
    queued: str | None  # "30", as shown; None when no count is shown
    wait: str  # "longest wait 8.4 min"
    outlook: str  # "" when the line has none
    bars: str  # the trend's sparkline; diagnostics draw none


# A reading's time in the reader's zone and hour cycle, as the page shows Slack's date tokens.
AT = r"\d{1,2}:\d\d(?:\s(?:UTC|AM|PM))?"


@dataclass(frozen=True)
class Said:
    """What one message says: its text, the reading's time as the reader sees it ("12:16",
    "12:16 PM"; "12:16 UTC" where a date is shown as its fallback), the headline's queued
    jobs, the type's line, and the queued jobs of all the types it lists (None when it leaves
    some out)."""

    text: str
    at: str | None
    total: str | None
    line: TypeLine | None
    listed: float | None


def root_said(text: str, runner_type: str) -> Said:
    return _listing(text, runner_type, rf"live from \S+ at ({AT})", "Runner types")


def status_said(text: str, runner_type: str) -> Said:
    return _listing(text, runner_type, rf"Status update · ({AT})", "By runner type")


def diagnostics_said(text: str, runner_type: str) -> Said:
    """`linux.2xlarge · 30 queued, longest wait 8 min · growing …`: numbers, then the outlook."""
    at = _first(rf"Diagnostics · incident \S+ · ({AT})", text)
    found = re.search(rf"(?m)^{re.escape(runner_type)} · (.*)$", text)
    line = None
    if found is not None:
        parts = found.group(1).split(" · ")
        numbers = [p for p in parts if not OUTLOOK.match(p)]
        line = TypeLine(
            queued=_queued(numbers),
            wait=next((p for p in numbers if "wait" in p or "start" in p), ""),
            outlook=_outlook(parts),
            bars="",
        )
    return Said(text, at, None, line, None)


@dataclass(frozen=True)
class Moment:
    """The root beside another message of the same reading."""

    root: Said
    other: Said


@dataclass(frozen=True)
class Missed:
    """A moment that passed unseen: the root moved on before it showed the other message's
    reading (a newer status after diagnostics; a newer reading before the page drew the root a
    status edited: the root follows each reading, and one root's edits are paced). The walk
    cannot time its steps against the bot's cycle; the property tests hold the two to one
    reading either way."""

    root: str
    status: str


def after_diagnostics(
    root: str,
    diagnostics: str | None,
    status: str | None,
    *,
    status_before: str,
    runner_type: str,
    moments: tuple[float | None, float | None] = (None, None),
) -> Moment | Missed | None:
    """The root showing the diagnostics' reading, beside the report; None until it does.

    `status_before` is the latest status when diagnostics were asked for: once a newer one is
    shown, a root not yet showing their reading never will (its Now is the newer status's):
    `Missed`. `moments`: the root's and the report's readings to the second, as the page keeps
    them; the root past the report's reading is `Missed` too (it follows each reading)."""
    shown, before = root_said(root, runner_type), status_said(status_before, runner_type)
    root_at, report_at = moments
    if diagnostics is not None and root_at is not None and report_at is not None:
        if root_at > report_at:
            return Missed(root, status or status_before)
        if root_at < report_at:
            return None
    if (
        diagnostics is not None
        and DIAGNOSED in root
        and shown.line is not None
        and before.line is not None
        and shown.line.bars == before.line.bars
    ):
        return Moment(shown, diagnostics_said(diagnostics, runner_type))
    if status is not None and status != status_before:
        return Missed(root, status)
    return None


def at_next_status(
    root: str,
    status: str | None,
    *,
    status_before: str | None,
    runner_type: str,
    moments: tuple[float | None, float | None] = (None, None),
) -> Moment | Missed | None:
    """The root and the first status after `status_before` (posted, or that one edited in place)
    showing one reading; None until both show it. `moments`: the root's and the status's
    readings to the second, as the page keeps them (`sandbox.visitor.Seen`): the text's minute
    cannot tell apart the readings the root follows between statuses. The root past the
    status's reading without having shown it is `Missed`."""
    if status is None or status == status_before:
        return None
    shown, said = root_said(root, runner_type), status_said(status, runner_type)
    if shown.at is None or shown.line is None or said.line is None:
        return None
    root_at, status_at = moments
    if root_at is not None and status_at is not None:
        if root_at > status_at:
            return Missed(root, status)
        if root_at < status_at:
            return None
    # The bars are scaled to their highest: two commits can draw alike; the reading's time
    # tells them apart.
    if shown.line.bars != said.line.bars or shown.at != said.at:
        return None
    return Moment(shown, said)


def _outlook(parts: list[str]) -> str:
    """The direction and the advice, as one text ("" when the line has neither)."""
    return " · ".join(p for p in parts if OUTLOOK.match(p))


def _listing(text: str, runner_type: str, at: str, heading: str) -> Said:
    lines = _listed(text, heading)
    parts = next((rest.split(" · ") for name, rest in lines if name == runner_type), None)
    line = None
    if parts is not None:
        line = TypeLine(
            queued=_queued(parts),
            wait=next((p for p in parts if "wait" in p or "start" in p), ""),
            outlook=_outlook(parts),
            bars=next((p for p in parts if p and set(p) <= set(BARS + " ")), ""),
        )
    counts = [_queued(rest.split(" · ")) for _, rest in lines]
    complete = not re.search(r"(?m)^\+\d+ more runner types", text)
    listed = sum(float(c) for c in counts if c is not None) if complete else None
    return Said(text, _first(at, text), _first(r"Queued jobs: (\S+)", text), line, listed)


def _listed(text: str, heading: str) -> list[tuple[str, str]]:
    """The `• name: …` lines that follow the listing's heading."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return []
    found = []
    for line in lines[start + 1 :]:
        item = re.match(r"• (.+?): (.*)$", line)
        if item is None:
            break
        found.append((item.group(1), item.group(2)))
    return found


def _queued(parts: list[str]) -> str | None:
    return next((m.group(1) for p in parts if (m := re.fullmatch(r"(\S+) queued", p))), None)


def _first(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text)
    return found.group(1) if found else None
