"""The other stand-ins refuse in the real systems' shapes, each beside its source: the Kubernetes
API server's `Status`, Grafana's silence API, the PyTorch HUD's Next.js route."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sandbox.serve import serve_in_thread
from sandbox.silence_api import PREFIX, FakeSilenceApi
from tests.support.fakes.hud_api import FakeHud
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi

SETS = "/apis/actions.github.com/v1alpha1/namespaces/arc-runners/autoscalingrunnersets"


def test_the_api_server_refuses_with_a_status_naming_the_object(kube: FakeKubeApi) -> None:
    """Kubernetes' API conventions ("Response Status Kind") show a NotFound as the API server
    writes it: `metadata` empty, `details` naming the object; apimachinery's NewNotFound and
    NewConflict fill `details` with its name, group and resource."""
    kube.add_from_fixture()
    url = kube.url + SETS  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {kube.token}"}

    missing = httpx.get(f"{url}/gone", headers=headers)
    stale = httpx.patch(
        f"{url}/{RECORDED}",
        json={"metadata": {"resourceVersion": "1"}},
        headers={**headers, "Content-Type": "application/merge-patch+json"},
    )
    stranger = httpx.get(f"{url}/{RECORDED}")

    assert (missing.status_code, missing.json()) == (
        404,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'autoscalingrunnersets.actions.github.com "gone" not found',
            "reason": "NotFound",
            "details": {
                "name": "gone",
                "group": "actions.github.com",
                "kind": "autoscalingrunnersets",
            },
            "code": 404,
        },
    )
    assert stale.status_code == 409
    assert stale.json()["metadata"] == {} and stale.json()["details"] == {
        "name": RECORDED,
        "group": "actions.github.com",
        "kind": "autoscalingrunnersets",
    }
    assert stranger.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


@pytest.fixture
def grafana() -> Iterator[tuple[FakeSilenceApi, httpx.Client]]:
    api = FakeSilenceApi()
    with (
        serve_in_thread(api.app) as server,
        httpx.Client(
            base_url=server.url + PREFIX, headers={"Authorization": f"Bearer {api.token}"}
        ) as http,
    ):
        yield api, http


def test_grafana_says_a_silence_was_deleted_or_was_not_there(
    grafana: tuple[FakeSilenceApi, httpx.Client],
) -> None:
    """Grafana's RouteDeleteSilence (ngalert's api_alertmanager_silences.go) answers 200
    {"message": "silence deleted"}, and Alertmanager's "silence not found" as a 404 `message`
    (its ErrResp, through pkg/api/response's Error)."""
    _, http = grafana
    silence = {
        "matchers": [{"name": "alertname", "value": "Queue", "isRegex": False, "isEqual": True}],
        "startsAt": "2030-01-01T00:00:00Z",
        "endsAt": "2030-01-01T01:00:00Z",
        "createdBy": "queuepilot",
        "comment": "test",
    }
    silence_id = http.post("/silences", json=silence).json()["silenceID"]

    deleted = http.delete(f"/silence/{silence_id}")
    unknown = http.delete("/silence/no-such-silence")

    assert (deleted.status_code, deleted.json()) == (200, {"message": "silence deleted"})
    assert (unknown.status_code, unknown.json()) == (404, {"message": "silence not found"})


@pytest.mark.parametrize(
    ("query", "parameters"),
    [
        ("queued_jobs", None),
        ("queued_jobs", "{not json"),
        ("no_such_query", "{}"),
        ("queue_times_historical", '{"granularity": "hour"}'),
    ],
    ids=["no parameters", "parameters not JSON", "unknown query", "a parameter missing"],
)
def test_the_hud_fails_as_a_nextjs_route_that_threw(query: str, parameters: str | None) -> None:
    """torchci's pages/api/clickhouse/[queryName].ts catches nothing, so whatever throws (the
    JSON.parse, reading the query's files, ClickHouse) reaches Next.js's apiResolver, which
    answers `sendError(apiRes, 500, 'Internal Server Error')`: that text, no JSON."""
    hud = FakeHud(rows={"queued_jobs": []})
    params = {} if parameters is None else {"parameters": parameters}
    with serve_in_thread(hud.app) as server:
        answer = httpx.get(
            f"{server.url}/api/clickhouse/{query}",
            params=params,
            headers={"x-hud-internal-bot": hud.token},
        )
    assert (answer.status_code, answer.text) == (500, "Internal Server Error")
    assert "content-type" not in answer.headers
