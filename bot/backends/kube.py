"""How the bot reaches the Kubernetes API (`kube_access`): SCALER_KUBECONFIG, else the pod's
service account, else kubectl's kubeconfig, through lightkube's client (which rereads the service
account's rotated token after a 401); every call counted and its failure classified once (`call`).
A kubeconfig user's `exec` plugin runs as client-go runs it, its token used until its
`expirationTimestamp` (or a 401): lightkube knows no v1 ExecCredential and keeps a token past its
expiry, so the bot runs plugins in a transport in front of lightkube's."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Awaitable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from lightkube import AsyncClient, ConfigError
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User

from bot.backends.http import BackendError, Counted, error_of, outcome_of, shortened, unanswered
from bot.config import SettingsError
from bot.config.loading import file_variables, secret_settings
from bot.domain.alerting.alerts import time_of

SERVICE = "The Kubernetes API"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
NO_ACCESS = "SCALER_BACKEND=arc: no Kubernetes access"
T = TypeVar("T")
EXEC_GROUP = "client.authentication.k8s.io"
EXEC_VERSIONS = (f"{EXEC_GROUP}/v1", f"{EXEC_GROUP}/v1beta1")
EXEC_STDERR_SAID = 300  # of a failing plugin's stderr, in a reply


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
        own = named_by == "SCALER_KUBECONFIG"
        other = "point SCALER_KUBECONFIG at another" if own else "set SCALER_KUBECONFIG to another"
        raise SettingsError(f"{NO_ACCESS} through {named_by}: {exc}. Fix it, or {other}") from None


def in_cluster(host: str, port: str, account: Path = SERVICE_ACCOUNT) -> KubeAccess:
    """The pod's service account: its token file and the cluster's CA."""
    for part in ("token", "ca.crt"):
        try:
            (account / part).read_bytes()
        except OSError as exc:
            said = f"the service account's {account / part} is unreadable: {exc.strerror}"
            raise BackendError(said, retryable=False) from None
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
        said = ": its user has an auth-provider, which kubectl no longer runs: use an exec plugin "
        raise wrong(said + "or a service-account token")
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
        said = f"{where}: its TLS certificates are unusable: {str(exc)[:200]}"
        raise BackendError(said, retryable=False) from None


def _without_exec(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kubeconfig without its users' `exec` sections (ours to run), and those by user."""
    users, plugins = config.get("users"), {}
    if not isinstance(users, list):
        return config, plugins
    kept = []
    for entry in users:
        user = entry.get("user") if isinstance(entry, dict) else None
        if isinstance(user, dict) and "exec" in user:
            if isinstance(name := entry.get("name"), str):  # a context names its user by string
                plugins[name] = user["exec"]
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
    # A refusal is lightkube's ApiError, or the context of what reading its body raised.
    refused = exc if isinstance(exc, httpx.HTTPStatusError) else exc.__context__
    if isinstance(refused, httpx.HTTPStatusError):
        counted(SERVICE, outcome_of(refused.response))
        said, whole = error_of(SERVICE, refused.response), _status_message(refused.response)
        status = refused.response.status_code
        return Refusal(str(said), retryable=said.retryable, status=status, whole=whole)
    if isinstance(exc, httpx.HTTPError):
        return unanswered(exc, SERVICE, counted, timeout_s=timeout_s, url=server)
    counted(SERVICE, "ok")  # answered, but in a shape lightkube could not read
    shape = "something that is not JSON" if isinstance(exc, json.JSONDecodeError) else (
        "an unexpected shape"
    )  # fmt: skip
    return BackendError(f"{SERVICE} answered with {shape}", retryable=True)


def _status_message(response: httpx.Response) -> str:
    """The `message` of the API server's `Status`, whole ("" when the body is no Status)."""
    try:
        body = response.json()
    except ValueError:
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else ""


class Refusal(BackendError):
    """The API server's refusal; `whole`: its message uncut, which says who refused (RBAC, or an
    admission policy) past where a reply cuts it."""

    def __init__(self, message: str, *, retryable: bool, status: int, whole: str) -> None:
        super().__init__(message, retryable=retryable, status=status)
        self.whole = whole


class CredentialError(BackendError):
    """The plugin gave no token: the API server was not called."""


@dataclass
class ExecPlugin:
    api_version: str
    command: str  # the path found (`_found`)
    args: tuple[str, ...]
    env: dict[str, str] = field(repr=False)  # the plugin's own may hold secrets: never logged
    cluster: dict[str, Any] | None = field(default=None, repr=False)  # provideClusterInfo's
    _token: str | None = field(default=None, init=False, repr=False)
    _expires: datetime | None = field(default=None, init=False, repr=False)
    _runs: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    @property
    def name(self) -> str:
        return Path(self.command).name

    async def token(self, timeout_s: float, *, refused: str | None = None) -> str:
        """The token held, unless expired or `refused`; else the plugin's next (one run at once)."""
        async with self._runs:
            expired = self._expires is not None and datetime.now(UTC) >= self._expires
            if self._token is None or expired or self._token == refused:
                self._token, self._expires = await self._run(timeout_s)
            return self._token

    async def _run(self, timeout_s: float) -> tuple[str, datetime | None]:
        # What client-go tells a plugin; a bot has no terminal to prompt on.
        spec: dict[str, Any] = {"interactive": False}
        spec |= {"cluster": self.cluster} if self.cluster is not None else {}
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            process = await asyncio.create_subprocess_exec(
                self.command, *self.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError as exc:
            raise self._failed(f"could not be run: {exc.strerror}") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            raise self._failed(f"did not finish within {timeout_s:g} s", retryable=True) from None
        finally:
            if process.returncode is None:  # timed out, or the call was given up
                with suppress(ProcessLookupError):
                    process.kill()
        if process.returncode != 0:
            said = shortened(err.decode(errors="replace"), EXEC_STDERR_SAID)
            said = said or "(nothing on stderr)"
            raise self._failed(f"failed (exit {process.returncode}): {said}")
        return self._credential(out)

    def _credential(self, out: bytes) -> tuple[str, datetime | None]:
        try:
            printed: Any = json.loads(out)
        except ValueError:
            raise self._failed("printed no ExecCredential (not JSON)") from None
        if not isinstance(printed, dict) or printed.get("kind") != "ExecCredential":
            raise self._failed("printed something other than an ExecCredential")
        if printed.get("apiVersion") != self.api_version:
            said = f"printed an ExecCredential of {str(printed.get('apiVersion'))[:60]}, not of "
            raise self._failed(f"{said}the {self.api_version} its kubeconfig names")
        status = printed.get("status") if isinstance(printed.get("status"), dict) else {}
        token = status.get("token")
        if not isinstance(token, str) or not token:
            what = "a client certificate" if status.get("clientCertificateData") else "nothing"
            raise self._failed(f"gave {what} instead of a token (queuepilot sends a bearer token)")
        expires = status.get("expirationTimestamp")
        at = time_of(expires)
        if expires is not None and at is None:
            raise self._failed("gave an expirationTimestamp that is not a time")
        return token, at

    def _failed(self, what: str, *, retryable: bool = False) -> CredentialError:
        said = f"the kubeconfig's exec plugin {self.name} {what}"
        return CredentialError(said, retryable=retryable)


class ExecAuth(httpx.AsyncBaseTransport):
    """Every request with the plugin's token; after a 401, once more with a new one."""

    def __init__(
        self, plugin: ExecPlugin, inner: httpx.AsyncBaseTransport, timeout_s: float
    ) -> None:
        self._plugin = plugin
        self._inner = inner
        self._timeout_s = timeout_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        token = await self._plugin.token(self._timeout_s)
        response = await self._sent(request, token)
        if response.status_code != 401:
            return response
        renewed = await self._plugin.token(self._timeout_s, refused=token)
        if renewed == token:  # the plugin's answer again: the refusal stands
            return response
        await response.aclose()
        return await self._sent(request, renewed)

    async def _sent(self, request: httpx.Request, token: str) -> httpx.Response:
        request.headers["Authorization"] = f"Bearer {token}"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __deepcopy__(self, memo: dict[int, Any]) -> ExecAuth:
        # lightkube deep-copies its connection's parameters; the plugin and TLS context are shared.
        return self


def exec_plugin(
    section: object,
    base: Path,
    environ: Mapping[str, str],
    cluster: Mapping[str, Any] | None = None,
) -> ExecPlugin:
    """A kubeconfig user's `exec` section as kubectl validates and finds it, or a `BackendError`
    saying what to fix. It runs without queuepilot's own secrets, its `env` over the rest."""
    if not isinstance(section, dict):
        raise _wrong("its user's exec is not a mapping")
    version, command = section.get("apiVersion"), section.get("command")
    if not isinstance(command, str) or not command:
        raise _wrong("its user's exec plugin names no command")
    if version not in EXEC_VERSIONS:
        said = f"its user's exec plugin asks for apiVersion {str(version)[:60]}: queuepilot speaks "
        said += f"{' and '.join(EXEC_VERSIONS)} (ask the plugin's maintainers for one of them)"
        raise _wrong(said)
    mode = section.get("interactiveMode") or ("" if version == EXEC_VERSIONS[0] else "IfAvailable")
    if mode not in ("Never", "IfAvailable"):
        said = "gives no interactiveMode" if not mode else f"asks for interactiveMode {mode}"[:80]
        said = f"its user's exec plugin {said}: set interactiveMode: Never (queuepilot runs the "
        raise _wrong(said + "plugin with no terminal to prompt on)")
    args, env = section.get("args") or [], section.get("env") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise _wrong("its user's exec args are not a list of strings")
    if not isinstance(env, list) or not all(
        isinstance(pair, dict) and isinstance(pair.get("name"), str) for pair in env
    ):
        raise _wrong("its user's exec env is not a list of name and value")
    found = _found(command, base, environ)
    if found is None:
        hint = section.get("installHint")
        fix = str(hint).strip()[:300] if hint else "install it where queuepilot runs"
        raise _wrong(f"its user's exec plugin {command} is not found: {fix}")
    kept = {k: v for k, v in environ.items() if k.upper() not in _SECRETS}
    variables = {**kept, **{p["name"]: str(p.get("value") or "") for p in env}}
    info = _cluster_info(cluster or {}) if section.get("provideClusterInfo") is True else None
    return ExecPlugin(str(version), found, tuple(args), variables, info)


def _wrong(said: str) -> BackendError:
    return BackendError(said, retryable=False)


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """ExecCredential's spec.cluster, as client-go sends it under provideClusterInfo."""
    info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    info |= {name: cluster[name] for name in _CLUSTER_FIELDS if cluster.get(name) not in (None, "")}
    for entry in cluster.get("extensions") or []:
        if isinstance(entry, dict) and entry.get("name") == f"{EXEC_GROUP}/exec":
            info["config"] = entry.get("extension")
    return info


# The cluster's fields an ExecCredential carries, named as in the kubeconfig.
_CLUSTER_FIELDS = (
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
_SECRETS = frozenset(
    {name.upper() for name in secret_settings()} | file_variables() | {"REDIS_URL"}
)


def _found(command: str, base: Path, environ: Mapping[str, str]) -> str | None:
    if os.sep in command:  # a path: relative ones are the kubeconfig's, as kubectl reads them
        path = base / command
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(command, path=environ.get("PATH", os.defpath))
