"""Secrets read from files (`SLACK_BOT_TOKEN_FILE=/run/secrets/slack-bot-token`), as Kubernetes'
Secret volumes, Docker and Vault's agent hand them over: read once at start, trailing line breaks
dropped; a secret set both ways, or a file that cannot be read, is a problem naming the fix."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.settings import Settings

SUFFIX = "_FILE"
# A URL that may carry a password (redis://:password@host) is as secret as a token.
_SECRET_URLS = ("redis_url",)
# docker's --env-file and kubectl's --from-env-file (Kustomize's too) keep `KEY="value"`'s quotes
# in the value, where a shell, Compose's `env_file` and `.env` (python-dotenv) take them away.
_QUOTES = ('"', "'")
REMOVE_QUOTES = (
    "remove the quotes (env files keep them: docker's --env-file and kubectl's --from-env-file "
    "pass them on as part of the value)"
)
# A secret is a few KiB at most (a PEM key about 3): anything bigger (a log, a device that never
# ends) is a mistake, refused before it is read whole.
MAX_BYTES = 64 * 1024


def secret_settings() -> tuple[str, ...]:
    """Every secret, in the reference's order."""
    return tuple(
        name
        for name, info in Settings.model_fields.items()
        if "SecretStr" in str(info.annotation) or name in _SECRET_URLS
    )


def file_variables() -> frozenset[str]:
    return frozenset(name.upper() + SUFFIX for name in secret_settings())


@dataclass
class SecretFiles:
    values: dict[str, str] = field(default_factory=dict)  # setting → the file's text
    problems: dict[str, str] = field(default_factory=dict)  # setting → what is wrong
    paths: dict[str, str] = field(default_factory=dict)  # setting → where it was read


def read_secret_files(environ: Mapping[str, str], given: Mapping[str, object]) -> SecretFiles:
    """Every `<SECRET>_FILE` in `environ` read, but for the settings `given` by the caller."""
    found = SecretFiles()
    for name in secret_settings():
        variable = name.upper()
        path = environ.get(variable + SUFFIX)
        if path is None or name in given:
            continue
        if variable in environ:
            found.problems[name] = (
                f"{variable} and {variable}{SUFFIX} are both set: keep one ({variable}{SUFFIX} "
                f"reads the secret from the file {path})"
            )
            continue
        try:
            found.values[name] = _read(path)
            found.paths[name] = path
        except ValueError as exc:
            quoted = f"; the path is in quotes: {REMOVE_QUOTES}" if in_quotes(path) else ""
            found.problems[name] = f"{variable}{SUFFIX}: cannot read {path}: {exc}{quoted}"
    return found


def in_quotes(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) >= 2 and value[0] in _QUOTES and value[-1] == value[0]
    )


def _read(path: str) -> str:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ValueError(
            "no such file: mount the secret there (a Secret volume holds one file per key), or "
            "point the variable at the file that holds it"
        ) from None
    except IsADirectoryError:
        raise ValueError(
            "a directory: name the file inside it (a Secret volume mounts each key as "
            "<mountPath>/<key>)"
        ) from None
    except PermissionError:
        raise ValueError(
            f"not readable by this process (uid {os.getuid()}): make it readable to it (a "
            "Secret volume's defaultMode 0440 with the pod's fsGroup, or 0444)"
        ) from None
    except OSError as exc:
        raise ValueError(f"{exc.strerror or exc}: point the variable at a readable file") from None
    if len(data) > MAX_BYTES:
        raise ValueError(
            f"over {MAX_BYTES // 1024} KiB, so not a secret: point the variable at the file that "
            "holds the secret alone"
        )
    try:
        text = data.decode().rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text: the file must hold the secret as text") from None
    if not text:
        raise ValueError("empty: put the secret in it, or unset the variable")
    return text


def environment(env_file: object) -> dict[str, str]:
    """The variables as the settings read them: `env_file`'s under the process's, upper-cased."""
    merged: dict[str, str | None] = {}
    if isinstance(env_file, str | Path) and Path(env_file).is_file():
        from dotenv import dotenv_values

        merged = dotenv_values(env_file)
    return {k.upper(): v for k, v in merged.items() if v} | {
        k.upper(): v for k, v in os.environ.items() if v
    }
