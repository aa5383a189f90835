"""How the bot reaches the Kubernetes API (`kube_access`): SCALER_KUBECONFIG, else the pod's
service account, else kubectl's kubeconfig, with its current context. Calls go through lightkube's
client, which reads the kubeconfig's cluster and user and rereads the service account's rotated
token after a 401; a user's `exec` plugin is run by `bot.backends.kube_exec`. Every call is counted
and its failure classified once (`call`)."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from lightkube import AsyncClient, ConfigError
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User

from bot.backends.errors import BackendError
from bot.backends.http import Counted, error_of, outcome_of, unanswered
from bot.backends.kube_exec import CredentialError, ExecAuth, ExecPlugin, exec_plugin
from bot.config import SettingsError

SERVICE = "The Kubernetes API"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
NO_ACCESS = "SCALER_BACKEND=arc: no Kubernetes access"
T = TypeVar("T")


@dataclass(frozen=True)
class KubeAccess:
    """One cluster and who the bot is there, with the exec plugin that gives its token, if any."""

    config: SingleConfig
    plugin: ExecPlugin | None = None

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)

    def client(
        self, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
    ) -> AsyncClient:
        """A client whose calls give up after `timeout_s`."""
        config = self.config._replace(user=self.config.user or User())  # lightkube needs one
        if self.plugin is not None:
            verify = verify_cluster(config.cluster, config.user, config.abs_file)
            inner = transport or httpx.AsyncHTTPTransport(verify=verify)
            transport = ExecAuth(self.plugin, inner, timeout_s)
        # Parsed whole (not lazily), so that an answer of the wrong shape fails inside `call`.
        return AsyncClient(
            config, timeout=httpx.Timeout(timeout_s), lazy=False, transport=transport
        )


def kube_access(
    kubeconfig: str | None, environ: Mapping[str, str], *, account: Path = SERVICE_ACCOUNT
) -> KubeAccess:
    """The cluster's access, or a `SettingsError` naming where it looked and the fix."""
    if kubeconfig:
        return _from_file(Path(kubeconfig), "SCALER_KUBECONFIG", environ)
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host and port:
        try:
            return in_cluster(host, port, account)
        except BackendError as exc:
            raise SettingsError(
                f"{NO_ACCESS}: {exc}: mount the service account's token "
                "(automountServiceAccountToken), or set SCALER_KUBECONFIG to a kubeconfig file"
            ) from None
    named = environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    path = Path(named) if named else Path.home() / ".kube" / "config"
    if not named and not path.exists():
        raise SettingsError(
            f"{NO_ACCESS}: not in a cluster (no KUBERNETES_SERVICE_HOST) and no kubeconfig at "
            f"{path}: set SCALER_KUBECONFIG to a kubeconfig file, or run in the cluster with a "
            "service account"
        )
    return _from_file(path, "KUBECONFIG" if named else "kubectl's default", environ)


def _from_file(path: Path, named_by: str, environ: Mapping[str, str]) -> KubeAccess:
    try:
        return from_kubeconfig(path, environ)
    except BackendError as exc:
        other = "point SCALER_KUBECONFIG at another" if named_by == "SCALER_KUBECONFIG" else (
            "set SCALER_KUBECONFIG to another"
        )  # fmt: skip
        raise SettingsError(f"{NO_ACCESS} through {named_by}: {exc}. Fix it, or {other}") from None


def in_cluster(host: str, port: str, account: Path = SERVICE_ACCOUNT) -> KubeAccess:
    """The pod's service account: its token file and the cluster's CA."""
    for part in ("token", "ca.crt"):
        try:
            (account / part).read_bytes()
        except OSError as exc:
            message = f"the service account's {account / part} is unreadable: {exc.strerror}"
            raise BackendError(message, retryable=False) from None
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cluster = Cluster(server=server, certificate_auth=str(account / "ca.crt"))
    user = User(token_file=str(account / "token"))
    config = KubeConfig.from_one(cluster=cluster, user=user).get()
    _check_tls(config, f"the service account's {account / 'ca.crt'}")
    return KubeAccess(config)


def from_kubeconfig(path: Path, environ: Mapping[str, str]) -> KubeAccess:
    """The kubeconfig's current context, or a `BackendError` naming the file and what is wrong."""

    def wrong(said: str) -> BackendError:
        return BackendError(f"kubeconfig {path}{said}", retryable=False)

    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise wrong(f" is unreadable: {exc}") from None
    except yaml.YAMLError as exc:
        raise wrong(f" is not YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise wrong(" is not a kubeconfig")
    if not loaded.get("current-context"):
        raise wrong(" sets no current-context (kubectl config use-context <name>)")
    raw, plugins = _without_exec(loaded)
    try:
        config = KubeConfig.from_dict(raw, fname=path).get()
    except ConfigError as exc:  # the current context is not among its contexts
        raise wrong(f": {exc}") from None
    except KeyError as exc:
        missing = f"has no {exc.args[0]}" if exc.args[0] in ("clusters", "contexts") else (
            f"names {exc.args[0]!r} in its current context, and holds no such cluster or user"
        )  # fmt: skip
        raise wrong(f" {missing}") from None
    except (TypeError, AttributeError, ValueError) as exc:
        raise wrong(f" is not a kubeconfig: {str(exc)[:200]}") from None
    server = config.cluster.server
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise wrong(": the cluster has no server")
    if (config.user or User()).auth_provider:
        raise wrong(
            ": its user has an auth-provider, which kubectl no longer runs: use an exec plugin or "
            "a service-account token"
        )
    _check_tls(config, f"kubeconfig {path}")
    section = plugins.get(config.context.user) if config.context.user else None
    if section is None:
        return KubeAccess(config)
    try:
        plugin = exec_plugin(section, path.parent, environ, _named_cluster(loaded, config))
    except BackendError as exc:
        raise wrong(f": {exc}") from None
    return KubeAccess(config, plugin)


def _named_cluster(loaded: dict[str, Any], config: SingleConfig) -> dict[str, Any]:
    """The current context's cluster as written, for a plugin that asks (provideClusterInfo)."""
    for entry in loaded.get("clusters") or []:
        if isinstance(entry, dict) and entry.get("name") == config.context.cluster:
            cluster = entry.get("cluster")
            return dict(cluster) if isinstance(cluster, dict) else {}
    return {}


def _check_tls(config: SingleConfig, where: str) -> None:
    """The CA and client certificate load: said at start, not at the first scale-up."""
    try:
        verify_cluster(config.cluster, config.user or User(), config.abs_file)
    except (OSError, ValueError, ConfigError) as exc:  # ssl.SSLError is an OSError
        said = str(exc)[:200]
        message = f"{where}: its TLS certificates are unusable: {said}"
        raise BackendError(message, retryable=False) from None


def _without_exec(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kubeconfig without its users' `exec` sections (ours to run), and those by user."""
    users, plugins = config.get("users"), {}
    if not isinstance(users, list):
        return config, plugins
    kept = []
    for entry in users:
        user = entry.get("user") if isinstance(entry, dict) else None
        if isinstance(user, dict) and "exec" in user:
            plugins[entry.get("name")] = user["exec"]
            entry = {**entry, "user": {k: v for k, v in user.items() if k != "exec"}}
        kept.append(entry)
    return {**config, "users": kept}, plugins


async def call(request: Awaitable[T], counted: Counted, *, timeout_s: float, server: str) -> T:
    """A lightkube call's answer, or a `BackendError` worded as `bot.backends.http` words one."""
    try:
        answer = await request
    except CredentialError:
        counted(SERVICE, "error")
        raise
    except ConfigError as exc:  # the service account's token file gone
        counted(SERVICE, "error")
        raise BackendError(f"{SERVICE} was not called: {exc}", retryable=False) from None
    except (httpx.HTTPError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise _failure(exc, counted, timeout_s, server) from None
    counted(SERVICE, "ok")
    return answer


def _failure(exc: Exception, counted: Counted, timeout_s: float, server: str) -> BackendError:
    # A refusal is lightkube's ApiError (an HTTPStatusError), or the context of what reading its
    # body raised.

    refused = exc if isinstance(exc, httpx.HTTPStatusError) else exc.__context__
    if isinstance(refused, httpx.HTTPStatusError):
        counted(SERVICE, outcome_of(refused.response))
        return error_of(SERVICE, refused.response)
    if isinstance(exc, httpx.HTTPError):
        return unanswered(exc, SERVICE, counted, timeout_s=timeout_s, url=server)
    counted(SERVICE, "ok")  # answered, but in a shape lightkube could not read
    shape = "something that is not JSON" if isinstance(exc, json.JSONDecodeError) else (
        "an unexpected shape"
    )  # fmt: skip
    return BackendError(f"{SERVICE} answered with {shape}", retryable=True)
