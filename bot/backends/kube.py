"""Reaching the Kubernetes API: the pod's service account, or a kubeconfig's current context (no
`exec` plugins). The in-cluster token is read on every request: the kubelet rotates it."""

from __future__ import annotations

import base64
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bot.backends.errors import BackendError
from bot.backends.http import backend_client, bearer

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class KubeAccess:
    server: str
    verify: ssl.SSLContext | bool = True
    token: str | None = None
    token_file: Path | None = None
    cert: tuple[str, str] | None = None

    def headers(self) -> dict[str, str]:
        return bearer(self.token_file.read_text().strip() if self.token_file else self.token)

    def client(self, timeout_s: float) -> httpx.AsyncClient:
        return backend_client(self.server, timeout_s, verify=self.verify, cert=self.cert)


def in_cluster(host: str, port: str, account: Path = SERVICE_ACCOUNT) -> KubeAccess:
    server = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
    context = ssl.create_default_context(cafile=str(account / "ca.crt"))
    return KubeAccess(server, verify=context, token_file=account / "token")


def from_kubeconfig(path: Path) -> KubeAccess:
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BackendError(f"kubeconfig {path} is unreadable: {exc}", retryable=False) from None
    if not isinstance(config, dict):
        raise BackendError(f"kubeconfig {path} is not a kubeconfig", retryable=False)
    try:
        return _access(config, path)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise BackendError(f"kubeconfig {path}: {exc}", retryable=False) from None


def _access(config: dict[str, Any], path: Path) -> KubeAccess:
    context = _named(config, "contexts", config.get("current-context"), "context")
    cluster = _named(config, "clusters", context.get("cluster"), "cluster")
    user = _named(config, "users", context.get("user"), "user") if context.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        raise BackendError(
            "kubeconfig users with exec or auth-provider plugins are not supported: "
            "use a service-account token",
            retryable=False,
        )
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise BackendError(f"kubeconfig {path}: the cluster has no server", retryable=False)
    verify: ssl.SSLContext | bool = not cluster.get("insecure-skip-tls-verify", False)
    ca = _pem(cluster, "certificate-authority", path.parent)
    if ca is not None and verify:
        verify = ssl.create_default_context(cadata=ca)
    pems = [_pem(user, key, path.parent) for key in ("client-certificate", "client-key")]
    cert = (_temp_file(pems[0]), _temp_file(pems[1])) if all(pems) else None
    token_file = Path(str(user["tokenFile"])) if user.get("tokenFile") else None
    token = str(user["token"]) if user.get("token") else None
    return KubeAccess(server, verify=verify, token=token, token_file=token_file, cert=cert)


def _named(config: dict[str, Any], section: str, name: object, key: str) -> dict[str, Any]:
    entries = config.get(section)
    for entry in entries if isinstance(entries, list) else []:
        found = entry.get(key) if isinstance(entry, dict) and entry.get("name") == name else None
        if isinstance(found, dict):
            return dict(found)
    raise BackendError(f"kubeconfig: no {key} named {name!r}", retryable=False)


def _pem(section: dict[str, Any], key: str, base: Path) -> str | None:
    """A PEM from `<key>-data` (base64) or the file `<key>` names (relative to the config)."""
    data = section.get(f"{key}-data")
    if data:
        return base64.b64decode(str(data), validate=True).decode()
    file = section.get(key)
    if file:
        return (base / str(file)).read_text()  # an absolute path stays absolute
    return None


def _temp_file(pem: str | None) -> str:
    """httpx takes client certificates as files only."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)  # noqa: SIM115
    with handle:
        handle.write(pem or "")
    return handle.name
