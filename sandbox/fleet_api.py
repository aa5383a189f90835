"""The simulated fleet over HTTP, speaking the real protocols the bot's production backends use.

- Prometheus: `GET|POST /api/v1/query` answers the instant queries of the `prometheus` metrics
  backend (its default ARC queries, at the bot's rate window) with instant vectors labelled like
  ARC's listener metrics (`name` = the scale set with its random suffix: `linux-2xlarge-x7q2k`
  for the runner type `linux.2xlarge`); the wait as ARC gives it, the startup histogram's buckets
  of the jobs that started within the window, each timed from its arrival (ARC has no gauge of
  the oldest queued job: that is the HUD's). What the queue cost (`promql.WAITED`, over any
  range the bot asks, at the time it asks) it answers as the histogram's increase over the range:
  the jobs that started in it, by runner type and `job_workflow_ref`, the label a scale set's
  `spec.listenerMetrics` adds (`pytorch/pytorch/.github/workflows/pull.yml@refs/pull/160012/
  merge` for a pull request's jobs, `…/trunk.yml@refs/heads/main` for a push's, as triggered).
  The runner pods' default queries (`promql.QUERIES`, each reading whatever it is) and their
  sources' probe it answers as a Prometheus scraping kube-state-metrics and cAdvisor would over
  the fleet's pods: every series present, each type's Pending pods and those no node fits (its
  node group full), labelled with the runner set from the pods' names; what never happens here
  (image pulls, OOM kills, throttling, nodes under pressure) has no series. Any other query is
  a `bad_data` error, as Prometheus answers a query it cannot run.
- Alertmanager API v2: `/api/v2/status`, `/api/v2/silences`, `/api/v2/silence/{id}`,
  `/api/v2/alerts`, `/-/ready`; the `alertmanager` silence backend points here, and the alert
  rule honours what is silenced.
- The Kubernetes API for each runner type's AutoscalingRunnerSet (`arc-runners/<scale set>`:
  `linux-2xlarge`), the `arc` scaler's target: GET and PATCH as strict as the API server
  (`sandbox.kube_api`: bearer token, resourceVersion preconditions, merge and JSON patches, the
  CRD's schema), and the SelfSubjectAccessReview with which `queuepilot check` asks what the
  token may do. Around each request the fleet plays ARC: its listener follows each set's
  minRunners and maxRunners (the runners it then asks for boot, then take jobs), and its
  controller writes the set's status (currentRunners and the ephemeral runners' counts), bumping
  the resourceVersion as it does.
- Grafana's side: a background loop evaluates the alert rule and posts Grafana webhook payloads
  to the bot, retrying like Grafana when the bot cannot take them.
- A human's view: `GET /` (the fleet, refreshed), `GET /runbook`, `GET /fleet.json`, and the
  pages the alerts' links open (`sandbox.fleet_pages`): the rule, and Grafana's silence form.

What it serves is in real time (`sandbox.fleet.in_real_time`: waits in real minutes, rates per
real minute), as the bot measures everything else on the wall clock; the fleet's model and its
Grafana rule (pending, repeat, thresholds) run in fleet time, and its payloads say the rule's
numbers in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.backends.metrics.prometheus import wait_window
from bot.backends.metrics.promql import (
    RUNNER_POD,
    WAITED,
    defaults,
    probe_query,
    range_queries,
    render,
)
from bot.domain.reading.runner_pods import NEEDS
from sandbox.fleet import Fleet, Job, TypeReading, in_real_time, minutes, workflow_ref
from sandbox.fleet_alerts import QueueRule, RuleConfig, SilenceError, Silences, grafana_payload
from sandbox.fleet_pages import rule_page, silence_form
from sandbox.kube_api import KubeApi

log = logging.getLogger(__name__)

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
EVALUATE_EVERY_SIM_S = 30.0  # Grafana evaluates a rule every 30 s here (simulated)
SAMPLES_KEPT = 20_000  # a reading per evaluation: days of the demo at ×10
LOOKBACK_S = 300.0  # Prometheus's: a step takes the latest sample at most this old
MAX_POINTS = 11_000  # Prometheus refuses a range query of more points per series
# ARC's startup histogram's buckets, in seconds (its `metrics.go`).
STARTUP_BUCKETS = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60, 70,
    80, 90, 100, 110, 120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800,
    2400, 3000, 3600,
)  # fmt: skip
POD_LABEL = "name"  # the runner-type label the pods' queries give (PROMETHEUS_RUNNER_TYPE_LABEL)
# What the bot's queries cut off a runner set's name to get its scale set: ARC's suffix, as
# PROMETHEUS_NAME_SUFFIX has it by default, in the PromQL string `PrometheusMetrics` asks with.
NAME_SUFFIX = f"-[{_SUFFIX_ALPHABET}]{{5}}"
CUT = json.dumps(f"(.+?)(?:{NAME_SUFFIX})?")
# A PromQL range as the bot writes it: whole seconds, or milliseconds.
_RANGE = "(?P<range>[0-9]+(?:ms|s|m|h))"
_RANGE_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class FleetApiConfig:
    """Where the fleet sends its alerts, and what it shares with the bot."""

    webhook_url: str | None = None  # the bot's /alerts/grafana; None sends nothing
    webhook_token: str | None = None
    kube_token: str = "sandbox-kube-token"  # the bearer token the Kubernetes API requires
    namespace: str = "arc-runners"  # where the AutoscalingRunnerSets live
    rate_window: str = "10m"
    boot_minutes: float = 5.0  # the bot's RUNNER_BOOT_MINUTES, which its pods' queries carry
    rule: RuleConfig = field(default_factory=RuleConfig)
    # Teams' own rules, each over the runner type its labels name (`runner_type`); the main
    # rule then leaves those types to them, as a team that routes its alerts takes them over.
    team_rules: tuple[dict[str, str], ...] = ()


def runner_set_name(scale_set: str) -> str:
    """ARC 0.14's `<scale set>-<5 random chars>`, stable per set (the bot strips the suffix)."""
    return f"{scale_set}-{_suffix(scale_set)}"


def _suffix(seed: str) -> str:
    """Five characters as Kubernetes' `GenerateName` picks them, stable per `seed`."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])


class FleetApi:
    def __init__(self, fleet: Fleet, config: FleetApiConfig) -> None:
        self.fleet = fleet
        self.config = config
        self.rule = QueueRule(config.rule)
        self.team_rules = [
            QueueRule(config.rule, labels=dict(labels)) for labels in config.team_rules
        ]
        self._team_types = frozenset(labels["runner_type"] for labels in config.team_rules)
        self.silences = Silences()
        self.started = datetime.now(UTC)
        self.sent: list[dict[str, Any]] = []  # every notification the bot accepted, in order
        self.kube = KubeApi(config.kube_token)
        # Every bounds change ARC's listener acted on: (runner type, minRunners, maxRunners).
        self.bounds_changes: list[tuple[str, int, int | None]] = []
        self.scale_sets = fleet.scale_sets  # runner type -> its scale set
        self._types = {scale_set: name for name, scale_set in self.scale_sets.items()}
        for name, reading in fleet.reading().items():
            self.kube.add(runner_set(self.scale_sets[name], config.namespace, reading))
        self._window_min = minutes(config.rate_window)
        # What Prometheus would have scraped: a reading at every rule evaluation (wall clock,
        # real time).
        self.samples: deque[tuple[float, dict[str, TypeReading]]] = deque(maxlen=SAMPLES_KEPT)
        queries = defaults(config.rate_window, POD_LABEL, config.boot_minutes)
        self._fields = {query: name for name, query in queries.items() if name not in NEEDS}
        # ARC's startup histogram, over the rate window and the longer one the wait falls back
        # to (window -> fleet minutes): the bot's wait, of the jobs that started.
        windows = (config.rate_window, wait_window(config.rate_window))
        wait = "longest_wait_mins"
        self._startups = {
            defaults(w, POD_LABEL, config.boot_minutes)[wait]: minutes(w) for w in windows if w
        }
        # The capacity report's wait: the same startup buckets, quantiled by Prometheus over the
        # range (`range_queries`); answered from the readings kept, as the instant one is.
        self._fields[range_queries(queries, wait_buckets=True)["wait_mins"]] = wait
        # The runner pods' queries (whatever readings they are) and their sources' probe, as a
        # Prometheus that scrapes kube-state-metrics and cAdvisor answers them.
        pods = {reading: query for reading, query in queries.items() if reading in NEEDS}
        self._pod_readings = {query: reading for reading, query in pods.items()}
        self._scraped = sorted({series for r in pods for series, _ in NEEDS[r]})
        self._probe = probe_query(self._scraped)
        self._waited = {part: waited_query(q.promql, q.by) for part, q in WAITED.items()}
        self.url = ""  # set once served; the payloads' links point here
        self.app = Starlette(
            routes=[
                Route("/", self._dashboard, methods=["GET"]),
                Route("/fleet.json", self._fleet_json, methods=["GET"]),
                Route("/runbook", self._runbook, methods=["GET"]),
                Route("/alerting/grafana/{uid:str}/view", self._rule_view, methods=["GET"]),
                Route("/alerting/silence/new", self._silence_form, methods=["GET"]),
                Route("/api/v1/query", self._query, methods=["GET", "POST"]),
                Route("/api/v1/query_range", self._query_range, methods=["GET", "POST"]),
                Route("/api/v2/status", self._status, methods=["GET"]),
                Route("/api/v2/silences", self._silences, methods=["GET", "POST"]),
                Route("/api/v2/silence/{sid:str}", self._silence, methods=["GET", "DELETE"]),
                Route("/api/v2/alerts", self._alerts, methods=["GET"]),
                Route("/-/ready", self._ready, methods=["GET"]),
                Route("/-/healthy", self._ready, methods=["GET"]),
                Route(self.kube.route.path, self._kubernetes, methods=["GET", "PATCH"]),
                self.kube.review_route,
                Route("/api/clickhouse/{name:str}", self._hud, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )

    # -- Prometheus ------------------------------------------------------------------------

    async def _params(self, request: Request) -> dict[str, str]:
        params = dict(request.query_params)
        if request.method == "POST":
            params.update({k: str(v) for k, v in (await request.form()).items()})
        return params

    def _unknown_query(self) -> Response:
        return _bad_data(
            "the simulated fleet answers only the prometheus backend's ARC queries at rate "
            f"window {self.config.rate_window}"
        )

    async def _query(self, request: Request) -> Response:
        params = await self._params(request)
        query = params.get("query", "").strip()
        wanted = self._fields.get(query)
        stamp = _stamp(params.get("time"))
        if query == self._probe:
            series = self._probed()
        elif query in self._pod_readings:
            series = self._pods(self._pod_readings[query])
        elif query in self._startups:
            series = self._startup_buckets(self._startups[query])
        elif wanted is not None:
            series = [(self._labels(name), getattr(r, wanted)) for name, r in self.served().items()]
        elif any(pods in query for pods in self._pod_readings):
            series = []  # the capacity report's subqueries: the fleet keeps no pods' history
        elif waited := self._waited_asked(query):
            series = self._started(*waited, stamp)
        else:
            return self._unknown_query()
        result = [{"metric": labels, "value": [stamp, _sample(value)]} for labels, value in series]
        return JSONResponse(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    async def _query_range(self, request: Request) -> Response:
        """`/api/v1/query_range` over the readings kept (`samples`), with Prometheus's checks:
        each step takes the latest sample at most 5 minutes old (its lookback)."""
        params = await self._params(request)
        try:
            start, end = (float(params[k]) for k in ("start", "end"))
        except (KeyError, ValueError):
            return _bad_data('invalid parameter "start": cannot parse to a valid timestamp')
        step = _step_s(params.get("step", ""))
        if step is None or step <= 0:
            return _bad_data(
                "zero or negative query resolution step widths are not accepted. Try a "
                "positive integer"
            )
        if end < start:
            return _bad_data("end timestamp must not be before start time")
        if (end - start) / step > MAX_POINTS:
            return _bad_data(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing "
                "the query resolution (?step=XX)"
            )
        wanted = self._fields.get(params.get("query", "").strip())
        if wanted is None:
            return self._unknown_query()
        series: dict[str, list[list[Any]]] = {}
        samples = list(self.samples)
        at = start
        while at <= end:
            seen = [readings for ts, readings in samples if at - LOOKBACK_S < ts <= at]
            for name, reading in (seen[-1] if seen else {}).items():
                series.setdefault(name, []).append([at, _sample(getattr(reading, wanted))])
            at += step
        result = [{"metric": self._labels(name), "values": v} for name, v in series.items()]
        return JSONResponse(
            {"status": "success", "data": {"resultType": "matrix", "result": result}}
        )

    def served(self) -> dict[str, TypeReading]:
        """Each runner type now, in real time: what Prometheus would scrape."""
        readings = self.fleet.reading(self._window_min)
        return {name: in_real_time(read, self.fleet.speed) for name, read in readings.items()}

    def _startup_buckets(self, window_min: float) -> list[tuple[dict[str, str], float]]:
        """`gha_job_startup_duration_seconds_bucket`'s rates per second over the window, per
        runner type and ARC's bucket, as Prometheus answers the bot's query: each start's wait
        in real seconds, counted in every bucket it fits."""
        found = []
        for name, waits in self.fleet.startup_waits(window_min).items():
            real = [waited / self.fleet.speed for waited in waits]
            for bound in (*STARTUP_BUCKETS, math.inf):
                le = "+Inf" if math.isinf(bound) else f"{bound:g}"
                count = sum(1 for waited in real if waited <= bound)
                found.append(({**self._labels(name), "le": le}, count / (window_min * 60)))
        return found

    def _waited_asked(self, query: str) -> tuple[str, float] | None:
        """Which part of the cost's histogram `query` asks (`WAITED`'s), and over what range
        (real seconds); None when it is none of them."""
        for part, pattern in self._waited.items():
            if found := pattern.fullmatch(query):
                unit = found["range"].lstrip("0123456789")
                return part, int(found["range"].removesuffix(unit)) * _RANGE_S[unit]
        return None

    def _started(self, part: str, range_s: float, at: float) -> list[tuple[dict[str, str], float]]:
        """The startup histogram's increase over the `range_s` real seconds to `at`: its buckets
        (`le`), sum or count of the jobs that started then, each wait in real seconds, per
        runner type and workflow ref, labelled as the bot's query labels its answer."""
        speed = self.fleet.speed
        ago = max(time.time() - at, 0.0) * speed
        found = []
        for name, starts in self.fleet.started_within(range_s * speed, ago).items():
            by_ref: dict[str, list[float]] = {}
            for start in starts:
                by_ref.setdefault(workflow_ref(start.job), []).append(start.waited / speed)
            scale_set = self.scale_sets[name]
            for ref, waits in sorted(by_ref.items()):
                labels = {"job_workflow_ref": ref, "name": scale_set, "queuepilot_type": scale_set}
                if part == "counts":
                    found.append((labels, float(len(waits))))
                elif part == "sums":
                    found.append((labels, sum(waits)))
                else:
                    for bound in (*STARTUP_BUCKETS, math.inf):
                        le = "+Inf" if math.isinf(bound) else f"{bound:g}"
                        count = sum(1 for waited in waits if waited <= bound)
                        found.append(({**labels, "le": le}, float(count)))
        return found

    def _labels(self, runner_type: str) -> dict[str, str]:
        """A listener's labels: its runner set's name, as ARC 0.14 names it."""
        name = runner_set_name(self.scale_sets[runner_type])
        return {"name": name, "namespace": self.config.namespace}

    # -- the runner pods, as kube-state-metrics and cAdvisor export them -----------------------

    def _probed(self) -> list[tuple[dict[str, str], float]]:
        """The probe's answer: every series the pods' queries read is scraped (its count of
        series, which the bot does not read, is the fleet's runner pods')."""
        pods = sum(r.registered + r.booting for r in self.served().values())
        return [({"__name__": series}, pods) for series in self._scraped]

    def _pods(self, reading: str) -> list[tuple[dict[str, str], float]]:
        """One runner pods' reading as its default query answers it over this fleet's pods: per
        runner type, Pending pods (booting, or no node fits), how long, and those no node fits
        for longer than a boot; no series for what never happens here (an image that does not
        pull, a kill for memory, throttling, a node under pressure), as Prometheus has none
        for a `count` over no pods."""
        found = []
        for name, r in self.served().items():
            value = pod_readings(r, self.config.boot_minutes).get(reading)
            if value:  # Prometheus has no series for a `count` over no pods, nor their age
                found.append((self._pod_labels(name), value))
        return found

    def _pod_labels(self, runner_type: str) -> dict[str, str]:
        """A pods' reading's labels: the runner set, taken from a runner pod's name by the
        query's own pattern (ARC names the pod `<runner set>-runner-<5 chars>`)."""
        runner_set = runner_set_name(self.scale_sets[runner_type])
        pod = f"{runner_set}-runner-{_suffix(runner_set)}"
        found = re.fullmatch(RUNNER_POD, pod)  # label_replace leaves a name it misses empty
        return {POD_LABEL: found.group(1) if found else ""}

    # -- the HUD ---------------------------------------------------------------------------

    async def _hud(self, request: Request) -> Response:
        """HUD's saved query `queued_jobs` (torchci's `/api/clickhouse/<name>`): one row per
        job queued more than 5 minutes, worst first. `parameters` is required, as the route
        JSON-parses it; other saved queries are not simulated. The route catches nothing, so a
        missing `parameters` or an unknown query throws, and Next.js answers its bare 500
        (`sendError(apiRes, 500, 'Internal Server Error')`), as `tests/support/fakes/hud_api`."""
        crashed = Response("Internal Server Error", status_code=500)
        raw = request.query_params.get("parameters")
        if raw is None:
            return crashed
        try:
            json.loads(raw)
        except ValueError:
            return crashed
        if request.path_params["name"] != "queued_jobs":
            return crashed
        # HUD's 5 minutes, of fleet time (the query's threshold scales with the fleet, as the
        # bot's settings do); the waits it lists in real seconds.
        speed = self.fleet.speed
        rows = [
            hud_row(runner_type, job, waited / speed)
            for runner_type, job, waited in self.fleet.queued_jobs()
            if waited > 5 * 60
        ]
        return JSONResponse(sorted(rows, key=lambda row: -row["queue_s"]))

    # -- Alertmanager API v2 -------------------------------------------------------------------

    async def _status(self, request: Request) -> Response:
        """`alertmanagerStatus` of the API's OpenAPI description; one instance, no cluster."""
        version = {"version": "0.25.0", "revision": "sandbox", "branch": "sandbox"}
        version |= {"buildUser": "sandbox", "buildDate": "", "goVersion": "go1.19"}
        return JSONResponse(
            {
                "cluster": {"status": "disabled", "peers": []},
                "versionInfo": version,
                "config": {"original": ""},
                "uptime": self.started.isoformat().replace("+00:00", "Z"),
            }
        )

    async def _silences(self, request: Request) -> Response:
        now = datetime.now(UTC)
        if request.method == "GET":
            return JSONResponse([s.as_json(now) for s in self.silences.all()])
        try:
            body = json.loads(await request.body())
            silence_id = self.silences.create(body, now)
        except ValueError as exc:  # SilenceError and undecodable JSON alike
            reason = str(exc) if isinstance(exc, SilenceError) else "body is not JSON"
            return PlainTextResponse(reason, status_code=400)
        log.info("fleet: silence %s created", silence_id)
        return JSONResponse({"silenceID": silence_id})

    async def _silence(self, request: Request) -> Response:
        now, silence_id = datetime.now(UTC), request.path_params["sid"]
        silence = self.silences.get(silence_id)
        if silence is None:
            return PlainTextResponse("silence not found", status_code=404)
        if request.method == "GET":
            return JSONResponse(silence.as_json(now))
        if not self.silences.expire(silence_id, now):
            return PlainTextResponse("silence already expired", status_code=500)
        return Response(status_code=200)

    async def _alerts(self, request: Request) -> Response:
        now = datetime.now(UTC)
        alerts = []
        for rule in self.rules:
            if rule.state != "firing":
                continue
            silenced_by = self.silences.silencing(rule.labels, now)
            state = "suppressed" if silenced_by else "active"
            alerts.append(
                {
                    "labels": rule.labels,
                    "annotations": {},
                    "status": {"state": state, "silencedBy": silenced_by, "inhibitedBy": []},
                    "fingerprint": hashlib.sha256(
                        json.dumps(rule.labels, sort_keys=True).encode()
                    ).hexdigest()[:16],
                }
            )
        return JSONResponse(alerts)

    @property
    def rules(self) -> list[QueueRule]:
        return [self.rule, *self.team_rules]

    async def _ready(self, request: Request) -> Response:
        return PlainTextResponse("OK")

    # -- the Kubernetes API, with ARC's listener and controller around it -------------------------

    async def _kubernetes(self, request: Request) -> Response:
        self._reconcile()  # what a client reads is as current as the fleet
        answer = await self.kube.handle(request)
        self._reconcile()  # a patched spec is acted on at once, and the status follows
        return answer

    def _reconcile(self) -> None:
        for runner_set in list(self.kube.sets.values()):
            name, spec = self._types[runner_set["metadata"]["name"]], runner_set["spec"]
            # The API server has checked both counts against the CRD's schema.
            bounds = (spec.get("minRunners", 0), spec.get("maxRunners"))
            if self.fleet.set_bounds(name, *bounds):
                self.bounds_changes.append((name, *bounds))
        readings = self.fleet.reading(self._window_min)
        for runner_set in list(self.kube.sets.values()):
            scale_set = runner_set["metadata"]["name"]
            status = set_status(readings[self._types[scale_set]])
            if runner_set.get("status") != status:
                self.kube.write(
                    scale_set, manager="manager", status=status, namespace=self.config.namespace
                )

    def spec(self, runner_type: str) -> dict[str, Any]:
        """The type's AutoscalingRunnerSet's spec as it stands."""
        key = (self.config.namespace, self.scale_sets[runner_type])
        return dict(self.kube.sets[key]["spec"])

    # -- the human's view ------------------------------------------------------------------

    async def _fleet_json(self, request: Request) -> Response:
        readings = self.served()
        return JSONResponse(
            {
                "minute": round(self.fleet.minute, 2),
                "speed": self.fleet.speed,
                "alert": self.rule.state,
                "runner_types": {name: vars(r) for name, r in readings.items()},
            }
        )

    async def _dashboard(self, request: Request) -> Response:
        readings = self.served()
        by_workflow: dict[tuple[str, str], int] = {}
        for runner_type, job, _ in self.fleet.queued_jobs():
            key = (runner_type, f"{job.workflow.name} ({job.workflow.event})")
            by_workflow[key] = by_workflow.get(key, 0) + 1
        jobs = "".join(
            f"<tr><td>{html.escape(t)}</td><td>{html.escape(w)}</td><td>{n}</td></tr>"
            for (t, w), n in sorted(by_workflow.items(), key=lambda item: -item[1])
        )
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td>{r.queued}</td><td>{r.longest_wait_mins}</td>"
            f"<td>{r.busy}/{r.registered}</td><td>{len(r.pending_ages_mins)} "
            f"({len(r.unschedulable_ages_mins)})</td><td>{r.minimum}–{r.maximum}</td>"
            f"<td>{r.arrival_per_min}</td><td>{r.completed_per_min}</td></tr>"
            for name, r in readings.items()
        )
        page = (
            "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=5>"
            "<title>Simulated CI fleet</title><body style='font-family:sans-serif'>"
            f"<h1>Simulated CI fleet</h1><p>minute {self.fleet.minute:.1f} at ×{self.fleet.speed}"
            f" · alert: {self.rule.state} · waits and rates in real minutes, as the bot reads "
            "them</p><table border=1 cellpadding=4>"
            "<tr><th>runner type</th><th>queued</th><th>longest wait (min)</th><th>busy</th>"
            "<th>pods Pending (no node fits)</th><th>min–max</th><th>arrivals/min</th>"
            "<th>completions/min</th></tr>"
            f"{rows}</table><h2>Queued jobs by workflow</h2><table border=1 cellpadding=4>"
            f"<tr><th>runner type</th><th>workflow</th><th>queued</th></tr>{jobs}</table></body>"
        )
        return HTMLResponse(page)

    async def _runbook(self, request: Request) -> Response:
        return PlainTextResponse(
            "Jobs queueing in autoscaled machines (simulated fleet)\n\n"
            "1. Run diagnostics from the incident: is it demand (arrivals over baseline), slow\n"
            "   jobs, or capacity (busy = max)?\n"
            "2. Capacity: scale the queueing runner type up from the incident (its scale set's\n"
            "   maxRunners when it is at its maximum); it is put back once the queue drains.\n"
            "3. Silence the alert while you work on it; the thread keeps the numbers coming.\n"
        )

    async def _rule_view(self, request: Request) -> Response:
        uid = request.path_params["uid"]
        rule = next((r for r in self.rules if r.labels["__alert_rule_uid__"] == uid), None)
        if rule is None:
            return HTMLResponse("<!doctype html><title>Rule not found</title>", status_code=404)
        now = datetime.now(UTC)
        return HTMLResponse(rule_page(rule, self.silences, now, speed=self.fleet.speed))

    async def _silence_form(self, request: Request) -> Response:
        matchers = request.query_params.getlist("matcher")
        return HTMLResponse(silence_form(matchers, self.silences, datetime.now(UTC)))

    # -- Grafana's side: evaluate the rule, send the notifications -------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(self._notify_forever()) if self.config.webhook_url else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _notify_forever(self) -> None:
        every_s = EVALUATE_EVERY_SIM_S / self.fleet.speed
        headers = {"Content-Type": "application/json"}
        if self.config.webhook_token:
            headers["Authorization"] = f"Bearer {self.config.webhook_token}"
        async with httpx.AsyncClient(timeout=10, headers=headers) as client:
            while True:
                await asyncio.sleep(every_s)
                for payload in self.evaluate_all():
                    await self._deliver(client, payload)

    def evaluate(self) -> dict[str, Any] | None:
        """One evaluation of the main alert rule: the payload to send, if any."""
        return self._evaluate(self.rule, self.fleet.worst(self._window_min, self._team_types))

    def evaluate_all(self) -> list[dict[str, Any]]:
        """One evaluation of every rule, the main one first: the payloads to send. The reading
        is kept, as Prometheus keeps what it scrapes, for range queries."""
        self.samples.append((time.time(), self.served()))
        payloads = [self.evaluate()]
        for rule in self.team_rules:
            reading = self.fleet.reading(self._window_min).get(rule.labels["runner_type"])
            worst = (reading.queued, reading.longest_wait_mins) if reading else (0, 0.0)
            payloads.append(self._evaluate(rule, worst))
        return [payload for payload in payloads if payload is not None]

    def _evaluate(self, rule: QueueRule, worst: tuple[int, float]) -> dict[str, Any] | None:
        queued, wait = worst
        now = datetime.now(UTC)
        silenced = bool(self.silences.silencing(rule.labels, now))
        note = rule.evaluate(self.fleet.minute, now, queued, wait, silenced=silenced)
        if note is None:
            return None
        return grafana_payload(
            note, rule.labels, fleet_url=self.url, thresholds=rule.config, speed=self.fleet.speed
        )

    async def _deliver(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> None:
        """Post until the bot accepts it: Grafana retries a contact point that fails."""
        assert self.config.webhook_url is not None
        for attempt in range(1, 6):
            try:
                response = await client.post(self.config.webhook_url, json=payload)
                if response.status_code < 300:
                    self.sent.append(payload)
                    return
                if 400 <= response.status_code < 500:
                    log.warning("fleet: the bot refused the alert: %s", response.text[:200])
                    return
            except httpx.HTTPError as exc:
                log.info("fleet: alert not delivered (%s), retrying", type(exc).__name__)
            await asyncio.sleep(min(2**attempt, 10))
        log.warning("fleet: gave up delivering a %s notification", payload.get("status"))


def waited_query(template: str, by: str) -> re.Pattern[str]:
    """One of the cost's queries as the bot renders it with the demo's settings (no selector,
    ARC's suffix cut), over any range: the same range wherever the query says it."""
    mark = "\x00range\x00"
    pieces = render(template, by=by, cut=CUT, range=mark).split(mark)
    ranges = [_RANGE, *["(?P=range)"] * (len(pieces) - 2)]
    bounds = zip(pieces, [*ranges, ""], strict=True)
    return re.compile("".join(re.escape(piece) + bound for piece, bound in bounds))


def _stamp(value: str | None) -> float:
    try:
        return float(value) if value else time.time()
    except ValueError:
        return time.time()


def _sample(value: float | int) -> str:
    return repr(float(value))


def _bad_data(error: str) -> Response:
    return JSONResponse(
        {"status": "error", "errorType": "bad_data", "error": error}, status_code=400
    )


def _step_s(text: str) -> float | None:
    """A range query's step: seconds ("60", "1.5") or a duration ("1m", "30s")."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return minutes(text) * 60
    except ValueError:
        return None


def hud_row(runner_type: str, job: Job, waited_s: float) -> dict[str, Any]:
    """A `queued_jobs` row as HUD returns it (`../shared/fixtures/hud/queued_jobs.json`)."""
    workflow, run = job.workflow, 19633300000 + job.id // 10
    ciflow = workflow.branch.startswith("ciflow/")
    source = "main" if workflow.branch == "main" and workflow.event == "push" else "other"
    return {
        "queue_s": int(waited_s),
        "name": f"{workflow.name} / test ({job.id % 5 + 1}, 5, {runner_type})",
        "html_url": f"https://github.com/pytorch/pytorch/actions/runs/{run}/job/{job.id}",
        "machine_type": runner_type,
        "head_sha": f"{job.id:040x}",
        "head_branch": workflow.branch,
        "event": workflow.event,
        "source_type": "ciflow" if ciflow else source,
        "ciflow_id": workflow.branch.split("/")[-1] if ciflow else None,
    }


def runner_set(scale_set: str, namespace: str, reading: TypeReading) -> dict[str, Any]:
    """The AutoscalingRunnerSet a `gha-runner-scale-set` install makes, named for its scale set
    (the release: `linux-2xlarge`, a Kubernetes name, where jobs' labels say `linux.2xlarge`).
    Not labelled as Helm's: the demo shows the revert, not the warning that Helm would undo it."""
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": scale_set,
            "namespace": namespace,
            "resourceVersion": "1000",
            "generation": 1,
            "labels": {
                "actions.github.com/scale-set-name": scale_set,
                "actions.github.com/scale-set-namespace": namespace,
                "app.kubernetes.io/component": "autoscaling-runner-set",
            },
        },
        "spec": {
            "githubConfigUrl": "https://github.com/pytorch",
            "runnerScaleSetName": scale_set,
            "minRunners": reading.minimum,
            "maxRunners": reading.maximum,
        },
        "status": set_status(reading),
    }


def set_status(reading: TypeReading) -> dict[str, Any]:
    """ARC's controller's status: ephemeral runners starting (pending) and registered (running)."""
    return {
        "currentRunners": reading.registered + reading.booting,
        "pendingEphemeralRunners": reading.booting,
        "runningEphemeralRunners": reading.registered,
        "failedEphemeralRunners": 0,
        "phase": "Running",
    }


def pod_readings(r: TypeReading, boot_minutes: float) -> dict[str, float | None]:
    """A type's runner pods' readings over the fleet's pods, as the bot reads them from the
    default queries (an age None without a pod): Pending pods (booting, or no node fits), how
    long, those no node fits yet, and those no node fits for longer than a boot."""
    stuck = [age for age in r.unschedulable_ages_mins if age > boot_minutes]
    return {
        "pods_pending": len(r.pending_ages_mins),
        "pending_mins": max(r.pending_ages_mins, default=None),
        "no_node": len(r.unschedulable_ages_mins),
        "unschedulable": len(stuck),
        "unschedulable_mins": max(stuck, default=None),
    }
