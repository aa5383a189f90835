"""`/queue` subcommands: parsed here, carried out by the action core, like the buttons (the
command's own name is the Slack app's to choose; only its text is parsed)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.actions.core import ActionCore, Actor, Outcome
from bot.domain.incident.incidents import Incident, counting_scale_ups
from bot.domain.units import ascii_whole, is_silence_length, span_seconds
from bot.render.mrkdwn import escape, truncate
from bot.render.pilot import render_pilot
from bot.render.queue import (
    MAX_ANSWER,
    MAX_LINES,
    capped,
    live_queue,
    open_incidents,
    overview_line,
    say_which,
)

# Escaped into `HELP`, so Slack shows `<duration>` instead of taking it for a link to nowhere.
_TYPED_HELP = """*`/queue`* — the live queue by runner type (in a team's channel, the types it \
owns), and the open incidents
*`/queue incidents`* — open and recent incidents
*`/queue ack [ID]`* — take ownership
*`/queue resolve [ID] [anyway]`* — close an incident by hand (`anyway`: while jobs still \
queue over the alert's thresholds, which it asks about first)
*`/queue silence <duration> [ID] [keep]`* — e.g. `2h`, `30m`: a real silence of the alert \
group, ended when the incident resolves (`keep`: it lasts its whole duration)
*`/queue unsilence [ID]`* — remove the silence made from Slack
*`/queue scale <runner-type> <+N> [ID] [max] [keep]`* — add runners (`max`: raise ARC's \
maxRunners; `keep`: not put back when the incident resolves)
*`/queue diagnose [ID]`* — the runbook's checks, the likely cause, what to do next
*`/queue jobs [runner-type]`* — which workflows' jobs are queueing (of the channel's types \
unless one is named), from where, what changed
*`/queue report [7d|30d] [runner-type]`* — capacity: incidents, firing time, peaks, scale-ups, \
and the size that would have prevented them
*`/queue pilot [off|on] [runner-type]`* — each piloted runner type's policy, whether its pilot \
is on, paused or off, and its last act; `off`/`on` switch it (scale permission)
*`/queue postmortem [ID]`* — a Markdown write-up of the incident, shared in its thread as a \
file: summary, impact, timeline, diagnosis, the queue over time, questions for the team
Without an ID, a command acts on the one open incident; when several are open it asks which. \
`postmortem` without an ID, when none is open, writes up the one that resolved last."""
HELP = escape(_TYPED_HELP)

MAX_SCAN = 500  # open incidents read to find the ones of a channel

# ASCII digits only: `\d` also matches Arabic-Indic and other Unicode digits.
_COUNT = re.compile(r"\+?([0-9]+)")
# A word like a window (`14d`, `2w`, `400d`) given where a report's runner type goes.
_WINDOW_LIKE = re.compile(r"[0-9]+[a-zA-Z]?")
MAX_SCALE_UP = 9999  # runners one command adds; the scaler's own cap is checked after
REPORT_WINDOWS = {"7d": 7, "30d": 30}
MAX_ID = 40  # incident IDs are short numbers; a longer word is a typo, not an ID


class CommandError(ValueError):
    """A command that cannot be understood; the message says how to write it."""


@dataclass(frozen=True)
class Command:
    verb: str
    incident_ref: str | None = None
    seconds: int | None = None
    runner_type: str | None = None
    count: int | None = None
    raise_maximum: bool = False  # `max`: raise an ARC scale set's maxRunners
    # `keep`: the scale-up is not put back, the silence not ended, when the incident resolves
    keep: bool = False
    anyway: bool = False  # `anyway`: resolve while the queue is still live
    on: bool | None = None  # `pilot on|off`: switch it; None: show it


def parse_duration(text: str) -> int:
    """`2h`, `30m`, `1h30m`, `1d` -> seconds (at most 7 days)."""
    total = span_seconds(text)
    if total is None:
        shown = truncate(escape(text), 40)
        raise CommandError(f"`{shown}` is not a duration: use e.g. `30m`, `2h`, `1h30m`")
    if not is_silence_length(total):
        raise CommandError("a silence lasts between 1 minute and 7 days")
    return total


def parse_command(text: str) -> Command:
    words = text.split()
    if not words:
        return Command("status")
    verb, args = words[0].lower(), words[1:]
    if verb in ("help", "status", "incidents"):
        return Command(verb)
    if verb == "resolve":
        # `anyway`: resolve while the queue is still live, after being asked once more.
        rest = [arg for arg in args if arg.lower() != "anyway"]
        if len(rest) > 1:
            raise CommandError(escape("usage: `/queue resolve [ID] [anyway]`"))
        return Command(verb, incident_ref=_optional_id(rest, 0), anyway=len(rest) < len(args))
    if verb in ("ack", "acknowledge", "diagnose", "unsilence", "postmortem"):
        if len(args) > 1:  # `ack 12 13` acting on #12 alone would surprise whoever meant both
            raise CommandError(escape(f"usage: `/queue {verb} [ID]`"))
        return Command("ack" if verb == "acknowledge" else verb, incident_ref=_optional_id(args, 0))
    if verb == "silence":
        # `keep`: the silence outlives the resolve, lasting its whole duration.
        rest = [arg for arg in args if arg.lower() != "keep"]
        keep = len(args) - len(rest)
        if not 1 <= len(rest) <= 2 or keep > 1:
            raise CommandError(
                escape("usage: `/queue silence <duration> [ID] [keep]`, e.g. `/queue silence 2h`")
            )
        seconds, ref = parse_duration(rest[0]), _optional_id(rest, 1)
        return Command(verb, seconds=seconds, incident_ref=ref, keep=bool(keep))
    if verb == "scale":
        return _parse_scale(args)
    if verb == "report":
        return _parse_report(args)
    if verb == "pilot":
        switch = args[0].lower() if args else None
        if len(args) > 2 or switch not in (None, "on", "off"):
            raise CommandError(
                "usage: `/queue pilot [off|on] [runner-type]`, e.g. `/queue pilot off`"
            )
        on = None if switch is None else switch == "on"
        return Command(verb, runner_type=args[1] if len(args) == 2 else None, on=on)
    if verb == "jobs":
        if len(args) > 1:
            raise CommandError(
                "usage: `/queue jobs [runner-type]`, e.g. `/queue jobs linux.2xlarge`"
            )
        return Command(verb, runner_type=args[0] if args else None)
    raise CommandError(f"unknown command `{escape(verb)}`. Try `/queue help`.")


def _parse_report(args: list[str]) -> Command:
    usage = "usage: `/queue report [7d|30d] [runner-type]`, e.g. `/queue report 30d linux.2xlarge`"
    days, rest = 7, list(args)
    if rest and rest[0].lower() in REPORT_WINDOWS:
        days = REPORT_WINDOWS[rest.pop(0).lower()]
    if len(rest) > 1:
        raise CommandError(usage)
    if rest and _WINDOW_LIKE.fullmatch(rest[0]):
        # `/queue report 400d` asks for a window the report does not have, not a runner type.
        raise CommandError(
            f"a report covers `7d` or `30d`, not `{truncate(escape(rest[0]), 20)}`: {usage}"
        )
    return Command("report", runner_type=rest[0] if rest else None, count=days)


def _parse_scale(args: list[str]) -> Command:
    usage = escape(
        "usage: `/queue scale <runner-type> <+N> [ID] [max] [keep]`, e.g. `/queue scale "
        "linux.2xlarge +4` (`max`: raise an ARC scale set's maxRunners; `keep`: do not put it "
        "back when the incident resolves)"
    )
    count_match = _COUNT.fullmatch(args[1]) if len(args) >= 2 else None
    if count_match is None:
        raise CommandError(usage)
    count = ascii_whole(count_match[1], MAX_SCALE_UP + 1) or 0
    if not 1 <= count <= MAX_SCALE_UP:
        raise CommandError(f"scale up by at least 1 runner and at most {MAX_SCALE_UP} at once")
    flags = {arg.lower() for arg in args[2:]} & {"max", "keep"}
    rest = [arg for arg in args[2:] if arg.lower() not in ("max", "keep")]
    if len(rest) > 1:
        raise CommandError(usage)
    return Command(
        "scale",
        runner_type=args[0],
        count=count,
        incident_ref=_optional_id(rest, 0),
        raise_maximum="max" in flags,
        keep="keep" in flags,
    )


def _optional_id(args: list[str], index: int) -> str | None:
    if len(args) <= index:
        return None
    ref = args[index].lstrip("#")
    if not ref or len(ref) > MAX_ID:
        raise CommandError(f"`{truncate(escape(args[index]), MAX_ID)}` is not an incident ID")
    return ref


def read_command(text: str) -> Command | Outcome:
    """The command typed, or the answer that needs nothing looked up (help, or an error)."""
    try:
        command = parse_command(text)
    except CommandError as exc:
        return Outcome(False, f"{exc}\n\n{HELP}", "refused")
    return Outcome(True, HELP) if command.verb == "help" else command


async def run_command(
    core: ActionCore, actor: Actor, text: str, *, channel: str = "", interaction: str | None = None
) -> Outcome:
    """`/queue …` as typed in `channel`: its listings and default incident are that channel's."""
    command = read_command(text)
    if isinstance(command, Outcome):
        return command
    return await perform(core, actor, command, channel=channel, interaction=interaction)


async def perform(
    core: ActionCore,
    actor: Actor,
    command: Command,
    *,
    channel: str = "",
    interaction: str | None = None,
) -> Outcome:
    """A parsed command (or a button's), through the action core."""
    if command.verb == "status":
        return await _status(core, channel)
    if command.verb == "incidents":  # the most recent of every channel, open or resolved
        if not (incidents := await core.recent(MAX_LINES)):
            return Outcome(True, "No open incidents: the queues are quiet.")
        return Outcome(True, capped("", [overview_line(i) for i in incidents], len(incidents)))
    if command.verb == "report":
        return await core.report.report(
            actor, command.count or 7, command.runner_type, interaction=interaction
        )
    if command.verb == "pilot" and command.on is None:
        return Outcome(True, render_pilot(await core.piloting.states(), core.config.slash_command))
    if command.verb == "pilot":
        on, runner_type = command.on, command.runner_type or ""
        return await core.piloting.switch(actor, on, runner_type, interaction=interaction)
    if command.verb == "jobs":
        return await core.jobs.jobs(
            actor, command.runner_type, channel=channel, limit=MAX_ANSWER, interaction=interaction
        )
    ref = command.incident_ref or await _incident_for(core, channel, command)
    if isinstance(ref, Outcome):
        return ref
    return await _ACTS[command.verb](core, actor, ref, command, interaction)


# The subcommands that act on one incident (named, or the one open in the channel), as buttons do.
_ACTS: dict[str, Callable[[ActionCore, Actor, str, Command, str | None], Awaitable[Outcome]]] = {
    "ack": lambda core, who, ref, _, i: core.acknowledge(who, ref, interaction=i),
    "resolve": lambda core, who, ref, c, i: core.resolve(who, ref, anyway=c.anyway, interaction=i),
    "silence": lambda core, who, ref, c, i: core.silencing.silence(
        who, ref, c.seconds or 0, keep=c.keep, interaction=i
    ),
    "unsilence": lambda core, who, ref, _, i: core.silencing.unsilence(who, ref, interaction=i),
    "scale": lambda core, who, ref, c, i: core.scaling.scale(
        who,
        ref,
        c.runner_type or "",
        c.count or 0,
        raise_maximum=c.raise_maximum,
        keep=c.keep,
        interaction=i,
    ),
    "diagnose": lambda core, who, ref, _, i: core.diagnosing.diagnose(who, ref, interaction=i),
    "postmortem": lambda core, who, ref, _, i: core.postmortem(who, ref, interaction=i),
}


async def _incident_for(core: ActionCore, channel: str, command: Command) -> str | Outcome:
    """The one incident open here, else ask which; `postmortem` may take the last resolved."""
    here, elsewhere = _split(core, channel, await core.open_incidents(MAX_SCAN))
    if len(here) == 1:
        return here[0].id
    if not here and command.verb == "postmortem":
        recent, _ = _split(core, channel, await core.recent(MAX_LINES))
        if recent:  # the index is by last change, and writing one up is one
            return max(recent, key=lambda i: i.resolved.at or i.started_at).id
        if not elsewhere:
            nothing = "No incident to write up yet. `/queue incidents` lists recent ones."
            return Outcome(False, nothing)
    if not here and not elsewhere:
        return Outcome(False, "No open incident. `/queue incidents` lists recent ones.")
    shown = here or elsewhere
    return Outcome(False, say_which(command.verb, shown[:MAX_LINES], len(shown), channel))


async def _status(core: ActionCore, channel: str) -> Outcome:
    """The live queue by runner type, whether or not an incident is open; then the open ones."""
    readings = core.diagnosing.readings
    incidents = await core.open_incidents(MAX_SCAN)  # read once: for the trend and the list
    here, elsewhere = _split(core, channel, incidents)
    if not readings.metrics.live:
        return Outcome(True, open_incidents("", here, elsewhere))
    reading = await readings.latest()
    fleet = reading.fleet if reading is not None else None
    if fleet is not None:  # counting the scale-ups made since the reading, as the roots do
        fleet = counting_scale_ups(fleet, [a for i in incidents for a in i.actions])
    error = reading.error if reading is not None else ""
    head = live_queue(readings.metrics.name, fleet, error, incidents, core.config.routing, channel)
    return Outcome(True, open_incidents(head, here, elsewhere, numbers=fleet is None))


def _split(
    core: ActionCore, channel: str, incidents: list[Incident]
) -> tuple[list[Incident], list[Incident]]:
    """(those of `channel`, the others); outside the incidents' channels (a DM) all are "here"."""
    if channel not in core.config.routing.channels:
        return incidents, []
    here = [i for i in incidents if i.channel == channel]
    return here, [i for i in incidents if i.channel != channel]
