"""`queuepilot demo`: the local Slack page, a simulated fleet whose queue grows, and the bot.

Prints the page's URL first, its `queuepilot check`, then narrates what happens in the terminal
(the alert firing, each message the bot posts, each reply it edits; `--edits` adds each edit of a
root) until Ctrl-C or SIGTERM stops everything it started. With
`--until-resolved` it stops by itself once the incident resolved and its summary is posted.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import replace

from bot.checks.run import render
from bot.domain.shortened import shortened
from sandbox.demo import (
    DemoError,
    check_stopping,
    configure_output,
    demo_redis,
    interrupt,
    say,
    signals,
)
from sandbox.slack_api import DEFAULT_USERS, Message
from sandbox.stack import (
    CHANNEL,
    CHANNEL_NAME,
    GPU_CHANNEL,
    GPU_CHANNEL_NAME,
    ISSUES_REPO,
    PILOT_TYPES,
    Sandbox,
    SandboxConfig,
    SandboxError,
    pilot_policy,
    start_sandbox,
)
from sandbox.transcript import DEFAULT_NAMES, mrkdwn_to_text

PREFERRED_PAGE_PORT = 8080
NARRATED_WIDTH = 110
# Fleet minutes from the start to the GPU team's incident resolving, left alone (`DEMO_SPEED`).
STORY_FLEET_MINUTES = 60
FAST_SPEED = 30  # the tests' pace: for one who has seen the story and wants it again quickly
# The page's people, the bot and the channels, by name, as the page shows them.
NAMES: Mapping[str, str] = {
    **DEFAULT_NAMES,
    **DEFAULT_USERS,
    CHANNEL: CHANNEL_NAME,
    GPU_CHANNEL: GPU_CHANNEL_NAME,
}


def run_live_demo(
    *,
    speed: float,
    until_resolved: bool = False,
    socket_mode: bool = False,
    stall_listener: bool = False,
    pilot: bool = False,
    edits: bool = False,
) -> int:
    configure_output()
    stack, code = ExitStack(), 0
    try:
        with signals(interrupt, signal.SIGINT, signal.SIGTERM):
            sandbox = _start(stack, speed, socket_mode, stall_listener, pilot)
            _narrate(sandbox, until_resolved=until_resolved, edits=edits)
    except (DemoError, SandboxError) as exc:
        print(f"queuepilot demo: {exc}", file=sys.stderr, flush=True)
        code = 1
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python's documented remedy
        code = 1
    except KeyboardInterrupt:
        say("\nStopping the bot, the fleet, the Slack emulator and the demo's Redis…")
    finally:
        with signals(signal.SIG_IGN, signal.SIGINT, signal.SIGTERM):
            stack.close()
    return code


def _start(
    stack: ExitStack, speed: float, socket_mode: bool, stall: bool = False, pilot: bool = False
) -> Sandbox:
    redis_url, prefix, redis_note = demo_redis(stack)
    port_text = os.environ.get("DEMO_PORT", "")
    if port_text and not port_text.isdigit():
        raise DemoError(f"DEMO_PORT must be a port number, not {port_text!r}")
    config = SandboxConfig(
        speed=speed,
        page_port=int(port_text or PREFERRED_PAGE_PORT),
        socket_mode=socket_mode,
        stall_listener=stall,
        pilot=pilot,
    )
    try:
        sandbox = start_sandbox(stack, redis_url, prefix, config)
    except SandboxError:
        if port_text:  # the port asked for is taken: say so rather than pick another
            raise
        config = replace(config, page_port=0)
        sandbox = start_sandbox(stack, redis_url, prefix, config)
    slack_way = "Slack over Socket Mode" if socket_mode else "/slack/events"
    say(
        f"queuepilot demo: open {sandbox.page_url} in your browser (a local Slack; no workspace)\n"
        f"  bot     {sandbox.bot_url}  (the production app: /alerts/grafana, {slack_way})\n"
        f"  fleet   {sandbox.fleet.url}  (simulated CI fleet at ×{speed:g}: Grafana alerts, "
        "Prometheus, the HUD's queued jobs, Alertmanager silences, ARC scale sets)\n"
        f"  GitHub  {github_url(sandbox)}  (GitHub's stand-in: the alert's issue, its comments)\n"
        f"  Redis   {redis_url}  ({redis_note})\n"
        f"`queuepilot check` against them:\n{render(sandbox.check)}\n"
        "A burst of jobs is about to make linux.2xlarge queue: an early warning first, then the "
        "alert fires within about a minute. Later the GPU team's own alert opens its incident in "
        f"#{GPU_CHANNEL_NAME}, where SLACK_ROUTES sends that runner type: its node group is full, "
        "so new GPU runner pods stay Pending; run diagnostics there to see why more runners "
        "would not help.\n"
        "In the incident: silence it, run diagnostics, "
        "scale up; or type /queue help (/queue postmortem writes it up). Apps → queuepilot is "
        "the Home tab: every open incident across both channels. "
        f"{pilot_note(speed) if pilot else ''}"
        f"{pace_note(speed)} Ctrl-C stops everything.\n"
    )
    return sandbox


def _narrate(sandbox: Sandbox, *, until_resolved: bool, edits: bool) -> None:
    """Print each incident event (a new message, an edited reply) and each alert rule's state;
    a root's edits (its live numbers, every reading) only with `edits`."""
    seen: dict[str, int] = {}
    states: dict[str, str] = {}
    issues: dict[int, tuple[str, int]] = {}
    while True:
        time.sleep(0.5)
        check_stopping()
        _narrate_issues(sandbox, issues)
        for rule in sandbox.fleet.rules:
            name = rule.labels["alertname"]
            if states.get(name) != rule.state:
                states[name] = rule.state
                minute = sandbox.fleet.fleet.minute
                say(f"[fleet minute {minute:4.1f}] {name}: {rule.state}")
        resolved = False
        for channel, message in _messages(sandbox):
            if (line := narration(channel, message, seen, edits=edits)) is None:
                continue
            say(line)
            summary = message.thread_ts is not None and " resolved after " in message.text
            resolved = resolved or (summary and channel == CHANNEL)
        if resolved:
            say(f"The incident in #{CHANNEL_NAME} resolved; its summary is in the thread.")
            if until_resolved:
                return
            say("The page stays up: Ctrl-C to stop.")


def narration(
    channel: str, message: Message, seen: dict[str, int], *, edits: bool = False
) -> str | None:
    """The terminal's line for `message` if it is new or edited since `seen` (which it updates),
    its channel named when not the default one; None for nothing new, and for a root's edit
    unless `edits` asks for them: the root is edited at every reading, which would bury the
    incident's events."""
    if seen.get(message.ts) == message.edits:
        return None
    what = "new" if message.ts not in seen else "edited"
    seen[message.ts] = message.edits
    where = "reply" if message.thread_ts else "root"
    if what == "edited" and where == "root" and not edits:
        return None
    if channel != CHANNEL:
        where += f" in #{GPU_CHANNEL_NAME}"
    return f"  [{what} {where}] {narrated(message.text)}"


def github_url(sandbox: Sandbox) -> str:
    return f"{sandbox.github.base_url}/{ISSUES_REPO}/issues" if sandbox.github else "(none)"


def _narrate_issues(sandbox: Sandbox, seen: dict[int, tuple[str, int]]) -> None:
    """Each issue the bot opens in GitHub's stand-in, each comment, each close and reopen."""
    if sandbox.github is None:
        return
    for issue in sandbox.github.issues(ISSUES_REPO):
        number, state = issue["number"], issue["state"]
        comments = sandbox.github.comments(ISSUES_REPO, number)
        before_state, before_count = seen.get(number, ("", 0))
        if not before_state:
            say(f"  [github #{number} opened] {issue['title']}  {issue['html_url']}")
        for said in comments[before_count:]:
            first = shortened(str(said["body"]).strip().splitlines()[0], NARRATED_WIDTH)
            say(f"  [github #{number} comment] {first}")
        if before_state and state != before_state:
            say(f"  [github #{number} {'closed' if state == 'closed' else 'reopened'}]")
        seen[number] = (state, len(comments))


def pilot_note(speed: float) -> str:
    """What `--pilot` turns on, in the intro: which types, within what, and what to watch."""
    policy = pilot_policy(speed)
    return (
        f"The pilot is on for {' and '.join(PILOT_TYPES)}: once its readings have wanted more "
        f"runners for {policy['hold_seconds']} s, it scales up on its own by the least they "
        f"wanted beyond the runners there are, at most {policy['step']} an act, again "
        f"{policy['period_seconds']} s on while the queue climbs, {policy['up_to']} in all; its "
        "reply has Undo and Pause pilot, and its runners are followed until they register. On "
        "the GPU type it declines while new pods cannot start: /queue pilot says why. "
    )


def pace_note(speed: float) -> str:
    """How long the story plays at `speed`, and how to play it otherwise."""
    said = f"At ×{speed:g} the story plays in about {STORY_FLEET_MINUTES / speed:.0f} minutes"
    if speed >= FAST_SPEED:
        return f"{said}."
    fast = STORY_FLEET_MINUTES / FAST_SPEED
    return f"{said} (`make demo DEMO_ARGS=--speed={FAST_SPEED}`: about {fast:.0f} minutes)."


def narrated(text: str, names: Mapping[str, str] = NAMES) -> str:
    """A message's first line as the terminal says it: Slack's dates, mentions and links as a
    reader sees them (not `<!date^…>`), within one line."""
    lines = mrkdwn_to_text(text, names=names).strip().splitlines()
    return shortened(lines[0], NARRATED_WIDTH) if lines else "(a file)"


def _messages(sandbox: Sandbox) -> list[tuple[str, Message]]:
    found = []
    for channel in (CHANNEL, GPU_CHANNEL):
        for root in sandbox.emulator.channel_messages(channel):
            found.extend((channel, m) for m in sandbox.emulator.thread(channel, root.ts))
    return found
