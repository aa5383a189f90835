"""The runner pods' readings from Prometheus's answers to their queries (`promql.QUERIES`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bot.backends.http import number_of
from bot.backends.metrics.promql import QUERIES, Vector, combined
from bot.domain.reading.runner_pods import (
    DISK,
    NODE_READINGS,
    OOM_PODS_KEPT,
    NodeTrouble,
    RunnerPods,
    kept_nodes,
    unknown_said,
)


def runner_pods(
    answers: Mapping[str, Vector],
    probed: Mapping[str, str],
    runner_type: Callable[[Mapping[str, str]], str],
) -> tuple[dict[str, RunnerPods], RunnerPods]:
    """Per runner type with series, its pods' readings, and those of a type with none. `probed`:
    reading -> the source it needs that is not scraped ("" when all are; unprobed: trusted)."""
    values: dict[str, dict[str, float]] = {}
    killed: dict[str, set[tuple[str, str]]] = {}
    nodes: dict[str, dict[tuple[str, str], float]] = {}
    busy: dict[str, float] = {}  # node -> its disks' busy share
    node_kills: dict[str, dict[str, float]] = {}  # type -> node -> its OOM kills
    for reading, series in answers.items():
        how = QUERIES[reading].read
        for labels, value in series:
            name = runner_type(labels)
            if not name:
                continue
            # Several runner sets of one type (a template rolling, two namespaces): counts add
            # up, the rest take the worst.
            if how in ("nodes", "disks"):
                node, condition = labels.get("node", ""), labels.get("condition", "")
                if how == "disks":
                    condition = DISK
                    said = number_of(labels.get("busy")) or 0.0  # `count_values`' label
                    busy[node] = max(busy.get(node, 0.0), said)
                if node and condition:
                    on = nodes.setdefault(name, {})
                    on[node, condition] = on.get((node, condition), 0.0) + value
                continue
            if how == "per node":  # each node once, whichever sets ran there
                node_kills.setdefault(name, {})[labels.get("node", "")] = value
                continue
            if how == "pods" and labels.get("pod"):
                killed.setdefault(name, set()).add((labels["pod"], labels.get("uid", "")))
            read = values.setdefault(name, {})
            read[reading] = combined(how, read.get(reading), value)
    missing = {r: source for r, source in probed.items() if source}
    unknown = unknown_said(missing)
    known = [r for r in answers if r not in missing and r not in NODE_READINGS]
    found = {}
    for name in sorted({"", *values, *nodes, *node_kills}):
        read = {r: values.get(name, {}).get(r, 0.0) for r in known}
        if "node_oom_kills" in read:
            read["node_oom_kills"] = sum(node_kills.get(name, {}).values())
        for aged in ("pending_mins", "unschedulable_mins"):
            read[aged] = values.get(name, {}).get(aged)  # no pod: no age
        listed, more = kept_nodes(
            [
                NodeTrouble(node=n, condition=c, pods=p, busy=busy.get(n) if c == DISK else None)
                for (n, c), p in nodes.get(name, {}).items()
            ]
        )
        pods = tuple(sorted(killed.get(name, ())))[:OOM_PODS_KEPT]
        found[name] = RunnerPods(
            **read, oom_pods=pods, nodes=listed, more_nodes=more, unknown=unknown
        )
    return found, found.pop("")
