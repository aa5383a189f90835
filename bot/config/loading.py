"""Reading the settings, alike for `serve` and `check`: every problem at once, each naming its
variable (and the place inside a JSON setting); secrets from the files `<NAME>_FILE` names (as
Kubernetes' Secret volumes, Docker and Vault's agent hand them over), read once at start; the
variables that look like a misspelt one of ours; and the values an env file left in quotes."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.serve import check_serve, serve_problems, serve_warnings
from bot.config.settings import Settings, SettingsError

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
SECRET_FILE_MAX_BYTES = 64 * 1024


def secret_settings() -> tuple[str, ...]:
    """Every secret, in the reference's order."""
    return tuple(
        name
        for name, info in Settings.model_fields.items()
        if "SecretStr" in str(info.annotation) or name in _SECRET_URLS
    )


def file_variables() -> frozenset[str]:
    return frozenset(name.upper() + SUFFIX for name in secret_settings())


def read_secret_files(
    environ: Mapping[str, str], given: Mapping[str, object]
) -> tuple[dict[str, str], dict[str, str]]:
    """Every `<SECRET>_FILE` in `environ` read, but for the settings `given` by the caller: by
    setting, the files' texts, and what is wrong where one cannot be."""
    texts, problems = {}, {}
    for name in secret_settings():
        variable = name.upper()
        path = environ.get(variable + SUFFIX)
        if path is None or name in given:
            continue
        if variable in environ:
            problems[name] = (
                f"{variable} and {variable}{SUFFIX} are both set: keep one ({variable}{SUFFIX} "
                f"reads the secret from the file {path})"
            )
            continue
        try:
            texts[name] = _read(path)
        except ValueError as exc:
            quoted = f"; the path is in quotes: {REMOVE_QUOTES}" if in_quotes(path) else ""
            problems[name] = f"{variable}{SUFFIX}: cannot read {path}: {exc}{quoted}"
    return texts, problems


def in_quotes(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) >= 2 and value[0] in _QUOTES and value[-1] == value[0]
    )


_UNREADABLE = {
    FileNotFoundError: "no such file: mount the secret there (a Secret volume holds one file per "
    "key), or point the variable at the file that holds it",
    IsADirectoryError: "a directory: name the file inside it (a Secret volume mounts each key as "
    "<mountPath>/<key>)",
    PermissionError: "not readable by this process (uid {uid}): make it readable to it (a Secret "
    "volume's defaultMode 0440 with the pod's fsGroup, or 0444)",
}


def _read(path: str) -> str:
    try:
        with open(path, "rb") as file:
            data = file.read(SECRET_FILE_MAX_BYTES + 1)
    except OSError as exc:
        said = _UNREADABLE.get(type(exc), "{error}: point the variable at a readable file")
        raise ValueError(said.format(uid=os.getuid(), error=exc.strerror or exc)) from None
    if len(data) > SECRET_FILE_MAX_BYTES:
        raise ValueError(
            f"over {SECRET_FILE_MAX_BYTES // 1024} KiB, so not a secret: point the variable at "
            "the file that holds the secret alone"
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


# Kubernetes gives a pod `<SERVICE>_PORT`, `<SERVICE>_SERVICE_HOST`, … for every Service in its
# namespace: a Service named `prometheus` makes PROMETHEUS_PORT, which is no typo of ours.
_SERVICE_LINK = re.compile(r".+_(SERVICE_HOST|SERVICE_PORT(_.+)?|PORT(_[0-9]+_(TCP|UDP|SCTP).*)?)")
# How close a name must be to one of ours to be taken for a misspelling of it.
_NEAR = 0.85
# Prefixes other software shares with a few of ours (the AWS SDK's AWS_ENDPOINT_URL_SQS, EKS's,
# Kubernetes', GitHub Actions'): only a closer spelling is a typo there (AWS_REGON).
_SHARED_PREFIXES = ("AWS_", "KUBERNETES_", "GITHUB_")
_NEAR_SHARED = 0.92


class EnvironmentSettings(BaseSettings, Settings):
    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", case_sensitive=False, env_ignore_empty=True
    )


def known_variables() -> frozenset[str]:
    return frozenset(name.upper() for name in Settings.model_fields)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, `.env`, the secrets' files and `overrides` (over all)."""
    settings, problems, _ = _load(overrides)
    if settings is None:
        raise SettingsError(problems)
    return settings


def read_settings(**overrides: Any) -> Settings:
    """Settings `serve` can run with, or every wrong, missing or conflicting one at once."""
    settings, problems, failed = _load(overrides)
    if settings is None:
        # The others are still checked together, each failed one at its default (said already).
        defaults = {name: Settings.model_fields[name].default for name in failed}
        try:
            rest = serve_problems(load_settings(**{**overrides, **defaults}))
        except SettingsError:
            rest = []
        extra = [p for p in rest if not any(name.upper() in p for name in failed)]
        raise SettingsError(problems + extra)
    check_serve(settings)
    return settings


@dataclass(frozen=True)
class Startup:
    settings: Settings | None  # None: `serve` refuses to start, for `problems`
    problems: list[str]
    near_misses: list[str]  # variables that look like a misspelt setting (`unknown_variables`)
    warnings: list[str]  # what runs, but an operator should hear of at the start


def read_startup(environ: Mapping[str, str] = os.environ) -> Startup:
    """The settings `serve` runs with and what an operator should hear of them; `environ`: where
    near misses and quoted values are looked for."""
    near_misses = unknown_variables(environ)
    quoted = quoted_variables(environ)
    try:
        settings = read_settings()
    except SettingsError as exc:
        # A value refused for its quotes says so in its problem already.
        named = {p.split(":", 1)[0].split("[", 1)[0] for p in exc.problems}
        unsaid = [q for q in quoted if q.split(":", 1)[0].upper() not in named]
        return Startup(None, exc.problems, near_misses, unsaid)
    return Startup(settings, [], near_misses, quoted + serve_warnings(settings))


def _load(overrides: dict[str, Any]) -> tuple[Settings | None, list[str], set[str]]:
    environ = environment(overrides.get("_env_file", ".env"))
    texts, unread = read_secret_files(environ, overrides)
    problems, failed = list(unread.values()), set(unread)
    try:
        settings = EnvironmentSettings(**{**texts, **overrides})
    except ValidationError as exc:
        errors = exc.errors()
        failed |= {str(e["loc"][0]) for e in errors if e["loc"]} & Settings.model_fields.keys()
        read_from = {name: environ[name.upper() + SUFFIX] for name in texts}
        return None, problems + [_problem(error, read_from) for error in errors], failed
    return (None if problems else settings), problems, failed


def unknown_variables(environ: Mapping[str, str], dotenv: Path | None = Path(".env")) -> list[str]:
    names = set(environ)
    if dotenv is not None and dotenv.is_file():
        from dotenv import dotenv_values

        names |= set(dotenv_values(dotenv))
    settings = known_variables()
    known = settings | file_variables()
    found = []
    for name in sorted(names):
        upper = name.upper()
        if upper in known or _SERVICE_LINK.fullmatch(upper):
            continue
        shared = upper.startswith(_SHARED_PREFIXES)
        near = difflib.get_close_matches(
            upper, known, n=1, cutoff=_NEAR_SHARED if shared else _NEAR
        )
        words = set(upper.split("_"))
        if not near and not shared and len(words) >= 2:
            # Ours with a word left out: SLACK_TOKEN for SLACK_BOT_TOKEN.
            near = [k for k in sorted(settings) if words < set(k.split("_"))]
        if near:
            found.append(f"{name} is not a queuepilot setting: did you mean {' or '.join(near)}?")
    return found


def quoted_variables(environ: Mapping[str, str]) -> list[str]:
    """Our variables whose value is in quotes, which make a token wrong, a path no file."""
    ours = known_variables() | file_variables()
    return [
        f"{name}: {REMOVE_QUOTES}"
        for name, value in sorted(environ.items())
        if name.upper() in ours and in_quotes(value)
    ]


def _problem(error: ErrorDetails, read_from: Mapping[str, str]) -> str:
    """`SCALER_TARGETS["linux.2xlarge"].cap: must be ≥ 1`, with the value refused where pydantic's
    message doesn't say it and it is no secret, and the file it was read from (`read_from`)."""
    field, *path = error["loc"] or ("settings",)
    where = "".join(f"[{p}]" if isinstance(p, int) else f'["{p}"]' for p in path[:1])
    where += "".join(f".{p}" for p in path[1:])
    info, value, shown = Settings.model_fields.get(str(field)), error.get("input"), ""
    secret = info is not None and "SecretStr" in str(info.annotation)
    if error["type"] != "value_error" and not path and isinstance(value, str) and not secret:
        shown = f" (got {value[:40]!r})"
    if not path and in_quotes(value):
        shown += f"; its value is in quotes: {REMOVE_QUOTES}"
    if str(field) in read_from:
        shown += f" (read from {str(field).upper()}{SUFFIX}={read_from[str(field)]})"
    return f"{str(field).upper()}{where}: {error['msg'].removeprefix('Value error, ')}{shown}"
