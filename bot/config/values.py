"""What a setting's value must be, checked as what it is: a duration, a channel ID, a URL, a
Slack ID. Each check's message says what was wrong and how to write it instead, because the
operator reading it has only the variable's name and this line to go on."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, SecretStr

from bot.domain.units import span_seconds

_UNIT_SECONDS = {"ms": 0.001, "s": 1, "min": 60, "d": 86_400}
_UNIT_WORDS = {"ms": "milliseconds", "s": "seconds", "min": "minutes", "d": "days"}
_OFF = ("off", "none", "never")


@dataclass(frozen=True)
class DurationIn:
    """A duration setting: `30s`, `10m`, `4h`, `1d`, `1h30m` or `off` (0, where 0 is allowed);
    a bare number is in the setting's own unit, the one its name says
    (`STATUS_INTERVAL_SECONDS=600`)."""

    unit: str
    whole: bool = False

    @property
    def unit_word(self) -> str:
        return _UNIT_WORDS[self.unit]

    def __call__(self, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.lower() in _OFF:
            return 0
        if re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?", text):
            return text
        seconds = span_seconds(text)
        if seconds is None:
            raise ValueError(
                f"{value[:40]!r} is not a duration: write e.g. 30s, 10m, 4h or 1d "
                f"(a bare number is in {self.unit_word})"
            )
        amount = seconds / _UNIT_SECONDS[self.unit]
        if self.whole and not float(amount).is_integer():
            raise ValueError(f"{value[:40]!r} is not a whole number of {self.unit_word}")
        return int(amount) if float(amount).is_integer() else amount


Milliseconds = Annotated[int, BeforeValidator(DurationIn("ms", whole=True))]
Seconds = Annotated[int, BeforeValidator(DurationIn("s", whole=True))]
FractionalSeconds = Annotated[float, BeforeValidator(DurationIn("s"))]
Minutes = Annotated[float, BeforeValidator(DurationIn("min"))]
Days = Annotated[int, BeforeValidator(DurationIn("d", whole=True))]

# Slack's IDs: channels C (public) or G (private, older; D is a DM, no place for incidents);
# members U or W (Enterprise Grid); user groups S.
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,}")
_MEMBER_ID = re.compile(r"[UWS][A-Z0-9]+")


def channel_id(value: str) -> str:
    if value and not _CHANNEL_ID.fullmatch(value):
        what = "a channel name" if value.startswith("#") or value.islower() else "not a channel ID"
        raise ValueError(
            f"{value[:40]!r} is {what}: use the channel's ID (C… or G…; in Slack, open the "
            "channel's details: the ID is at the bottom of About)"
        )
    return value


def slack_member_ids(values: tuple[str, ...]) -> tuple[str, ...]:
    bad = [value for value in values if not _MEMBER_ID.fullmatch(value)]
    if bad:
        raise ValueError(
            f"{bad[0][:40]!r} is not a Slack ID: list member IDs (U…; in Slack, a profile's ⋮ "
            "menu → Copy member ID) or user-group IDs (S…), comma-separated"
        )
    return values


def _without_credentials(value: str) -> str:
    """A URL as an error may repeat it: what could be a user and password (anything before an
    `@`, however malformed the rest) and the query (`?password=`) left out."""
    shown = re.sub(r"[^/@\s]*(?:\s[^/@]*)?@", "•••@", value.split("?", 1)[0])
    return shown[:60]


def _url(schemes: tuple[str, ...], example: str) -> Callable[[str | None], str | None]:
    def check(value: str | None) -> str | None:
        if value is None:
            return None
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

    check.kind = f"URL ({', '.join(s + '://' for s in schemes)})"  # type: ignore[attr-defined]
    return check


HttpUrl = Annotated[str, AfterValidator(_url(("http", "https"), "https://host:port"))]
OptionalHttpUrl = Annotated[str | None, AfterValidator(_url(("http", "https"), "https://host"))]
RedisUrl = Annotated[
    str,
    AfterValidator(_url(("redis", "rediss", "unix", "redis+sentinel"), "redis://localhost:6379/0")),
]


channel_id.kind = "channel ID (C…, G…)"  # type: ignore[attr-defined]
slack_member_ids.kind = "comma-separated member (U…, W…) and user-group (S…) IDs"  # type: ignore[attr-defined]


def token_prefix(prefix: str, what: str) -> Callable[[SecretStr | None], SecretStr | None]:
    """A Slack token of the right kind; the message never repeats the value (a secret)."""

    def check(value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(prefix):
            raise ValueError(f"not {what} ({prefix}…)")
        return value

    check.kind = f"secret ({prefix}…)"  # type: ignore[attr-defined]
    return check


def owner_names(values: tuple[str, ...]) -> tuple[str, ...]:
    bad = [value for value in values if not re.fullmatch(r"[^/\s]+/[^/\s]+", value)]
    if bad:
        raise ValueError(f"{bad[0][:60]!r} is not owner/name: list e.g. pytorch/pytorch")
    return values


owner_names.kind = "comma-separated owner/name"  # type: ignore[attr-defined]


_PEM_FIX = (
    "paste the whole .pem file the App's settings page generated (from -----BEGIN RSA PRIVATE "
    "KEY----- to -----END RSA PRIVATE KEY-----); on one line, as env files and Kubernetes "
    "Secrets from --from-env-file carry it, write \\n for each line break"
)


def rsa_private_key(value: SecretStr | None) -> SecretStr | None:
    """A GitHub App's private key: PEM, RSA, unencrypted, as GitHub generates it. A line of an
    env file may carry it with a literal `\\n` for each line break: those are made line breaks
    (a PEM has no backslash). The message never repeats the value (a secret)."""
    if value is None:
        return None
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


rsa_private_key.kind = "secret (PEM RSA private key)"  # type: ignore[attr-defined]


def app_or_client_id(value: str) -> str:
    """A GitHub App's ID (digits) or client ID (Iv…): the JWT's issuer."""
    if value and not re.fullmatch(r"[0-9A-Za-z._-]+", value):
        raise ValueError(
            f"{value[:40]!r} is not a GitHub App's ID: give its App ID (digits) or its client "
            "ID (Iv…), from the App's settings page (About)"
        )
    return value


app_or_client_id.kind = "App ID or client ID"  # type: ignore[attr-defined]
