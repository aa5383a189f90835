"""What a responder should have read along a trajectory, checked over what each surface said
after each step (`Look`), and the table of it that the trajectories print.

One judgement, rendered everywhere: after one reading the root, the latest status (where it
shows that reading: a status is posted only on a material change), diagnostics and `/queue`
give the same advice, and the Scale up… modal is pre-filled with it (capped), able
to raise the maximum when the advice asks for that; every surface reads the expected direction
by the third reading after a turn; none says rising or +N once the queue fell two readings in
a row (but a +N held over the advice window, said as held), nor advises runners or a higher
maximum with nothing queued; the form's default is one
the scale set takes; and where the queue only wanders, consecutive readings don't flap between
advice of opposite kinds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from tests.support.fakes.arc_script import Step
from tests.support.trajectory_text import (
    Advice,
    Direction,
    advice_line,
    advice_of,
    cites_maximum,
    direction_of,
    raise_of,
    type_lines,
)

HELD = "a dip changes nothing"  # a +N held over the window, said as such
RUNNER_TYPE = "linux.2xlarge"
CAP = 20  # the most one scale request may add (the scale target's `cap`)
SURFACES = ("root", "status", "diagnostics", "/queue")
ARROWS = {"rising": "▲", "falling": "▼", "holding": "="}


@dataclass
class Look:
    """What every surface said after one reading of one step."""

    step: int
    shown: Step  # the step as the listener reported it (desired, minimum, maximum filled in)
    expect: Direction | None  # the direction a responder should read; None: no claim
    stamp: int | None = None  # the reading every surface rendered; None: never one
    attempts: int = 0
    said: dict[str, str] = field(default_factory=dict)  # surface -> its text
    form: int | None = None  # the modal's runners to add, as it opened
    mode: str | None = None  # the modal's preselected "what to raise", when it offers one
    refused: str = ""  # why the form or the scale set would not take the form's default
    # Jobs arriving and finishing a minute in the rates' window of the reading read
    rates: tuple[float | None, float | None] = (None, None)

    def surfaces(self) -> list[str]:
        """The surfaces that showed this look's reading."""
        return [surface for surface in SURFACES if surface in self.said]

    def advice(self, surface: str) -> Advice:
        return advice_of(self.said.get(surface, ""), RUNNER_TYPE)

    def direction(self, surface: str) -> Direction | None:
        return direction_of(self.said.get(surface, ""), RUNNER_TYPE)


def problems(looks: list[Look]) -> list[str]:
    """Every way the looks break "one judgement, rendered everywhere" (flapping aside: at a
    real turn, consecutive readings of opposite kinds are right)."""
    found: list[str] = []
    for index, look in enumerate(looks):
        found += one_number(look)
        found += direction_right(looks, index)
        found += no_rise_while_falling(looks, index)
        found += nothing_at_zero(look)
        if look.refused:
            found.append(f"step {look.step}: the form's default is refused: {look.refused}")
    return found


def one_number(look: Look) -> list[str]:
    """The same advice on every surface; the form pre-filled with it (capped), and offering a
    higher maximum when the advice asks for one."""
    if look.stamp is None:
        return [f"step {look.step}: the surfaces never showed one reading ({look.attempts} tries)"]
    advices = {surface: look.advice(surface) for surface in look.surfaces()}
    found = []
    if len(set(advices.values())) > 1:
        found.append(f"step {look.step}: the advice differs: {advices}{quoted(look)}")
    advice = advices["root"]
    raised = raise_of(look.said.get("root", ""), RUNNER_TYPE)
    # Raising the maximum, the form fills in how far (to the advice's new maximum); else the
    # runners; nothing where nothing is advised.
    wanted = raised if look.mode == "raise_max" and raised else advice
    if isinstance(advice, int) and look.form != min(int(wanted or 0), CAP):
        found.append(
            f"step {look.step}: the form is pre-filled with {look.form}, the root advises "
            f"+{advice} (raise the maximum by {raised}; cap {CAP})"
        )
    if not isinstance(advice, int) and look.form is not None:
        found.append(
            f"step {look.step}: the form is pre-filled with {look.form}, the root advises none"
        )
    maximum = look.shown.maximum or 0
    asking = [s for s in look.surfaces() if cites_maximum(look.said[s], maximum)]
    if asking and look.mode != "raise_max":
        found.append(
            f"step {look.step}: {', '.join(asking)} ask for a higher maximum; the form does not "
            f"offer raising maxRunners{quoted(look, asking)}"
        )
    return found


def direction_right(looks: list[Look], index: int) -> list[str]:
    """Every surface reads the expected direction, from the third reading after a turn on: a
    turn must stand out of the readings' scatter before it is said, so a wobble turns nothing."""
    look = looks[index]
    if look.expect is None or look.stamp is None:
        return []
    before = [looks[k].expect if k >= 0 else look.expect for k in (index - 2, index - 1)]
    if any(previous != look.expect for previous in before):
        # The turn's first two readings (or the first after too few readings to tell one): the
        # old direction, or none, may stand until then.
        return []
    wrong = {s: d for s in look.surfaces() if (d := look.direction(s)) != look.expect}
    if not wrong:
        return []
    return [f"step {look.step}: expected {look.expect}, read {wrong}{quoted(look, wrong)}"]


def no_rise_while_falling(looks: list[Look], index: int) -> list[str]:
    """No "rising" and no "+N" on any surface once the queue fell two readings in a row, but a
    +N held over the advice window that says the reading alone advises none (HPA's hold)."""
    if index < 2:
        return []
    queued = [looks[i].shown.queued for i in (index - 2, index - 1, index)]
    if not queued[0] > queued[1] > queued[2]:
        return []
    look = looks[index]
    said = {s: (look.direction(s), look.advice(s)) for s in look.surfaces()}
    wrong = {
        s: d
        for s, d in said.items()
        if d[0] == "rising" or (isinstance(d[1], int) and HELD not in look.said[s])
    }
    if not wrong:
        return []
    return [f"step {look.step}: the queue fell {queued}, yet {wrong}{quoted(look, wrong)}"]


def nothing_at_zero(look: Look) -> list[str]:
    """Nothing queued, nothing advised: no runners and no higher maximum on any surface nor in
    the form, however many arrivals the rates' window still holds."""
    if look.shown.queued or look.stamp is None:
        return []
    maximum = look.shown.maximum or 0
    wrong = [
        surface
        for surface in look.surfaces()
        if isinstance(look.advice(surface), int) or cites_maximum(look.said[surface], maximum)
    ]
    wrong += ["the form"] if look.form is not None else []
    if not wrong:
        return []
    return [
        f"step {look.step}: nothing queued, yet {wrong} advise more{quoted(look, look.surfaces())}"
    ]


def no_flapping(looks: list[Look]) -> list[str]:
    """No advice of opposite kinds (+N runners, then none: "clears" or "covered", or back) on
    consecutive readings, whatever the direction says, where the queue only wanders."""
    found = []
    for before, after in pairwise(looks):
        for surface in set(before.surfaces()) & set(after.surfaces()):
            kinds = {_kind(look, surface) for look in (before, after)}
            if kinds == {"more", "clears"}:
                found.append(
                    f"steps {before.step}→{after.step}: {surface} flapped "
                    f"{cell(before, surface)} → {cell(after, surface)}"
                )
    return found


def _kind(look: Look, surface: str) -> str:
    advice = look.advice(surface)
    if isinstance(advice, int):
        return "more"
    return "clears" if advice in ("clears", "covered") else ""


def quoted(look: Look, surfaces: Iterable[str] = SURFACES) -> str:
    """What the surfaces said of the type (its own line, and the line its advice is read from
    when another), for a failure's message; surfaces that said the same are quoted once."""
    said: dict[str, list[str]] = {}
    for surface in surfaces:
        text = look.said.get(surface, "")
        for line in dict.fromkeys(
            [*type_lines(text, RUNNER_TYPE)[:1], advice_line(text, RUNNER_TYPE)]
        ):
            said.setdefault(line, []).append(surface)
    return "".join(f"\n    {' = '.join(who)}: {line[:260]}" for line, who in said.items())


def table(name: str, looks: list[Look]) -> str:
    """What each surface said at each step: direction and advice, the form's default; the jobs
    arriving and finishing a minute in the reading's window."""
    head = ("step", "queued", "busy/reg max", "in/out /min", "expect", *SURFACES, "form")
    head += ("reads", "note")
    rows = [head]
    for look in looks:
        s = look.shown
        rows.append(
            (
                str(look.step),
                str(s.queued),
                f"{s.busy}/{s.registered} {s.maximum}",
                "/".join("?" if rate is None else f"{rate:.0f}" for rate in look.rates),
                look.expect or "",
                *(cell(look, surface) for surface in SURFACES),
                f"{look.form}{' max' if look.mode == 'raise_max' else ''}"
                + (" REFUSED" if look.refused else ""),
                str(look.attempts) + ("" if look.stamp else " (never one reading)"),
                s.note,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return f"\n== {name} ==\n" + "\n".join(lines)


def cell(look: Look, surface: str) -> str:
    """ "▲ +7", "▼ clears", "= +1"; "?" for no direction, "—" for no advice; "" where the
    surface did not show the reading."""
    if surface not in look.said:
        return ""
    direction, advice = look.direction(surface), look.advice(surface)
    shown = f"+{advice}" if isinstance(advice, int) else (advice or "—")
    return f"{ARROWS.get(direction or '', '?')} {shown}"
