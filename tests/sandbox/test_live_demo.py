"""`make demo` as a person at the terminal and the browser meets it: narration in words, not
Slack's wire tokens, and a pace at which each step of the story can be read."""

from __future__ import annotations

import pytest

from sandbox.__main__ import main
from sandbox.fleet import DEMO_BURSTS, DEMO_SPEED, DEMO_TEAM_BURSTS, DEMO_TYPES, Fleet
from sandbox.fleet_alerts import GPU_RULE_LABELS
from sandbox.fleet_api import FleetApi, FleetApiConfig
from sandbox.live_demo import STORY_FLEET_MINUTES, narrated, narration, pace_note
from sandbox.slack_model import Message
from sandbox.stack import CHANNEL, GPU_CHANNEL


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "Incident 3 opened <!date^1700000000^{date_short_pretty} {time}|2023-11-14 22:13 UTC>",
            "Incident 3 opened 2023-11-14 22:13 UTC",
        ),
        # A date with no fallback reads as its moment.
        ("due <!date^1700000000^{time}>", "due 2023-11-14 22:13 UTC"),
        ("Acknowledged by <@U0ALICE>", "Acknowledged by @alice"),
        ("<@U0NOBODY> scaled", "@U0NOBODY scaled"),
        ("moved to <#C0GPU|gpu-infra>", "moved to #gpu-infra"),
        # The demo's channels by the names the page shows, whatever the label.
        ("open in <#C0GPUQUEUE>", "open in #gpu-ci-incidents"),
        ("moved to <#C0GPUQUEUE|old-name>", "moved to #gpu-ci-incidents"),
        ("*Jobs queueing* &lt;linux&gt; &amp; more\nsecond line", "Jobs queueing <linux> & more"),
        (
            "<https://grafana.example/d/1|📈 Dashboard>",
            "📈 Dashboard (https://grafana.example/d/1)",
        ),
        ("", "(a file)"),
        ("x" * 200, "x" * 109 + "…"),
        # Cut where a clause ends, never mid-word, and said to be cut.
        ("Scaled linux by +5, " + "and it goes back " * 8, "Scaled linux by +5…"),
    ],
)
def test_the_narration_says_what_a_reader_sees(text: str, line: str) -> None:
    assert narrated(text) == line


def story_at(speed: float) -> dict[str, list[tuple[float, str]]]:
    """Each alert rule's states over the demo's fleet left alone, in real seconds at `speed`,
    as the sandbox's Grafana evaluates them."""
    now = [0.0]
    fleet = Fleet(DEMO_TYPES, (*DEMO_BURSTS, *DEMO_TEAM_BURSTS), speed=speed, clock=lambda: now[0])
    api = FleetApi(fleet, FleetApiConfig(rate_window="10m", team_rules=(GPU_RULE_LABELS,)))
    rules = {"linux.2xlarge": api.rule, "gpu": api.team_rules[0]}
    seen: dict[str, list[tuple[float, str]]] = {name: [] for name in rules}
    while now[0] < 15 * 60:
        api.evaluate_all()
        for name, rule in rules.items():
            if not seen[name] or seen[name][-1][1] != rule.state:
                seen[name].append((now[0], rule.state))
        now[0] += 1.0
    return seen


def first(states: list[tuple[float, str]], state: str, after: float = 0.0) -> float:
    return next(at for at, s in states if s == state and at >= after)


def test_the_default_pace_leaves_time_to_read_each_step_and_ends_within_ten_minutes() -> None:
    story = story_at(DEMO_SPEED)
    main_rule, gpu = story["linux.2xlarge"], story["gpu"]
    building = DEMO_BURSTS[0].starts_min * 60 / DEMO_SPEED
    pending = first(main_rule, "pending")
    fired = first(main_rule, "firing")
    # The queue builds long enough for the early warning to be read before the alert fires.
    assert pending - building >= 30 and fired - pending >= 20
    # The incident runs for several 30-second statuses before it drains.
    assert first(main_rule, "normal", after=fired) - fired >= 4 * 30
    gpu_fired = first(gpu, "firing")
    assert gpu_fired - fired >= 60, "the team's incident comes after the first one's story"
    ended = first(gpu, "normal", after=gpu_fired)
    assert ended <= 10 * 60
    assert ended == pytest.approx(STORY_FLEET_MINUTES * 60 / DEMO_SPEED, abs=30)


def test_make_demo_plays_at_the_readable_pace_and_says_how_to_go_faster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "(default 6:" in " ".join(capsys.readouterr().out.split())
    assert pace_note(DEMO_SPEED) == (
        "At ×6 the story plays in about 10 minutes "
        "(`make demo DEMO_ARGS=--speed=30`: about 2 minutes)."
    )
    assert pace_note(30) == "At ×30 the story plays in about 2 minutes."


def narrated_lines(edits: bool) -> list[str]:
    """The terminal's lines for an incident whose root is edited at each of three readings."""
    root = Message("1.000001", CHANNEL, "🚨 Jobs queueing", [], None, None)
    reply = Message("1.000002", CHANNEL, "📊 Status update", [], "1.000001", None)
    gpu = Message("1.000003", GPU_CHANNEL, "🚨 GPU jobs queueing", [], None, None)
    seen: dict[str, int] = {}
    said = [narration(CHANNEL, root, seen, edits=edits)]
    for _ in range(3):
        root.edits += 1
        said.append(narration(CHANNEL, root, seen, edits=edits))
    said.append(narration(CHANNEL, root, seen, edits=edits))  # nothing new
    said.append(narration(CHANNEL, reply, seen, edits=edits))
    reply.edits += 1
    said += [narration(CHANNEL, reply, seen, edits=edits), narration(GPU_CHANNEL, gpu, seen)]
    return [line for line in said if line is not None]


def test_the_terminal_says_each_event_once_and_a_roots_edits_only_when_asked() -> None:
    events = [
        "  [new root] 🚨 Jobs queueing",
        "  [new reply] 📊 Status update",
        "  [edited reply] 📊 Status update",
        "  [new root in #gpu-ci-incidents] 🚨 GPU jobs queueing",
    ]
    assert narrated_lines(edits=False) == events
    edited = ["  [edited root] 🚨 Jobs queueing"] * 3
    assert narrated_lines(edits=True) == [events[0], *edited, *events[1:]]


def test_the_demo_takes_a_flag_for_the_roots_edits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--edits" in capsys.readouterr().out
