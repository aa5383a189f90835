"""A kubeconfig user's `exec` plugin, run as kubectl runs it (client-go credential plugins): the
ExecCredential's token is used until its `expirationTimestamp` (or a 401), then the plugin runs
again. lightkube knows no v1 ExecCredential (what current plugins print) and keeps a token past
its expiry, so the bot runs plugins in a transport in front of lightkube's, as client-go does."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import shortened, time_of
from bot.config.loading import file_variables, secret_settings

GROUP = "client.authentication.k8s.io"
VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1")
MAX_SAID = 300  # of a failing plugin's stderr, in a reply


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
        info: dict[str, Any] = {"apiVersion": self.api_version, "kind": "ExecCredential"}
        info["spec"] = {"interactive": False}
        if self.cluster is not None:
            info["spec"]["cluster"] = self.cluster
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
            said = shortened(err.decode(errors="replace"), MAX_SAID) or "(nothing on stderr)"
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
            raise self._failed(
                f"printed an ExecCredential of {str(printed.get('apiVersion'))[:60]}, not of the "
                f"{self.api_version} its kubeconfig names"
            )
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
        return CredentialError(
            f"the kubeconfig's exec plugin {self.name} {what}", retryable=retryable
        )


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
    if version not in VERSIONS:
        raise _wrong(
            f"its user's exec plugin asks for apiVersion {str(version)[:60]}: queuepilot speaks "
            f"{' and '.join(VERSIONS)} (ask the plugin's maintainers for one of them)"
        )
    mode = section.get("interactiveMode") or ("" if version == VERSIONS[0] else "IfAvailable")
    if mode not in ("Never", "IfAvailable"):
        said = "gives no interactiveMode" if not mode else f"asks for interactiveMode {mode}"[:80]
        raise _wrong(
            f"its user's exec plugin {said}: set interactiveMode: Never (queuepilot runs the "
            "plugin with no terminal to prompt on)"
        )
    args, env = section.get("args") or [], section.get("env") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise _wrong("its user's exec args are not a list of strings")
    pairs = [entry for entry in env if isinstance(entry, dict)] if isinstance(env, list) else []
    if len(pairs) != len(env) or not all(isinstance(p.get("name"), str) for p in pairs):
        raise _wrong("its user's exec env is not a list of name and value")
    found = _found(command, base, environ)
    if found is None:
        hint = section.get("installHint")
        fix = str(hint).strip()[:300] if hint else "install it where queuepilot runs"
        raise _wrong(f"its user's exec plugin {command} is not found: {fix}")
    kept = {k: v for k, v in environ.items() if k.upper() not in _SECRETS}
    variables = {**kept, **{p["name"]: str(p.get("value") or "") for p in pairs}}
    asked = section.get("provideClusterInfo") is True
    return ExecPlugin(str(version), found, tuple(args), variables, _cluster_info(cluster, asked))


def _wrong(said: str) -> BackendError:
    return BackendError(said, retryable=False)


def _cluster_info(cluster: Mapping[str, Any] | None, asked: bool) -> dict[str, Any] | None:
    """ExecCredential's spec.cluster, as client-go sends it under provideClusterInfo."""
    if not asked:
        return None
    cluster = cluster or {}
    info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    info |= {name: cluster[name] for name in _CLUSTER_FIELDS if cluster.get(name) not in (None, "")}
    for entry in cluster.get("extensions") or []:
        if isinstance(entry, dict) and entry.get("name") == f"{GROUP}/exec":
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
