"""PROMETHEUS_SELECTOR against a real `prometheus` holding two clusters' fleets of the same names
(ARC scale sets, runner sets, runner pods and nodes), each cluster's series labelled `cluster`
as a shared Thanos or Mimir holds them: the reading is the selected cluster's alone; every
query the backend asks selects every series it reads by the selector, as Prometheus's own parser
reads the query; and Prometheus reads the selector's text as the matchers the setting meant."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import given, settings

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings, load_settings
from bot.domain.alerting.promql_selector import parse_selector, selector_text
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.runner_pods import NEEDS
from bot.factory import build_metrics
from tests.domain.test_promql_selector import SELECTORS
from tests.support.fakes.arc_clusters import TwoClusters
from tests.support.fakes.arc_exporter import GAUGES, HEALTHY, QUEUEING
from tests.support.running import eventually


@pytest.fixture(scope="module")
def clusters() -> Iterator[TwoClusters]:
    both = TwoClusters()
    try:
        yield both
    finally:
        both.stop()


def read_settings_of(url: str, monkeypatch: pytest.MonkeyPatch, selector: str) -> Settings:
    """The settings `serve` reads from its environment, nothing else of it set."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("METRICS_BACKEND", "prometheus")
    monkeypatch.setenv("PROMETHEUS_URL", url)
    monkeypatch.setenv("PROMETHEUS_RATE_WINDOW", "30s")
    if selector:
        monkeypatch.setenv("PROMETHEUS_SELECTOR", selector)
    return load_settings(_env_file=None)


def backend(url: str, monkeypatch: pytest.MonkeyPatch, selector: str) -> PrometheusMetrics:
    """The backend `serve` builds from its environment."""
    metrics = build_metrics(read_settings_of(url, monkeypatch, selector))
    assert isinstance(metrics, PrometheusMetrics)
    return metrics


async def full_reading(clusters: TwoClusters, metrics: PrometheusMetrics) -> FleetSnapshot:
    """A reading with every number: the job metrics' rates and the runner pods'."""

    async def complete() -> FleetSnapshot | None:
        clusters.work()
        snap = await metrics.read(now=datetime.now(UTC))
        queueing = snap.runner_types.get(QUEUEING)
        ready = (
            queueing is not None
            and queueing.job_duration_mins is not None
            and queueing.pods is not None
            and queueing.pods.nodes
            and HEALTHY in snap.runner_types
        )
        return snap if ready else None

    return await eventually(complete, what="both clusters scraped", timeout=60)


async def test_the_reading_is_the_selected_clusters_alone(
    clusters: TwoClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = backend(clusters.prometheus.url, monkeypatch, 'cluster="prod"')
    try:
        snap = await full_reading(clusters, metrics)
    finally:
        await metrics.aclose()

    assert snap.note == ""
    assert set(snap.runner_types) == {QUEUEING, HEALTHY}
    queueing, healthy = snap.runner_types[QUEUEING], snap.runner_types[HEALTHY]
    assert (queueing.queued, queueing.assigned, queueing.registered) == (43, 163, 120)
    assert (queueing.busy, queueing.idle, queueing.maximum, queueing.desired) == (120, 0, 120, 120)
    assert (healthy.queued, healthy.registered, healthy.idle, healthy.minimum) == (0, 19, 2, 2)
    # prod's jobs wait 10 min and run 25; staging's wait 30 s and run 2.
    assert queueing.longest_wait_mins is not None and 9 <= queueing.longest_wait_mins <= 10
    assert queueing.job_duration_mins == pytest.approx(25.0)
    pods = queueing.pods
    assert pods is not None and pods.unknown == ""
    assert (pods.pods_pending, pods.unschedulable, pods.image_pull) == (2, 2, 0)
    assert [(n.node, n.condition) for n in pods.nodes] == [
        ("ip-10-0-1-17.ec2.internal", "DiskPressure")
    ]


async def test_without_the_selector_the_clusters_scale_sets_merge(
    clusters: TwoClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the setting is for: read from both clusters, a scale set's numbers are neither's."""
    metrics = backend(clusters.prometheus.url, monkeypatch, "")
    try:
        snap = await metrics.read(now=datetime.now(UTC))
    finally:
        await metrics.aclose()
    # The most assigned of either (staging's 400) less the most running (prod's 120): neither
    # prod's 43 nor staging's 300.
    assert snap.runner_types[QUEUEING].queued == 400 - 120


# -- every query asked, as Prometheus parses it --------------------------------------------------

WHERE = 'cluster=~"prod", region!="us-east-1"'
# A vector selector in Prometheus's formatting of a query: a name with its matchers, or matchers
# alone; strings, numbers and durations are tokens of their own.
TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|[a-zA-Z_][a-zA-Z0-9_:]*|[0-9][0-9a-zA-Z.]*|\S')
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {*LABEL_LISTS, "bool", "offset", "and", "or", "unless", "atan2"}


def vector_selectors(formatted: str) -> list[tuple[str, frozenset[str]]]:
    """Each vector selector of a query as Prometheus formats it (`GET /api/v1/format_query`):
    (metric name, its matchers as Prometheus writes them)."""
    tokens = TOKEN.findall(formatted)
    found, i = [], 0
    while i < len(tokens):
        token, after = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in LABEL_LISTS and after == "(":
            i = tokens.index(")", i) + 1
            continue
        named = re.fullmatch(r"[a-zA-Z_]\w*", token) is not None
        # A function's or aggregation's name is followed by its arguments or its grouping.
        is_selector = token == "{" or (
            named and token not in KEYWORDS and after not in ("(", "by", "without")
        )
        if not is_selector:
            i += 1
            continue
        name, start = ("", i) if token == "{" else (token, i + 1)
        matchers: frozenset[str] = frozenset()
        if start < len(tokens) and tokens[start] == "{":
            end = tokens.index("}", start)
            inside = "".join(tokens[start + 1 : end])
            matchers = frozenset(re.findall(r'\w+(?:=~|!~|!=|=)"(?:\\.|[^"\\])*"', inside))
            i = end + 1
        else:
            i = start
        found.append((name, matchers))
    return found


def formatted(url: str, query: str) -> str:
    answer = httpx.get(f"{url}/api/v1/format_query", params={"query": query}, timeout=10)
    assert answer.status_code == 200, (query, answer.text)
    return str(answer.json()["data"])


async def test_every_query_asked_selects_every_series_it_reads_by_the_selector(
    clusters: TwoClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def record(request: httpx.Request) -> None:
        asked.append(request.url.params["query"])

    client = httpx.AsyncClient(
        base_url=clusters.prometheus.url, event_hooks={"request": [record]}, timeout=10
    )
    config = read_settings_of(clusters.prometheus.url, monkeypatch, WHERE)
    metrics = PrometheusMetrics(config, client)
    try:
        snap = await full_reading(clusters, metrics)
        asked.clear()  # one round of each: the reading, the pods' probe, the report, the jobs
        await metrics.read(now=datetime.now(UTC))
        await metrics.runner_pods(now=datetime.now(UTC), fresh=True)
        end = datetime.now(UTC)
        history = await metrics.history(start=end - timedelta(minutes=2), end=end)
        await metrics.queued_jobs(now=end)
    finally:
        await metrics.aclose()

    assert snap.runner_types[QUEUEING].queued == 43
    assert history.note == "" and history.types[QUEUEING].wait_p50_mins is not None
    assert 9 <= history.types[QUEUEING].wait_p50_mins <= 10  # prod's starts alone
    wanted = frozenset(WHERE.split(", "))
    read = set()
    for query in sorted(set(asked)):
        selectors = vector_selectors(formatted(clusters.prometheus.url, query))
        assert selectors, query
        for name, matchers in selectors:
            assert wanted <= matchers, f"{name or '{…}'} without {WHERE} in {query}"
            read.add(name)
    every = {series for reading in NEEDS.values() for series, _ in reading}
    every |= {f"gha_{gauge}" for gauge in GAUGES} | {
        "gha_started_jobs_total",
        "gha_completed_jobs_total",
        "gha_job_startup_duration_seconds_bucket",
        "gha_job_execution_duration_seconds_sum",
        "gha_job_execution_duration_seconds_count",
    }
    assert every <= read, every - read
    assert "" in read, "the pods' probe selects by __name__ alone"


# -- the selector as Prometheus reads it --------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(SELECTORS)
def test_prometheus_reads_the_selectors_text_as_the_same_matchers(
    clusters: TwoClusters, chosen: tuple
) -> None:
    shown = formatted(clusters.prometheus.url, f"up{{{selector_text(chosen)}}}")
    inside = shown.removeprefix("up{").removesuffix("}")
    assert sorted(parse_selector(inside), key=repr) == sorted(chosen, key=repr)


@pytest.mark.parametrize(
    "text",
    [
        "cluster=prod",
        'cluster=="prod"',
        'cluster=~~"prod"',
        'cluster:"prod"',
        '9cluster="prod"',
        'cluster.name="prod"',
        'cluster=~"(prod"',
        'cluster="prod" region="eu"',
        'cluster="prod",,region="eu"',
        'cluster="prod',
        'cluster="pr\nod"',
        'cluster="\\q"',
        "cluster='\\\"'",
        'cluster="\\ud800"',
        'cluster="\\u00"',
        '__name__="up"',
    ],
)
def test_what_the_setting_refuses_prometheus_refuses_too(clusters: TwoClusters, text: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(text)
    answer = httpx.get(
        f"{clusters.prometheus.url}/api/v1/query", params={"query": f"up{{{text}}}"}, timeout=10
    )
    assert answer.status_code == 400 and answer.json()["errorType"] == "bad_data", answer.text
