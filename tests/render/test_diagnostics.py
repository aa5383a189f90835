"""The diagnostics report as Slack shows it: names escaped, within Block Kit's limits."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.message import Rendered
from bot.domain.reading.diagnostics import diagnose
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.render.diagnostics import render_diagnostics
from tests.support.incidents import make_incident

NOW = datetime(2026, 11, 22, 18, 0, tzinfo=UTC)


def test_the_report_escapes_names_and_stays_within_block_kit_limits() -> None:
    hostile = "<!channel> & <https://evil|x>" * 20
    types = {f"{hostile}{i}": M(queued=i + 1, longest_wait_mins=i + 5) for i in range(60)}
    shot = FleetSnapshot(at=NOW, source="<b>", runner_types=types, note="<!here> broke")
    report = render_diagnostics(make_incident(), diagnose(shot), shot, by="*al*")
    assert isinstance(report, Rendered)
    text = str(report.blocks)
    assert "<!channel>" not in text and "<!here>" not in text
    assert len(report.blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in report.blocks if "text" in b)
