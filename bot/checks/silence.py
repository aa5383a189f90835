"""Silences: Alertmanager's API v2 (Grafana serves it under its own prefix). A Grafana token is
tested by posting an empty silence: Grafana checks permissions (403) before the body (400), so a
400 means the token passed and nothing was created."""

from __future__ import annotations

from contextlib import aclosing

import httpx

from bot.backends.http import BackendError, json_object
from bot.backends.silence import Silencer
from bot.checks import Finding, fail, ok, shown_url, warn
from bot.config import Settings, SilenceBackend
from bot.factory import build_silencer

SUBJECT = "silences"
GRAFANA_TOKEN = (
    "set GRAFANA_TOKEN to a service-account token (Administration → Users and access → Service "
    "accounts → Add service account token)"
)
GRAFANA_URL = "set GRAFANA_URL to Grafana's root URL"
GRAFANA_ON = " (https://grafana.example.com), Grafana Alerting on"
GRAFANA_ROLE = (
    "give the service account the Editor role, or alert.silences:read, alert.silences:create "
    "and alert.silences:write (alert.instances:read/create/write before Grafana 11)"
)


async def probe(settings: Settings) -> list[Finding]:
    silencer = build_silencer(settings)
    grafana = settings.silence_backend is SilenceBackend.GRAFANA
    url = settings.grafana_url if grafana else settings.alertmanager_url
    assert isinstance(silencer, Silencer)
    async with aclosing(silencer):
        assert url  # the settings require the chosen backend's URL
        return await (_grafana if grafana else _alertmanager)(silencer, shown_url(url))


async def _grafana(grafana: Silencer, where: str) -> list[Finding]:
    try:
        listed = await grafana.call("GET", "/silences")
    except BackendError as exc:
        return [_grafana_refused(exc, where, "read silences")]
    findings = [ok(SUBJECT, f"Grafana at {where}: reads silences ({_active(listed)} active)")]
    try:
        created = await grafana.call("POST", "/silences", {}, expect=(400, 200, 202))
    except BackendError as exc:
        return [*findings, _grafana_refused(exc, where, "create silences")]
    if created.status_code == 400:
        # Grafana's route admits create or write rights before it reads the body; which of the
        # two, and the rights on each rule's folder, it checks only on a real silence.
        said = "the token may create or edit silences (folder rights: per silence)"
        return [*findings, ok(SUBJECT, said)]
    # An empty silence taken: no Grafana does; take it back.
    silence_id = str(json_object(created, "Grafana").get("silenceID") or "")
    if silence_id:
        await grafana.expire(silence_id)
    said = f"Grafana took an empty silence ({silence_id or 'no ID'}), expired again"
    return [*findings, warn(SUBJECT, said)]


def _grafana_refused(exc: BackendError, where: str, what: str) -> Finding:
    said = {
        401: (f"Grafana at {where} refused GRAFANA_TOKEN: {exc}", GRAFANA_TOKEN),
        403: (f"the token may not {what}: {exc}", GRAFANA_ROLE),
        404: (f"no Grafana alerting API at {where}: {exc}", GRAFANA_URL + GRAFANA_ON),
    }
    return fail(SUBJECT, *said.get(exc.status, (str(exc), f"{GRAFANA_URL}, reachable from here")))


async def _alertmanager(alertmanager: Silencer, where: str) -> list[Finding]:
    try:
        status = json_object(await alertmanager.call("GET", "/status"), "Alertmanager")
        listed = await alertmanager.call("GET", "/silences")
    except BackendError as exc:
        fix = "set ALERTMANAGER_URL to Alertmanager's base URL (http://alertmanager:9093)"
        if exc.status == 404:
            fix += ", without /api/v2"
        return [fail(SUBJECT, f"Alertmanager at {where}: {exc}", fix)]
    version = _get(status, "versionInfo", "version") or "?"
    cluster = _get(status, "cluster", "status") or "?"
    said = f"Alertmanager {version} at {where}: cluster {cluster}, reads silences "
    return [ok(SUBJECT, f"{said}({_active(listed)} active)")]


def _active(response: httpx.Response) -> int:
    try:
        silences = response.json()
    except ValueError:
        return 0
    states = [_get(s, "status", "state") for s in silences] if isinstance(silences, list) else []
    return sum(state in ("active", "pending") for state in states)


def _get(data: object, *path: str) -> str:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return str(data) if isinstance(data, str | int) else ""
