"""What a setting's value must be. Each message says what was wrong and how to write it instead:
the operator has only the variable's name and this line to go on. A type's plain-string metadata
is what the reference's Value column says of it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, SecretStr
from pydantic_settings import NoDecode

from bot.domain.alerting.promql_selector import parse_selector, selector_text
from bot.domain.units import span_seconds
from bot.storage.connection import RedisSetupError, parse_sentinels, refuse_unusable_url

_UNIT_SECONDS = {"milliseconds": 0.001, "seconds": 1, "minutes": 60, "days": 86_400}


def duration(kind: Any, unit: str, *, bare: bool = True) -> Any:
    """`30s`, `10m`, `4h`, `1d`, `1h30m` or `off`; a bare number is in the unit the setting's name
    says. Where it says none (`bare=False`), only 0 may be bare: whoever wrote
    `SCALE_REVERT_AFTER=240` may have meant 4 hours as well as 4 minutes."""

    def read(value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.lower() in ("off", "none", "never"):
            return 0
        if re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?", text):
            if bare or float(text) == 0:
                return text
            raise ValueError(
                f"{text[:20]!r} has no unit, and this setting's name says none: write it with "
                f"one, e.g. {text[:20]}s, {text[:20]}m or {text[:20]}h (or off)"
            )
        seconds = span_seconds(text)
        if seconds is None:
            raise ValueError(
                f"{value[:40]!r} is not a duration: write e.g. 30s, 10m, 4h or 1d "
                f"(a bare number is in {unit})"
            )
        amount = seconds / _UNIT_SECONDS[unit]
        return int(amount) if float(amount).is_integer() else amount

    said = f"a bare number is in {unit}" if bare else "with its unit: 90s, 30m, 4h"
    return Annotated[kind, BeforeValidator(read), f"duration ({said})"]


Milliseconds = duration(int, "milliseconds")
Seconds = duration(int, "seconds")
FractionalSeconds = duration(float, "seconds")
Minutes = duration(float, "minutes")
# A span such as `12h` too: a soak plays a week in minutes.
Days = duration(int | float, "days")
Span = duration(int, "seconds", bare=False)


def _matching(
    pattern: str, problem: str, *, blank: bool = False, shown: int = 40
) -> Callable[[str], str]:
    """Matching `pattern` whole (or empty, when `blank`); `{!r}` in `problem` is the value."""

    def check(value: str) -> str:
        if not (blank and not value) and not re.fullmatch(pattern, value):
            raise ValueError(problem.format(value[:shown]))
        return value

    return check


def parsed(parse: Callable[[str], Any]) -> BeforeValidator:
    """A setting the environment gives as text, parsed by `parse`; a test may give it parsed."""
    return BeforeValidator(lambda value: parse(value) if isinstance(value, str) else value)


def _json_object(text: str) -> object:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError(f"must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object ({...})")
    return value


def _comma_list(check: Callable[[str], str], kind: str) -> Any:
    split = parsed(lambda text: tuple(part.strip() for part in text.split(",") if part.strip()))
    each = AfterValidator(lambda values: tuple(check(value) for value in values))
    return Annotated[tuple[str, ...], NoDecode, split, each, kind]


def _channel_id(value: str) -> str:
    # Channels are C (public) or G (private, older); D is a DM, no place for incidents.
    if value and not re.fullmatch(r"[CG][A-Z0-9]{2,}", value):
        what = "a channel name" if value.startswith("#") or value.islower() else "not a channel ID"
        raise ValueError(
            f"{value[:40]!r} is {what}: use the channel's ID (C… or G…; in Slack, open the "
            "channel's details: the ID is at the bottom of About)"
        )
    return value


def _without_credentials(value: str) -> str:
    """Everything before the last `@` of what follows the scheme (a user and password, however
    malformed: an unencoded password may hold `/`, `#` or `?`) and the query left out."""
    scheme, sep, rest = value.partition("://") if "://" in value else ("", "", value)
    if "@" in rest:
        rest = "•••@" + rest.rsplit("@", 1)[1]
    return (scheme + sep + rest).split("?", 1)[0][:60]


def _url(schemes: tuple[str, ...], example: str) -> Any:
    def check(value: str) -> str:
        parts = urlsplit(value)
        shown = _without_credentials(value)
        if parts.scheme.lower() in schemes and (parts.netloc or parts.scheme == "unix"):
            if any(ch.isspace() for ch in value):
                raise ValueError(f"{shown!r} has a space in it")
            return value
        hint = example if "//" in value else f"{schemes[0]}://{shown}"
        raise ValueError(
            f"{shown!r} is not a URL ({', '.join(schemes)}): write it with its scheme, "
            f"e.g. {hint[:80]}"
        )

    return Annotated[str, AfterValidator(check), f"URL ({', '.join(s + '://' for s in schemes)})"]


def _token(prefix: str, what: str) -> AfterValidator:
    """The message never repeats the value (a secret)."""

    def check(value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(prefix):
            raise ValueError(f"not {what} ({prefix}…)")
        return value

    return AfterValidator(check)


_PEM_FIX = (
    "paste the whole .pem file the App's settings page generated (from -----BEGIN RSA PRIVATE "
    "KEY----- to -----END RSA PRIVATE KEY-----); on one line, as env files and Kubernetes "
    "Secrets from --from-env-file carry it, write \\n for each line break"
)


def rsa_private_key(value: SecretStr) -> SecretStr:
    """PEM, RSA, unencrypted, as GitHub generates it; a literal `\\n` (an env file's line) is a
    line break. The message never repeats the value (a secret)."""
    text = value.get_secret_value().strip().replace("\\n", "\n")
    try:
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise ValueError(
            "reading a GitHub App's key needs the cryptography package: install queuepilot "
            "with the `github-app` extra (pip install 'queuepilot[github-app]')"
        ) from None
    try:
        key = load_pem_private_key(text.encode(), password=None)
    except TypeError:  # a password-protected key: GitHub's never is
        raise ValueError(f"an encrypted key, not the App's own: {_PEM_FIX}") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError(f"not a PEM RSA private key: {_PEM_FIX}") from None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError(f"a private key, but not RSA (GitHub's are): {_PEM_FIX}")
    return SecretStr(text + "\n")


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


def _redis_url(value: str) -> str:
    try:
        refuse_unusable_url(value)
    except RedisSetupError as exc:
        why = str(exc)
        # redis-py quotes the part it could not read: with a password that holds `/` or `#`,
        # the password's start.
        credentials = value.partition("://")[2].rpartition("@")[0]
        if any(part and part in why for part in re.split(r"[:/#?@]", credentials)):
            why = "a password's /, #, ? or @ must be percent-encoded"
        raise ValueError(
            f"{_without_credentials(value)!r} is not a URL redis-py can use ({why}): write it as "
            "redis://[:password@]host:6379/0 (rediss:// for TLS), with only redis-py's options "
            "after ?"
        ) from None
    return value


def _sentinels(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_sentinels(value)
        except RedisSetupError as exc:
            raise ValueError(f"{exc}: list host:port, comma-separated") from None
    return value


_owner_name = _matching(
    r"[^/\s]+/[^/\s]+", "{!r} is not owner/name: list e.g. pytorch/pytorch", blank=True, shown=60
)
_member_id = _matching(
    r"[UWS][A-Z0-9]+",  # members U or W (Enterprise Grid), user groups S
    "{!r} is not a Slack ID: list member IDs (U…; in Slack, a profile's ⋮ menu → Copy member ID) "
    "or user-group IDs (S…), comma-separated",
)
_app_id = _matching(  # a GitHub App's ID (digits) or client ID (Iv…): the JWT's issuer
    r"[0-9A-Za-z._-]+",
    "{!r} is not a GitHub App's ID: give its App ID (digits) or its client ID (Iv…), from the "
    "App's settings page (About)",
    blank=True,
)
_slash_command = _matching(
    r"/[a-z0-9_-]{1,31}", "{!r} is not a slash command: write it as in the app, e.g. /queue"
)
_namespace = _matching(
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "{!r} is not a Kubernetes namespace name", shown=70
)


HttpUrl = _url(("http", "https"), "https://host:port")
OptionalHttpUrl = _url(("http", "https"), "https://host") | None
RedisUrl = Annotated[
    _url(("redis", "rediss", "unix", "redis+sentinel"), "redis://localhost:6379/0"),
    AfterValidator(_redis_url),
]
# slack_sdk joins base_url and a method's name by plain concatenation.
SlackApiUrl = Annotated[
    HttpUrl, AfterValidator(lambda url: url if url.endswith("/") else url + "/")
]


def json_map(value: Any) -> Any:
    return Annotated[dict[str, value], NoDecode, parsed(_json_object)]


JsonObject = json_map(Any)
BotToken = Annotated[SecretStr | None, _token("xoxb-", "a bot token"), "secret (xoxb-…)"]
AppToken = Annotated[SecretStr | None, _token("xapp-", "an app-level token"), "secret (xapp-…)"]
AppPrivateKey = (
    Annotated[SecretStr, AfterValidator(rsa_private_key), "secret (PEM RSA private key)"] | None
)
AppId = Annotated[str, AfterValidator(_app_id), "App ID or client ID"]
ChannelId = Annotated[str, AfterValidator(_channel_id), "channel ID (C…, G…)"]
MemberIds = _comma_list(_member_id, "comma-separated member (U…, W…) and user-group (S…) IDs")
OwnerNames = _comma_list(_owner_name, "comma-separated owner/name")
OwnerName = Annotated[str, AfterValidator(_owner_name)]
SlashCommand = Annotated[str, AfterValidator(_slash_command)]
Namespace = Annotated[str, AfterValidator(_namespace)]
Regex = Annotated[str, AfterValidator(_regex)]
# Written back as every default query carries it.
PromqlSelector = Annotated[
    str,
    AfterValidator(lambda value: selector_text(parse_selector(value))),
    'PromQL label matchers (`label="value"`, …)',
]
Sentinels = Annotated[str | None, AfterValidator(_sentinels)]
Upper = BeforeValidator(lambda value: value.upper() if isinstance(value, str) else value)
