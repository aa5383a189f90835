"""The `arc` scaler reaching a cluster both ways a deployment does, over HTTPS to the Kubernetes
API's stand-in with a certificate authority made for the test: in the cluster (the pod's service
account: its token, rotated by the kubelet, and the cluster's ca.crt), and through a kubeconfig
whose user signs in with an exec plugin (a cloud's `get-token`). The stand-in refuses any token
but the current one with a 401, as the API server does, and keeps the tokens it refused."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.backends.http import BackendError
from bot.backends.kube import SERVICE, kube_access
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.checks import Verdict
from bot.checks.run import render
from bot.checks.scaler import probe_arc
from bot.config import Settings, SettingsError
from bot.domain.scale.scaling import ScaleTarget
from sandbox.serve import serve_in_thread
from tests.support.fakes import kube_token
from tests.support.fakes.kube_api import RECORDED, FakeKubeApi
from tests.support.tls import Certificates, certificates

TARGET = ScaleTarget("linux", f"arc-runners/{RECORDED}", cap=10)
SETTINGS = Settings(backend_timeout_seconds=10)
SA_TOKEN, ROTATED = "sa-token-before", "sa-token-after"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeApi, Certificates, str]]:
    """The stand-in served over HTTPS: it, the certificates, and its URL."""
    made = certificates(tmp_path)
    api = FakeKubeApi(token=SA_TOKEN)
    api.add_from_fixture(minRunners=0, maxRunners=200)
    server = serve_in_thread(api.app, tls=(str(made.cert), str(made.key)))
    yield api, made, server.url
    server.stop()


def service_account(tmp_path: Path, ca: Path, token: str) -> Path:
    """What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(token)
    (account / "ca.crt").write_bytes(ca.read_bytes())
    (account / "namespace").write_text("queuepilot")
    return account


def in_cluster_env(url: str) -> dict[str, str]:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}


def min_runners(api: FakeKubeApi) -> Any:
    return api.sets[("arc-runners", RECORDED)]["spec"]["minRunners"]


async def test_in_the_cluster_the_rotated_token_is_read_again_and_used(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    """The kubelet writes a new token into the file; once the API server takes only the new one,
    the next call is refused once with the old one and made again with the new one (lightkube
    reads the file again after a 401), and every call after it carries the new one alone."""
    api, made, url = cluster
    account = service_account(tmp_path, made.ca, SA_TOKEN)
    access = kube_access(None, in_cluster_env(url), account=account)
    arc = ArcScaler(SETTINGS, access)
    assert access.server == url

    capacity = await arc.capacity(TARGET)
    assert (capacity.minimum, capacity.maximum) == (0, 200)

    (account / "token").write_text(ROTATED)
    api.token = ROTATED  # the old token is no longer accepted
    result = await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    await arc.capacity(TARGET)

    assert result.detail == "minRunners 0 → 2 (maxRunners 200)"
    assert min_runners(api) == 2
    assert api.refused_tokens == [SA_TOKEN]


async def test_in_the_cluster_an_api_server_the_ca_did_not_sign_is_not_talked_to(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    api, _, url = cluster
    (tmp_path / "other").mkdir()
    other = certificates(tmp_path / "other")  # another cluster's authority
    account = service_account(tmp_path, other.ca, SA_TOKEN)
    arc = ArcScaler(SETTINGS, kube_access(None, in_cluster_env(url), account=account))

    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))

    assert caught.value.retryable
    assert min_runners(api) == 0 and api.patches == [] and api.refused_tokens == []


async def test_every_call_is_counted_with_its_outcome(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    """What /metrics shows (queuepilot_backend_calls_total): a read and a write answered, then
    a read RBAC refuses."""
    api, made, url = cluster
    account = service_account(tmp_path, made.ca, SA_TOKEN)
    calls: list[tuple[str, str]] = []
    access = kube_access(None, in_cluster_env(url), account=account)
    arc = ArcScaler(SETTINGS, access, counted=lambda *call: calls.append(call))

    await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    api.denied_verbs = {"get"}
    with pytest.raises(BackendError, match="403 Forbidden"):
        await arc.capacity(TARGET)

    assert calls == [(SERVICE, "ok"), (SERVICE, "ok"), (SERVICE, "refused")]


def test_in_the_cluster_without_a_token_says_what_to_mount(tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(SettingsError) as caught:
        kube_access(None, env, account=account)
    assert str(caught.value) == (
        f"SCALER_BACKEND=arc: no Kubernetes access: the service account's {account / 'token'} is "
        "unreadable: No such file or directory: mount the service account's token "
        "(automountServiceAccountToken), or set SCALER_KUBECONFIG to a kubeconfig file"
    )


# -- a kubeconfig whose user signs in with an exec plugin -----------------------------------------


def exec_kubeconfig(
    tmp_path: Path,
    url: str,
    ca: Path,
    *,
    ttl: float = 3600,
    fail: str = "",
    cluster_info: bool = False,
) -> Path:
    """A kubeconfig as `aws eks update-kubeconfig` or `gcloud` writes one: the cluster's CA as
    data, and a user whose token comes from a plugin beside the file (run relative to it), which
    writes what it was given to `seen` beside it."""
    kube_token.install(tmp_path)
    args = ["--runs", str(tmp_path / "runs"), "--ttl", str(ttl), "--seen", str(tmp_path / "seen")]
    args += ["--fail", fail] if fail else []
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ci",
        "clusters": [
            {
                "name": "ci",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                },
            }
        ],
        "contexts": [{"name": "ci", "context": {"cluster": "ci", "user": "ci-bot"}}],
        "users": [
            {
                "name": "ci-bot",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": f"./{kube_token.NAME}",
                        "args": args,
                        "env": [{"name": "TOKEN_PREFIX", "value": "exec-token"}],
                        "interactiveMode": "Never",
                        "provideClusterInfo": cluster_info,
                    }
                },
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def exec_scaler(path: Path, environ: dict[str, str] | None = None) -> ArcScaler:
    return ArcScaler(SETTINGS, kube_access(str(path), environ or {}))


async def test_the_plugin_gets_the_cluster_it_asks_for_and_none_of_the_bots_secrets(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    """GKE's plugin reads the cluster from KUBERNETES_EXEC_INFO (provideClusterInfo); no plugin
    needs the Slack token or Redis's password the bot's environment holds."""
    api, made, url = cluster
    api.token = "exec-token-1"
    environ = {"HOME": "/home/bot", "SLACK_BOT_TOKEN": "xoxb-1", "REDIS_URL": "redis://:pw@r"}
    environ["GITHUB_TOKEN_FILE"] = "/run/secrets/queuepilot/GITHUB_TOKEN"
    arc = exec_scaler(exec_kubeconfig(tmp_path, url, made.ca, cluster_info=True), environ)

    await arc.scale(ScaleRequest(TARGET, 3, "1", "al"))

    seen = json.loads((tmp_path / "seen").read_text())
    assert seen["info"]["spec"]["cluster"] == {
        "server": url,
        "certificate-authority-data": base64.b64encode(made.ca.read_bytes()).decode(),
    }
    assert {"HOME", "TOKEN_PREFIX"} <= set(seen["environment"])
    assert not {"SLACK_BOT_TOKEN", "REDIS_URL", "GITHUB_TOKEN_FILE"} & set(seen["environment"])
    assert min_runners(api) == 3


async def test_a_scale_up_through_an_exec_plugin_uses_its_token_until_it_expires(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    api, made, url = cluster
    api.token = "exec-token-1"  # the plugin's first token, with its args and env
    arc = exec_scaler(exec_kubeconfig(tmp_path, url, made.ca))

    result = await arc.scale(ScaleRequest(TARGET, 3, "1", "al"))
    await arc.capacity(TARGET)

    assert result.detail == "minRunners 0 → 3 (maxRunners 200)"
    assert min_runners(api) == 3
    assert kube_token.runs(tmp_path / "runs") == 1, "one token for every call while it lasts"
    assert api.refused_tokens == []


async def test_an_expired_exec_credential_runs_the_plugin_again_before_the_call(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    api, made, url = cluster
    arc = exec_scaler(exec_kubeconfig(tmp_path, url, made.ca, ttl=0))  # expires as it is given
    for run in (1, 2, 3):
        api.token = f"exec-token-{run}"  # the cloud takes only the newest credential
        await arc.capacity(TARGET)
    assert kube_token.runs(tmp_path / "runs") == 3
    assert api.refused_tokens == [], "an expired token is never sent"


async def test_a_token_the_api_server_refuses_runs_the_plugin_again_and_the_call_goes_through(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    api, made, url = cluster
    api.token = "exec-token-1"
    arc = exec_scaler(exec_kubeconfig(tmp_path, url, made.ca))
    await arc.capacity(TARGET)

    api.token = "exec-token-2"  # revoked before its expiry
    result = await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))

    assert result.detail == "minRunners 0 → 2 (maxRunners 200)"
    assert api.refused_tokens == ["exec-token-1"]
    assert kube_token.runs(tmp_path / "runs") == 2


async def test_a_failing_exec_plugin_fails_the_scale_up_and_the_check_names_it(
    cluster: tuple[FakeKubeApi, Certificates, str], tmp_path: Path
) -> None:
    api, made, url = cluster
    lapsed = "error: the SSO session has expired; run `aws sso login` again"
    path = exec_kubeconfig(tmp_path, url, made.ca, fail=lapsed)

    calls: list[tuple[str, str]] = []
    arc = ArcScaler(SETTINGS, kube_access(str(path), {}), counted=lambda *call: calls.append(call))
    with pytest.raises(BackendError) as caught:
        await arc.scale(ScaleRequest(TARGET, 2, "1", "al"))
    said = f"the kubeconfig's exec plugin kube-token failed (exit 1): {lapsed}"
    assert str(caught.value) == said
    assert not caught.value.retryable
    assert min_runners(api) == 0 and api.refused_tokens == [], "the API server was not called"
    assert calls == [(SERVICE, "error")]

    settings = Settings(
        scaler_backend="arc",
        scaler_kubeconfig=str(path),
        scaler_targets=f'{{"linux": "arc-runners/{RECORDED}"}}',
    )
    [found] = await probe_arc(settings, {})
    assert found.verdict is Verdict.FAIL
    assert render([found]) == (
        f"FAIL  kubernetes arc-runners/{RECORDED} (linux): {said} — fix: run the kubeconfig's "
        "exec plugin by hand where queuepilot runs, with its args and env, to see why it gives no "
        "token"
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            {"command": "./no-such-plugin", "installHint": "brew install no-such-plugin"},
            "its user's exec plugin ./no-such-plugin is not found: brew install no-such-plugin",
        ),
        (
            {"interactiveMode": None},
            "its user's exec plugin gives no interactiveMode: set interactiveMode: Never "
            "(queuepilot runs the plugin with no terminal to prompt on)",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1alpha1"},
            "its user's exec plugin asks for apiVersion client.authentication.k8s.io/v1alpha1: "
            "queuepilot speaks client.authentication.k8s.io/v1 and "
            "client.authentication.k8s.io/v1beta1 (ask the plugin's maintainers for one of them)",
        ),
    ],
)
def test_an_exec_plugin_that_cannot_run_is_a_settings_error_at_start(
    tmp_path: Path, change: dict[str, Any], says: str
) -> None:
    path = exec_kubeconfig(tmp_path, "https://127.0.0.1:6443", certificates(tmp_path).ca)
    config = yaml.safe_load(path.read_text())
    plugin = config["users"][0]["user"]["exec"]
    for key, value in change.items():
        if value is None:
            del plugin[key]
        else:
            plugin[key] = value
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SettingsError) as caught:
        kube_access(str(path), {})
    assert str(caught.value) == (
        f"SCALER_BACKEND=arc: no Kubernetes access through SCALER_KUBECONFIG: kubeconfig {path}: "
        f"{says}. Fix it, or point SCALER_KUBECONFIG at another"
    )
