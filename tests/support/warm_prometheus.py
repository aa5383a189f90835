"""Prometheus started ahead of the exporters it scrapes.

A fresh `prometheus` scrapes nothing for its first five seconds: its scrape manager takes its
targets on a 5 s tick (fixed in Debian's Prometheus 2.42), so a test reading a fresh one waits
that out before its first sample. Instead each test worker keeps one started, scraping ports
held for exporters that do not exist yet. `scraper(count)` hands it over with the held sockets
(bound, not listening: a scrape meanwhile is refused, and no other server can take the port)
and starts the next one. The test serves its exporters on those sockets, and the next scrape,
within half a second, reads them: a fresh Prometheus all the same, its data its own.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import httpx

from tests.support.servers import Prometheus, wait_until

# Twice a second: a rate over a test's few-second window has several samples to go on, not
# two whose reading is at the mercy of a busy process.
SCRAPE_INTERVAL = "500ms"
NEVER = "0001-01-01T00:00:00Z"  # a target's lastScrape before its first scrape


@dataclass
class Scraper:
    """A started Prometheus scraping the ports of `sockets` every SCRAPE_INTERVAL."""

    prometheus: Prometheus
    sockets: list[socket.socket]

    def stop(self) -> None:
        self.prometheus.stop()
        for sock in self.sockets:
            sock.close()


_spares: dict[int, Scraper] = {}  # by how many targets, one each


def scraper(count: int) -> Scraper:
    """A Prometheus scraping `count` held sockets, its scrapes begun; the next one started."""
    taken = _spares.pop(count, None) or _launched(count)
    _spares[count] = _launched(count)
    try:
        taken.prometheus.wait_ready(timeout=30)
        wait_until(lambda: _scraping(taken), timeout=30, what="prometheus scraping its targets")
    except BaseException:
        taken.stop()
        raise
    return taken


def wait_scraped(taken: Scraper, *, times: int = 2) -> None:
    """Until Prometheus has scraped every target `times` times since it is served: a rate has
    its two samples, and a first reading sees every target, as a bot started beside a
    Prometheus that has long scraped its fleet does."""
    query = f"count(sum_over_time(up[1m]) >= {times})"

    def scraped() -> bool:
        answer = httpx.get(
            f"{taken.prometheus.url}/api/v1/query", params={"query": query}, timeout=1
        ).json()
        result = answer["data"]["result"]
        return bool(result) and int(result[0]["value"][1]) == len(taken.sockets)

    wait_until(scraped, timeout=30, what=f"prometheus scraping every target {times} times")


def start_spares(*counts: int) -> None:
    """Start one for each count ahead of the first test that asks (at the worker's start)."""
    for count in counts:
        if count not in _spares:
            _spares[count] = _launched(count)


def stop_spares() -> None:
    """Stop the ones started for a next test (at the end of the worker's session)."""
    while _spares:
        _, spare = _spares.popitem()
        spare.stop()


def _launched(count: int) -> Scraper:
    sockets = [_held() for _ in range(count)]
    targets = [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    prometheus = Prometheus(targets=targets, scrape_interval=SCRAPE_INTERVAL)
    prometheus.launch()
    return Scraper(prometheus, sockets)


def _held() -> socket.socket:
    # IPPROTO_TCP as `sandbox.serve` binds its own: the server it is handed to sets TCP_NODELAY.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    return sock


def _scraping(taken: Scraper) -> bool:
    """Every target scraped at least once (refused, as nothing serves it yet)."""
    answer = httpx.get(f"{taken.prometheus.url}/api/v1/targets", timeout=1).json()
    targets = answer["data"]["activeTargets"]
    return len(targets) == len(taken.sockets) and all(t["lastScrape"] != NEVER for t in targets)
