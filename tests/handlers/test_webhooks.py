"""What a sender (Grafana, Alertmanager, or an attacker) sees when it POSTs to the alert endpoints.

Every case runs against a real bot over HTTP. Each rejection is checked three ways: the status
code, the JSON message the sender's operator would read, and that nothing reached the stream or
Slack. No response in this file may ever be a 500: the client's response hook asserts it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.config import Settings
from tests.support.payloads import FIXTURES, fixture_json
from tests.support.running import WEBHOOK_TOKEN, RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, Slack

FIRING = "grafana/queue-alert-firing.json"
AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"
HMAC_SECRET = "grafana-hmac-secret"
JSON = "application/json"

GRAFANA_FIXTURES = sorted(p.name for p in (FIXTURES / "grafana").glob("*.json"))
ALERTMANAGER_FIXTURES = sorted(p.name for p in (FIXTURES / "alertmanager").glob("*.json"))


async def _never_500(response: httpx.Response) -> None:
    """Response hook: bad input is never a 500 (a 4xx with a message), and nothing here is
    otherwise."""
    request = response.request
    assert response.status_code < 500, (
        f"{request.method} {request.url.path} answered {response.status_code}"
    )


@dataclass
class Endpoint:
    """A running bot and an HTTP client whose every response is checked for 5xx."""

    running: RunningBot
    http: httpx.AsyncClient

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None = JSON,
        token: str | None = WEBHOOK_TOKEN,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        if content_type is not None:
            sent["Content-Type"] = content_type
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return await self.http.post(path, content=body, headers=sent)


@asynccontextmanager
async def endpoint_for(settings: Settings) -> AsyncIterator[Endpoint]:
    async with (
        run_bot(settings) as running,
        httpx.AsyncClient(
            base_url=running.url, timeout=10, event_hooks={"response": [_never_500]}
        ) as http,
    ):
        yield Endpoint(running, http)


@pytest.fixture
async def endpoint(settings_for: Callable[..., Settings]) -> AsyncIterator[Endpoint]:
    """A bot with the default test settings: bearer token required, 1 MiB limit."""
    async with endpoint_for(settings_for()) as ep:
        yield ep


def body_of(name: str, **changes: Any) -> bytes:
    payload = fixture_json(name)
    payload.update(changes)
    return json.dumps(payload).encode()


def padded(body: bytes, size: int) -> bytes:
    """The same JSON document, grown to exactly `size` bytes with trailing whitespace."""
    assert len(body) <= size
    return body + b" " * (size - len(body))


def error_of(response: httpx.Response) -> str:
    data = response.json()
    assert data["status"] == "rejected", data
    return str(data["error"])


def assert_accepted(response: httpx.Response) -> None:
    assert response.status_code == 202, response.text
    data = response.json()
    assert data["status"] == "accepted"
    assert data["id"], "the 202 names the stream entry it was stored as"


async def assert_nothing_enqueued(ep: Endpoint, slack: Slack) -> None:
    """A rejected request left no trace: nothing ever appended to the stream, nothing in Slack.

    The backlog alone could hide an append the consumer already processed, so the stream's
    last-generated id is checked as well: it stays 0-0 until the first XADD.
    """
    bot = ep.running.bot
    assert await bot.stream.backlog() == 0
    if await bot.redis.exists(bot.stream.key):
        info = await bot.redis.xinfo_stream(bot.stream.key)
        assert info["last-generated-id"] == "0-0", "a rejected notification reached the stream"
    assert slack.emulator.calls("chat.postMessage") == []
    assert slack.emulator.channel_messages(CHANNEL) == []


def hmac_hex(message: bytes, secret: str = HMAC_SECRET) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# --- real payloads are accepted ----------------------------------------------------------------


@pytest.mark.parametrize("name", GRAFANA_FIXTURES)
async def test_every_grafana_fixture_is_accepted(endpoint: Endpoint, name: str) -> None:
    assert_accepted(await endpoint.post("/alerts/grafana", body_of(f"grafana/{name}")))


@pytest.mark.parametrize("name", ALERTMANAGER_FIXTURES)
async def test_every_alertmanager_fixture_is_accepted(endpoint: Endpoint, name: str) -> None:
    assert_accepted(await endpoint.post("/alerts/alertmanager", body_of(f"alertmanager/{name}")))


async def test_accepted_notification_reaches_slack(endpoint: Endpoint, slack: Slack) -> None:
    """The control case for every `assert_nothing_enqueued`: a 202 does show up in Slack."""
    assert_accepted(await endpoint.post("/alerts/grafana", body_of(FIRING)))
    await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root message")


# --- bearer token ------------------------------------------------------------------------------


async def test_missing_bearer_token_is_401(endpoint: Endpoint, slack: Slack) -> None:
    response = await endpoint.post("/alerts/grafana", body_of(FIRING), token=None)
    assert response.status_code == 401
    assert "missing credentials" in error_of(response)
    assert "Authorization" in error_of(response)
    await assert_nothing_enqueued(endpoint, slack)


async def test_wrong_bearer_token_is_401(endpoint: Endpoint, slack: Slack) -> None:
    for path, name in (("/alerts/grafana", FIRING), ("/alerts/alertmanager", AM_FIRING)):
        response = await endpoint.post(path, body_of(name), token="not-the-token")
        assert response.status_code == 401, path
        assert "wrong credentials" in error_of(response)
    await assert_nothing_enqueued(endpoint, slack)


async def test_bearer_token_prefix_or_basic_scheme_is_401(endpoint: Endpoint, slack: Slack) -> None:
    """Near misses: the token's prefix, the token as the Basic scheme's credentials."""
    for authorization in (f"Bearer {WEBHOOK_TOKEN[:-1]}", f"Basic {WEBHOOK_TOKEN}", "Bearer"):
        response = await endpoint.post(
            "/alerts/grafana", body_of(FIRING), token=None, headers={"Authorization": authorization}
        )
        assert response.status_code == 401, authorization
    await assert_nothing_enqueued(endpoint, slack)


async def test_right_bearer_token_is_202(endpoint: Endpoint) -> None:
    assert_accepted(await endpoint.post("/alerts/grafana", body_of(FIRING)))


async def test_bearer_scheme_is_case_insensitive(endpoint: Endpoint) -> None:
    for scheme in ("bearer", "BEARER"):
        response = await endpoint.post(
            "/alerts/grafana",
            body_of(FIRING),
            token=None,
            headers={"Authorization": f"{scheme} {WEBHOOK_TOKEN}"},
        )
        assert_accepted(response)


# --- basic auth --------------------------------------------------------------------------------


@pytest.fixture
async def basic_endpoint(settings_for: Callable[..., Settings]) -> AsyncIterator[Endpoint]:
    settings = settings_for(
        alert_webhook_token=None,
        alert_webhook_basic_user="grafana",
        alert_webhook_basic_password="s3cret:with colon",
    )
    async with endpoint_for(settings) as ep:
        yield ep


async def test_basic_auth_right_credentials_are_202(basic_endpoint: Endpoint) -> None:
    authorization = {"Authorization": basic("grafana", "s3cret:with colon")}
    for path, name in (("/alerts/grafana", FIRING), ("/alerts/alertmanager", AM_FIRING)):
        response = await basic_endpoint.post(path, body_of(name), token=None, headers=authorization)
        assert_accepted(response)


async def test_basic_auth_wrong_or_missing_credentials_are_401(
    basic_endpoint: Endpoint, slack: Slack
) -> None:
    for authorization in (
        basic("grafana", "wrong"),
        basic("someone", "s3cret:with colon"),
        "Basic !!!not-base64!!!",
        f"Bearer {WEBHOOK_TOKEN}",
        None,
    ):
        headers = {"Authorization": authorization} if authorization else {}
        response = await basic_endpoint.post(
            "/alerts/grafana", body_of(FIRING), token=None, headers=headers
        )
        assert response.status_code == 401, authorization
        assert "credentials" in error_of(response)
    await assert_nothing_enqueued(basic_endpoint, slack)


# --- Grafana HMAC signature --------------------------------------------------------------------


@pytest.fixture
async def hmac_endpoint(settings_for: Callable[..., Settings]) -> AsyncIterator[Endpoint]:
    settings = settings_for(alert_webhook_token=None, alert_webhook_hmac_secret=HMAC_SECRET)
    async with endpoint_for(settings) as ep:
        yield ep


def timestamped(body: bytes, *, secret: str = HMAC_SECRET) -> dict[str, str]:
    seconds = str(int(time.time()))
    return {
        "X-Grafana-Alerting-Signature": hmac_hex(seconds.encode() + b":" + body, secret=secret),
        "X-Grafana-Alerting-Timestamp": seconds,
    }


async def test_hmac_body_only_signature_is_401_by_default(
    hmac_endpoint: Endpoint, slack: Slack
) -> None:
    """A signature of the body alone can be replayed forever: refused unless allowed."""
    body = body_of(FIRING)
    headers = {"X-Grafana-Alerting-Signature": hmac_hex(body)}
    response = await hmac_endpoint.post("/alerts/grafana", body, token=None, headers=headers)
    assert response.status_code == 401
    assert "missing X-Grafana-Alerting-Timestamp" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_hmac_body_only_signature_is_202_when_allowed(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(
        alert_webhook_token=None,
        alert_webhook_hmac_secret=HMAC_SECRET,
        alert_webhook_hmac_allow_no_timestamp=True,
    )
    async with endpoint_for(settings) as ep:
        body = body_of(FIRING)
        headers = {"X-Grafana-Alerting-Signature": hmac_hex(body)}
        assert_accepted(await ep.post("/alerts/grafana", body, token=None, headers=headers))


async def test_hmac_timestamped_signature_is_202(hmac_endpoint: Endpoint) -> None:
    body = body_of(FIRING)
    seconds = str(int(time.time()))
    headers = {
        "X-Grafana-Alerting-Signature": hmac_hex(seconds.encode() + b":" + body),
        "X-Grafana-Alerting-Timestamp": seconds,
    }
    assert_accepted(await hmac_endpoint.post("/alerts/grafana", body, token=None, headers=headers))


async def test_hmac_timestamp_six_minutes_old_is_401(hmac_endpoint: Endpoint, slack: Slack) -> None:
    body = body_of(FIRING)
    seconds = str(int(time.time()) - 6 * 60)
    headers = {
        "X-Grafana-Alerting-Signature": hmac_hex(seconds.encode() + b":" + body),
        "X-Grafana-Alerting-Timestamp": seconds,
    }
    response = await hmac_endpoint.post("/alerts/grafana", body, token=None, headers=headers)
    assert response.status_code == 401
    assert "timestamp outside the 5-minute window" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_hmac_tampered_body_is_401(hmac_endpoint: Endpoint, slack: Slack) -> None:
    signed_body = body_of(FIRING)
    tampered = body_of(FIRING, groupKey="attacker-chosen-group")
    headers = timestamped(signed_body)
    response = await hmac_endpoint.post("/alerts/grafana", tampered, token=None, headers=headers)
    assert response.status_code == 401
    assert "signature mismatch" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_hmac_signed_with_another_secret_is_401(
    hmac_endpoint: Endpoint, slack: Slack
) -> None:
    body = body_of(FIRING)
    headers = timestamped(body, secret="guessed")
    response = await hmac_endpoint.post("/alerts/grafana", body, token=None, headers=headers)
    assert response.status_code == 401
    assert "signature mismatch" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_hmac_missing_signature_is_401(hmac_endpoint: Endpoint, slack: Slack) -> None:
    response = await hmac_endpoint.post("/alerts/grafana", body_of(FIRING), token=None)
    assert response.status_code == 401
    assert "missing X-Grafana-Alerting-Signature" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_alertmanager_endpoint_is_closed_when_only_hmac_is_configured(
    hmac_endpoint: Endpoint, slack: Slack
) -> None:
    """Alertmanager cannot sign like Grafana: with only the HMAC secret, its endpoint has no
    credential to check, so it refuses everything rather than accept anyone."""
    response = await hmac_endpoint.post("/alerts/alertmanager", body_of(AM_FIRING), token=None)
    assert response.status_code == 401
    assert "no credential is configured for /alerts/alertmanager" in error_of(response)
    await assert_nothing_enqueued(hmac_endpoint, slack)


async def test_hmac_and_token_are_both_required_on_grafana_when_both_are_set(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(alert_webhook_hmac_secret=HMAC_SECRET)
    async with endpoint_for(settings) as ep:
        body = body_of(FIRING)
        only_token = await ep.post("/alerts/grafana", body)
        assert only_token.status_code == 401
        assert_accepted(await ep.post("/alerts/grafana", body, headers=timestamped(body)))
        assert_accepted(await ep.post("/alerts/alertmanager", body_of(AM_FIRING)))


# --- no auth configured ------------------------------------------------------------------------


async def test_no_credential_refuses_everything_by_default(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """`serve` refuses to start like this (tests/test_config.py); an app built anyway is
    closed, not open."""
    async with endpoint_for(settings_for(alert_webhook_token=None)) as ep:
        for path, name in (("/alerts/grafana", FIRING), ("/alerts/alertmanager", AM_FIRING)):
            response = await ep.post(path, body_of(name), token=None)
            assert response.status_code == 401
            assert "no credential is configured" in error_of(response)
        await assert_nothing_enqueued(ep, slack)


async def test_allow_unauthenticated_accepts_without_credentials(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(alert_webhook_token=None, alert_webhook_allow_unauthenticated=True)
    async with endpoint_for(settings) as ep:
        assert_accepted(await ep.post("/alerts/grafana", body_of(FIRING), token=None))
        assert_accepted(await ep.post("/alerts/alertmanager", body_of(AM_FIRING), token=None))


# --- size limit --------------------------------------------------------------------------------

LIMIT = 2048


@pytest.fixture
async def small_endpoint(settings_for: Callable[..., Settings]) -> AsyncIterator[Endpoint]:
    async with endpoint_for(settings_for(alert_max_body_bytes=LIMIT)) as ep:
        yield ep


async def test_body_exactly_at_the_limit_is_accepted(small_endpoint: Endpoint) -> None:
    body = padded(body_of("grafana/scale-up-failure-firing.json"), LIMIT)
    assert_accepted(await small_endpoint.post("/alerts/grafana", body))


async def test_body_over_the_limit_with_content_length_is_413(
    small_endpoint: Endpoint, slack: Slack
) -> None:
    body = padded(body_of("grafana/scale-up-failure-firing.json"), LIMIT + 1)
    response = await small_endpoint.post("/alerts/grafana", body)
    assert response.request.headers["Content-Length"] == str(LIMIT + 1)
    assert response.status_code == 413
    assert f"{LIMIT}-byte limit" in error_of(response)
    await assert_nothing_enqueued(small_endpoint, slack)


async def test_chunked_body_over_the_limit_is_413(small_endpoint: Endpoint, slack: Slack) -> None:
    """No Content-Length to refuse up front: the limit must hold while reading the stream."""
    document = body_of("grafana/scale-up-failure-firing.json")

    async def chunks() -> AsyncIterator[bytes]:
        yield document
        for _ in range(8):
            yield b" " * 512

    response = await small_endpoint.http.post(
        "/alerts/grafana",
        content=chunks(),
        headers={"Content-Type": JSON, "Authorization": f"Bearer {WEBHOOK_TOKEN}"},
    )
    assert "Content-Length" not in response.request.headers
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert response.status_code == 413
    assert f"{LIMIT}-byte limit" in error_of(response)
    await assert_nothing_enqueued(small_endpoint, slack)


# --- content type ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "shown"), [("text/plain", "text/plain"), (None, "none")], ids=["text", "none"]
)
async def test_non_json_content_type_is_415(
    endpoint: Endpoint, slack: Slack, content_type: str | None, shown: str
) -> None:
    response = await endpoint.post("/alerts/grafana", body_of(FIRING), content_type=content_type)
    if content_type is None:
        assert "Content-Type" not in response.request.headers, "httpx added a Content-Type"
    assert response.status_code == 415
    assert error_of(response) == f"expected Content-Type application/json, got {shown}"
    await assert_nothing_enqueued(endpoint, slack)


async def test_json_content_type_with_charset_is_accepted(endpoint: Endpoint) -> None:
    response = await endpoint.post(
        "/alerts/grafana", body_of(FIRING), content_type="application/json; charset=utf-8"
    )
    assert_accepted(response)


# --- invalid payloads --------------------------------------------------------------------------

_NESTED = b"[" * 100_000


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/alerts/grafana", b'{"version": "1", "groupKey": ', "body is not valid JSON"),
        ("/alerts/grafana", b'{"version": "1", "title": "caf\xe9"}', "not UTF-8"),
        ("/alerts/grafana", b"[]", "body: must be a JSON object, got a list"),
        ("/alerts/grafana", body_of(AM_FIRING), "send it to /alerts/alertmanager"),
        ("/alerts/alertmanager", body_of(FIRING), "send it to /alerts/grafana"),
        ("/alerts/grafana", body_of(FIRING, groupKey=None), "groupKey: must be a non-empty string"),
        ("/alerts/grafana", _NESTED, "JSON nested deeper than 32 levels"),
        ("/alerts/grafana", body_of(FIRING, alerts=[]), "alerts: must not be empty"),
        ("/alerts/grafana", b'{"version": "1", "x": NaN}', "body is not valid JSON"),
    ],
    ids=[
        "invalid-json",
        "not-utf8",
        "array",
        "alertmanager-to-grafana",
        "grafana-to-alertmanager",
        "no-group-key",
        "deeply-nested",
        "empty-alerts",
        "nan",
    ],
)
async def test_invalid_payload_is_400_naming_the_problem(
    endpoint: Endpoint, slack: Slack, path: str, body: bytes, message: str
) -> None:
    response = await endpoint.post(path, body)
    assert response.status_code == 400, response.text
    assert message in error_of(response)
    await assert_nothing_enqueued(endpoint, slack)


async def test_missing_group_key_field_is_400(endpoint: Endpoint, slack: Slack) -> None:
    payload = fixture_json(FIRING)
    del payload["groupKey"]
    response = await endpoint.post("/alerts/grafana", json.dumps(payload).encode())
    assert response.status_code == 400
    assert "groupKey" in error_of(response)
    await assert_nothing_enqueued(endpoint, slack)


# --- routing -----------------------------------------------------------------------------------


async def test_wrong_method_is_405(endpoint: Endpoint) -> None:
    for method in ("GET", "PUT", "DELETE"):
        for path in ("/alerts/grafana", "/alerts/alertmanager"):
            response = await endpoint.http.request(method, path)
            assert response.status_code == 405, f"{method} {path}"
            assert "POST" in response.headers.get("Allow", ""), f"{method} {path}"


async def test_unknown_path_is_404(endpoint: Endpoint) -> None:
    response = await endpoint.post("/alerts/nagios", body_of(FIRING))
    assert response.status_code == 404
    response = await endpoint.http.get("/alerts")
    assert response.status_code == 404


# --- health and metrics ------------------------------------------------------------------------


async def test_healthz_and_readyz_with_redis_up(endpoint: Endpoint) -> None:
    health = await endpoint.http.get("/healthz")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    ready = await endpoint.http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


def notification_counts(text: str) -> dict[tuple[str, str], float]:
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "queuepilot_notifications":
            continue
        for sample in family.samples:
            if sample.name == "queuepilot_notifications_total":
                counts[sample.labels["source"], sample.labels["outcome"]] = sample.value
    return counts


async def test_metrics_count_accepted_and_rejected_notifications(endpoint: Endpoint) -> None:
    assert_accepted(await endpoint.post("/alerts/grafana", body_of(FIRING)))
    assert_accepted(await endpoint.post("/alerts/alertmanager", body_of(AM_FIRING)))
    assert (await endpoint.post("/alerts/grafana", body_of(FIRING), token="x")).status_code == 401
    assert (await endpoint.post("/alerts/grafana", b"[]")).status_code == 400
    too_plain = await endpoint.post("/alerts/grafana", body_of(FIRING), content_type="text/plain")
    assert too_plain.status_code == 415

    response = await endpoint.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    assert "queuepilot_notifications_total" in response.text
    counts = notification_counts(response.text)
    assert counts[("grafana", "accepted")] == 1
    assert counts[("alertmanager", "accepted")] == 1
    assert counts[("grafana", "unauthorized")] == 1
    assert counts[("grafana", "invalid")] == 1
    assert counts[("grafana", "content_type")] == 1
