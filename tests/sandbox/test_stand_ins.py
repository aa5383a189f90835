"""The stand-ins answer as the real systems do, each beside its source: what `queuepilot check`
relies on (Slack's scopes header and `missing_scope`, the API server's SelfSubjectAccessReview,
Grafana's 403 before its 400), and their refusals in the real shapes (the API server's `Status`,
Grafana's silence API, the PyTorch HUD's Next.js route)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.kube_api import REVIEWS
from sandbox.serve import serve_in_thread
from sandbox.silence_api import PREFIX, READ, FakeSilenceApi
from sandbox.slack_methods import ALL_SCOPES
from tests.support.fakes.hud_api import FakeHud
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi
from tests.support.slack import BOT_TOKEN, CHANNEL, Slack, refusal


async def test_slack_tells_every_call_the_tokens_scopes(slack: Slack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)

    identity = await client.auth_test()
    info = await client.conversations_info(channel=CHANNEL)

    assert set(identity.headers["x-oauth-scopes"].split(",")) == ALL_SCOPES
    assert "x-accepted-oauth-scopes" not in identity.headers, "auth.test takes no scope"
    assert info.headers["x-accepted-oauth-scopes"] == "channels:read"
    assert info["channel"]["is_member"] is True


async def test_a_method_whose_scope_was_not_granted_is_refused_naming_it(slack: Slack) -> None:
    slack.emulator.scopes = frozenset({"chat:write", "commands"})
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)

    refused = await refusal(client.users_info(user="U0ALICE"))
    identity = await client.auth_test()

    assert refused == {
        "ok": False,
        "error": "missing_scope",
        "needed": "users:read",
        "provided": "chat:write,commands",
    }
    assert identity.headers["x-oauth-scopes"] == "chat:write,commands"
    slack.emulator.reset()
    assert slack.emulator.scopes == ALL_SCOPES, "a reset grants them all again"


def review(verb: str, **attributes: str) -> dict[str, object]:
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, **attributes}},
    }


ARC = {"group": "actions.github.com", "resource": "autoscalingrunnersets", "namespace": "a"}


def test_the_api_server_answers_what_the_token_may_do(kube: FakeKubeApi) -> None:
    kube.denied_verbs = {"patch"}
    url = kube.url + REVIEWS  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {kube.token}"}

    get = httpx.post(url, json=review("get", **ARC), headers=headers)
    patch = httpx.post(url, json=review("patch", **ARC), headers=headers)
    pods = httpx.post(url, json=review("get", resource="pods", namespace="a"), headers=headers)
    neither = httpx.post(url, json={**review("get"), "spec": {}}, headers=headers)
    stranger = httpx.post(url, json=review("get", **ARC))

    assert get.status_code == 201
    assert get.json()["status"]["allowed"] is True
    assert get.json()["status"]["reason"].startswith("RBAC: allowed by RoleBinding")
    assert get.json()["spec"] == review("get", **ARC)["spec"], "the review is echoed"
    assert patch.json()["status"] == {"allowed": False}
    assert pods.json()["status"] == {"allowed": False}
    assert neither.status_code == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes" in neither.json()["message"]
    assert stranger.status_code == 401


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


def test_grafana_checks_permissions_before_it_reads_the_silence(
    grafana: tuple[FakeSilenceApi, httpx.Client],
) -> None:
    api, http = grafana

    allowed = http.post("/silences", json={})
    not_json = http.post("/silences", content=b"{", headers={"Content-Type": "application/json"})
    api.permissions = frozenset(READ)
    refused = http.post("/silences", json={})
    listed = http.get("/silences")

    assert allowed.status_code == 400
    assert allowed.json()["message"].startswith("silence failed validation")
    assert not_json.status_code == 400 and not_json.json()["message"] == "bad request data"
    assert refused.status_code == 403
    assert refused.json()["title"] == "Access denied"
    assert refused.json()["message"] == (
        "You'll need additional permissions to perform this action. Permissions needed: all of "
        "any of alert.instances:read, alert.silences:read, any of alert.instances:create, "
        "alert.instances:write, alert.silences:create, alert.silences:write"
    )
    assert listed.status_code == 200 and listed.json() == []
    assert api.silences == {}


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
