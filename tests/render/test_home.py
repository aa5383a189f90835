"""The App Home's view: every open incident (state, how long, who is on it, its worst runner type,
its thread), the standing early warnings and the fleet now, within a Home view's limits (100
blocks, Block Kit's text limits, 250 kB) and inert whatever the alerts say and however many there
are; and the digests that decide when it is published again."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import ActiveSilence, Incident
from bot.domain.reading.early_warning import Phase, WarningState
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.home import (
    MAX_HOME_BLOCKS,
    HomeState,
    Listed,
    Standing,
    StateLost,
    digests,
    render_home,
    standing_warnings,
)
from sandbox.slack_methods import check_view
from tests.render.test_messages import ENTITY, EVIL, texts_of
from tests.support.incidents import T0, changed, make_incident

NOW = T0 + timedelta(minutes=42)
LINK = "https://acme.slack.com/archives/C0CIQUEUE/p1758042060000100"
MAX_VIEW_BYTES = 250_000  # views.publish's view_too_large
# The tokens the Home builds: channels, dates (`{ago}` with its fallback), http(s) links.
TOKEN = re.compile(
    r"<#[A-Z0-9]+>"
    r"|<!date\^\d+\^\{(?:time|ago)\}\|[^<>|]+>"
    r"|<https?://[^\s|<>]+\|[^<>|]+>"
)


def fleet(types: dict[str, RunnerTypeMetrics]) -> FleetSnapshot:
    return FleetSnapshot(at=NOW, source="prometheus", runner_types=types)


FLEET = fleet(
    {
        "linux.2xlarge": RunnerTypeMetrics(queued=43, longest_wait_mins=12, busy=20, maximum=20),
        "linux.g5.4xlarge.nvidia.gpu": RunnerTypeMetrics(
            queued=9, longest_wait_mins=30, busy=10, registered=10
        ),
        "windows.4xlarge": RunnerTypeMetrics(queued=0, busy=1, maximum=8),
    }
)


def warning(runner_type: str = "linux.4xlarge", phase: Phase = Phase.ACTIVE) -> WarningState:
    text = f"{runner_type}: queue building, 9 queued and +1.4/min; the alert fires in ~11 min"
    state = WarningState.raised(runner_type, "C0CIQUEUE", text, NOW.timestamp() - 120, ts="1.2")
    return state if phase is Phase.ACTIVE else state.changed(NOW.timestamp(), phase=phase)


def two_channels() -> HomeState:
    ci = changed(
        make_incident(id="12", channel="C0CIQUEUE"),
        acknowledged_by="U0ALICE",
        acknowledged_name="alice",
    )
    gpu = make_incident(
        id="13",
        uid="u13",
        channel="C0GPUQUEUE",
        title="GPU jobs queueing",
        runner_types={"linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=30, longest_wait_mins=25)},
    )
    return HomeState(
        incidents=(Listed(gpu, LINK), Listed(ci, "")),
        open_count=2,
        warnings=(Standing(warning(), LINK),),
        fleet=FLEET,
        backend="Prometheus",
    )


def assert_valid_view(view: dict[str, Any]) -> None:
    """As Slack takes a Home view: the emulator's views.* checks (slack_sdk's models, 100 blocks),
    under 250 kB, and every text inert: only the tokens the Home builds, no mention."""
    assert check_view(view) == view
    assert view["type"] == "home"
    assert 0 < len(view["blocks"]) <= MAX_HOME_BLOCKS
    assert len(json.dumps(view).encode()) < MAX_VIEW_BYTES
    for block in view["blocks"]:
        Block.parse(block).validate_json()
        if block["type"] == "context":
            assert len(block["elements"]) <= 10
        for text in texts_of(block):
            assert text
            assert "<@" not in text and "<!channel" not in text and "<!here" not in text
            rest = ENTITY.sub("", TOKEN.sub("", text))
            assert not re.search(r"[<>&]", rest), text[:300]


def view_text(view: dict[str, Any]) -> str:
    return "\n".join(texts_of(view["blocks"]))


def test_incidents_of_two_channels_with_their_state_owner_worst_type_and_thread() -> None:
    view = render_home(two_channels(), NOW)
    assert_valid_view(view)
    text = view_text(view)

    assert "*Open incidents* (2)" in text
    gpu, ci = (b["text"]["text"] for b in view["blocks"] if "🔴" in str(b))
    assert gpu.startswith(f"🔴 *<{LINK}|#13 · P2 · GPU jobs queueing>*")
    assert "in <#C0GPUQUEUE>" in gpu and "nobody has acknowledged it" in gpu
    assert (
        "Worst runner type: `linux.g5.4xlarge.nvidia.gpu` · 30 queued · longest wait 25 min" in gpu
    )
    # Without a link yet the title is plain; the owner is named, never mentioned.
    assert ci.startswith("🔴 *#12 · P2 · Jobs queueing in autoscaled machines*")
    assert "in <#C0CIQUEUE>" in ci and "*alice* is on it" in ci
    # The worst of the alert's types: the GPU type's 114 min, not the 2xlarge's 20.
    assert "Worst runner type: `linux.g5.4xlarge.nvidia.gpu` · 10 queued" in ci
    # How long: a token each client keeps current, its fallback as of now.
    started = int(T0.timestamp())
    assert f"started <!date^{started}^{{ago}}|42 min ago>" in ci


def test_the_warnings_standing_and_the_fleet_now_by_runner_type() -> None:
    text = view_text(render_home(two_channels(), NOW))

    assert "*Early warnings* (1)" in text
    assert f"⏳ <{LINK}|linux.4xlarge> in <#C0CIQUEUE>: linux.4xlarge: queue building" in text
    assert "*The fleet now* · live from Prometheus at <!date^" in text
    lines = [line for line in text.splitlines() if line.startswith("• `")]
    # Worst first: the longest wait, then the most queued.
    assert lines[:3] == [
        "• `linux.g5.4xlarge.nvidia.gpu`: *9* queued · longest wait *30 min* · busy 10/10",
        "• `linux.2xlarge`: *43* queued · longest wait *12 min* · busy 20 · max 20",
        "• `windows.4xlarge`: *0* queued · busy 1 · max 8",
    ]
    assert "New to queuepilot?" in text and "`/queue help`" in text


def test_a_quiet_fleet_and_no_live_backend_are_said_as_such() -> None:
    view = render_home(HomeState(fleet_note="no live metrics backend (METRICS_BACKEND=alert)"), NOW)
    assert_valid_view(view)
    text = view_text(view)

    assert "None open: the queues are quiet" in text
    assert "No early warning stands" in text
    assert "_no live metrics backend (METRICS_BACKEND=alert)_" in text


def test_many_incidents_are_capped_and_say_how_many_more() -> None:
    listed = tuple(Listed(make_incident(id=str(n), channel="C0CIQUEUE")) for n in range(300))
    many_types = {f"type-{n}": RunnerTypeMetrics(queued=n, longest_wait_mins=n) for n in range(80)}
    home = HomeState(
        incidents=listed,
        open_count=1000,
        warnings=tuple(Standing(warning(f"t{n}")) for n in range(40)),
        fleet=fleet(many_types),
    )
    view = render_home(home, NOW)
    assert_valid_view(view)
    text = view_text(view)

    assert "… and 980 more: `/queue incidents` lists them." in text
    assert "… and 30 more, each in its channel." in text
    assert "+65 more runner types" in text


def test_only_standing_warnings_are_listed_newest_first() -> None:
    older = WarningState.raised("a", "C1", "a builds", 100.0)
    newer = WarningState.raised("b", "C1", "b builds", 200.0)
    cleared = warning("c", Phase.CLEARED)
    assert standing_warnings([older, cleared, newer]) == [newer, older]


def test_the_state_digest_moves_with_state_and_the_numbers_digest_with_numbers() -> None:
    home = two_channels()
    gpu, ci = home.incidents
    before = digests(home)

    # Time passing changes nothing a viewer must be sent again.
    assert render_home(home, NOW) != render_home(home, NOW + timedelta(minutes=5))
    assert digests(home) == before

    owned = changed(
        gpu.incident,
        acknowledged_by="U0BOB",
        acknowledged_name="bob",
    )
    silenced = ci.incident.model_copy(
        update={
            "silence": ActiveSilence(
                silence_id="s", backend="Grafana", until=NOW, by="U0BOB", at=NOW
            )
        }
    )
    for other in (
        HomeState(**{**home.__dict__, "incidents": (Listed(owned, LINK), ci)}),
        HomeState(**{**home.__dict__, "incidents": (gpu, Listed(silenced))}),
        HomeState(**{**home.__dict__, "incidents": (gpu, Listed(ci.incident, LINK))}),
        HomeState(**{**home.__dict__, "incidents": (gpu,), "open_count": 1}),
        HomeState(**{**home.__dict__, "warnings": ()}),
    ):
        assert digests(other).state != before.state

    busier = gpu.incident.model_copy(
        update={
            "runner_types": {
                "linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=31, longest_wait_mins=26)
            }
        }
    )
    moved = HomeState(**{**home.__dict__, "incidents": (Listed(busier, LINK), ci)})
    assert digests(moved).state == before.state
    assert digests(moved).numbers != before.numbers
    refleet = HomeState(
        **{**home.__dict__, "fleet": fleet({"linux.2xlarge": RunnerTypeMetrics(queued=1)})}
    )
    assert digests(refleet).state == before.state
    assert digests(refleet).numbers != before.numbers


# -- any number of incidents, runner types and odd text: a valid view --------------------------

ODD = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(list(EVIL)),
    max_size=400,
)
QUEUE = st.builds(
    RunnerQueue,
    queued=st.none() | st.floats(0, 1e9, allow_nan=False),
    longest_wait_mins=st.none() | st.floats(0, 1e6, allow_nan=False),
)
METRICS = st.builds(
    RunnerTypeMetrics,
    queued=st.none() | st.floats(0, 1e9, allow_nan=False),
    longest_wait_mins=st.none() | st.floats(0, 1e6, allow_nan=False),
    busy=st.none() | st.floats(0, 1e6, allow_nan=False),
    maximum=st.none() | st.floats(0, 1e6, allow_nan=False),
    registered=st.none() | st.floats(0, 1e6, allow_nan=False),
)


@st.composite
def incidents(draw: st.DrawFn) -> Incident:
    return make_incident(
        id=draw(st.text("0123456789", min_size=1, max_size=8)),
        title=draw(ODD),
        priority=draw(st.none() | ODD),
        channel=draw(st.sampled_from(["C0CIQUEUE", "C0GPUQUEUE", ""])),
        runner_types=draw(st.dictionaries(ODD, QUEUE, max_size=30)),
        acknowledged_by=draw(st.none() | ODD),
        acknowledged_name=draw(ODD),
    )


@settings(max_examples=60, deadline=None)
@given(
    listed=st.lists(
        st.builds(Listed, incidents(), st.sampled_from(["", LINK, "javascript:x", LINK + "|x"])),
        max_size=60,
    ),
    extra=st.integers(0, 10_000),
    warned=st.lists(st.tuples(ODD, ODD), max_size=25),
    types=st.none() | st.dictionaries(ODD, METRICS, max_size=60),
    note=ODD,
    command=st.sampled_from(["/queue", "/q_2-x"]),
)
def test_any_home_is_a_valid_view(
    listed: list[Listed],
    extra: int,
    warned: list[tuple[str, str]],
    types: dict[str, RunnerTypeMetrics] | None,
    note: str,
    command: str,
) -> None:
    standing = tuple(
        Standing(WarningState.raised(name, "C0CIQUEUE", text, 1.0), LINK) for name, text in warned
    )
    home = HomeState(
        incidents=tuple(listed),
        open_count=len(listed) + extra,
        warnings=standing,
        fleet=fleet(types) if types is not None else None,
        fleet_note=note,
        backend=note[:20],
        command=command,
    )
    assert_valid_view(render_home(home, NOW))
    assert digests(home) == digests(home)


def test_a_redis_that_lost_the_state_is_said_at_the_top_and_changes_what_is_shown() -> None:
    lost = StateLost(T0, found=2, above=41)
    home = render_home(HomeState(lost=lost), NOW)
    check_view(home)
    said = json.dumps(home["blocks"][2], ensure_ascii=False)
    assert "lost its state" in said and "2 thread(s)" in said and "above 41" in said
    assert "Backup and restore" in said
    assert digests(HomeState(lost=lost)).state != digests(HomeState()).state, "published at once"
    assert "lost its state" not in json.dumps(render_home(HomeState(), NOW))
