"""The runner types the bot knows (SCALER_TARGETS' and RUNNER_SCALE_SETS'), each with the ARC
scale set it stands for, as the Prometheus backend reads its series and the arc scaler patches
it: a name that does not agree across the three is found here, not during an incident."""

from __future__ import annotations

from bot.checks import Finding, ok
from bot.config import MetricsBackend, ScalerBackend, Settings
from bot.factory import scale_targets

SUBJECT = "runners"


def findings(settings: Settings) -> list[Finding]:
    """One line a known runner type, where scale sets matter (Prometheus's ARC metrics, the arc
    scaler); nothing otherwise."""
    arc = settings.scaler_backend is ScalerBackend.ARC
    if not arc and settings.metrics_backend is not MetricsBackend.PROMETHEUS:
        return []
    targets = scale_targets(settings) if arc else {}
    lines = []
    for row in settings.runner_names.table():
        how = "RUNNER_SCALE_SETS" if row.explicit else "derived"
        detail = f"{row.runner_type} → scale set {row.scale_set} ({how})"
        target = targets.get(row.runner_type)
        if target is not None:
            detail += f"; scales {target.target}"
        lines.append(ok(SUBJECT, detail))
    return lines
