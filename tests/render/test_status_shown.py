"""A status is decided by the tick and rendered by the sender: the reply it posts is the one the
tick would have rendered itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import Incident, open_incident, record_status
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.replies import StatusShown, render_shown, render_status
from tests.support.payloads import fixture_json

START = datetime(2026, 11, 23, 8, tzinfo=UTC)
TYPES = ("linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu", "windows.4xlarge")
NUMBER = st.none() | st.integers(0, 400) | st.floats(0, 400, allow_nan=False)


def _incident() -> Incident:
    payload = fixture_json("grafana/queue-alert-firing.json")
    delivery = delivery_of(parse_notification("grafana", payload))
    return open_incident(delivery, incident_id="7", uid="u7", channel="C1", now=START)


@st.composite
def views(draw: st.DrawFn, at: datetime) -> FleetSnapshot:
    types = {
        name: RunnerTypeMetrics(
            queued=draw(NUMBER), longest_wait_mins=draw(NUMBER), busy=draw(NUMBER)
        )
        for name in draw(st.lists(st.sampled_from(TYPES), unique=True, max_size=3))
    }
    source = draw(st.sampled_from(["prometheus", "alert"]))
    return FleetSnapshot(at=at, source=source, runner_types=types)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), statuses=st.integers(1, 5), quiet=st.booleans(), drained=st.booleans())
def test_the_sender_renders_the_status_the_tick_decided(
    data: st.DataObject, statuses: int, quiet: bool, drained: bool
) -> None:
    incident = _incident()
    for n in range(statuses):
        at = START + timedelta(minutes=10 * (n + 1))
        view = data.draw(views(at))
        live = view if view.is_live else None
        previous, current = incident.shown.status, as_snapshot(incident, view, at)
        since = previous.at if quiet and previous else None
        drain = (1, 3) if drained else None
        updated = record_status(incident, current, live=live, posted=not quiet)
        # What the tick would render itself.
        expected = render_status(
            updated, previous=previous, current=current, now=at, view=live, drain=drain, since=since
        )
        shown = StatusShown(
            current=current, previous=previous, live=live is not None, drain=drain, since=since
        )
        # Through the outbox as it is stored (JSON), then rendered from the incident as saved.
        stored = orjson.loads(orjson.dumps(shown.to_extra()))
        read = StatusShown.from_extra(stored)
        saved = Incident.model_validate_json(updated.model_dump_json(by_alias=True))
        assert render_shown(saved, read, now=at) == expected
        incident = updated


def test_a_reading_that_lands_between_the_decision_and_the_post_is_the_whole_reply() -> None:
    """Diagnostics read the fleet (30 queued) after the tick decided a status on 20 queued and
    before the sender posted it: the reply's headline and its type's line say 30, never 20
    beside 30."""
    name = "linux.2xlarge"
    decided_at, read_at = START + timedelta(minutes=10), START + timedelta(minutes=11)

    def reading(at: datetime, queued: float) -> FleetSnapshot:
        metrics = RunnerTypeMetrics(queued=queued, longest_wait_mins=12, busy=20, maximum=20)
        return FleetSnapshot(at=at, source="prometheus", runner_types={name: metrics})

    incident = _incident()
    decided = reading(decided_at, 20)
    current = as_snapshot(incident, decided, decided_at)
    recorded = record_status(incident, current, live=decided)
    # Decided as a quiet status (nothing new since the last) on its way to drained.
    shown = StatusShown(current=current, live=True, drain=(1, 3), since=decided_at)
    diagnosed = recorded.model_copy(update={"live": reading(read_at, 30)})
    text = str(render_shown(diagnosed, shown, now=read_at).blocks)
    assert "drained" not in text and "No material change" not in text
    assert "Queued jobs: *30*" in text and f"{name}: *30* queued" in text
    assert "Queued jobs: *20*" not in text and "*20* queued" not in text
