"""GitHub Apps as GitHub's REST API knows them, for the GitHub stand-in (`sandbox.github_issues`):
each App's public key, its installations on an organization or some of its repositories, the
JSON Web Tokens an App authenticates with, and the installation tokens it mints.

As strict as GitHub, from its docs: "Generating a JSON Web Token (JWT) for a GitHub App" (RS256;
`iss` the App's ID or client ID, which finds the key; `exp` no more than ten minutes into the
future; a JWT only as `Authorization: Bearer`), "Generating an installation access token" and
"REST API endpoints for GitHub Apps" (an installation token lasts an hour; its answer's
`permissions` and `repository_selection`; 401 for an expired one). The refusals' words are
GitHub's as its users quote them (octokit/auth-app.js#698 and #375, github3.py#1050,
actions/create-github-app-token#153): a JWT signed with another key, or naming an unknown App,
"could not be decoded".
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

NOT_DECODED = "A JSON web token could not be decoded"
TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
EXPIRED = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
    "which the assertion expires"
)
NOT_ISSUED = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was "
    "issued"
)
JWT_MAX_S = 600  # `exp` at most ten minutes ahead of GitHub's clock
TOKEN_LIFETIME_S = 3600
# What an App asks for on its settings page, as an installation grants it.
READER_PERMISSIONS = {"issues": "write", "metadata": "read", "actions": "read"}


class JwtRefused(Exception):
    """A JWT GitHub would not take: its message, as GitHub words it (401)."""


@dataclass
class Installation:
    id: int
    app_id: str
    account: str  # the organization's (or user's) login
    repos: frozenset[str] | None  # lower-case owner/name; None: all of the account's
    permissions: dict[str, str]

    def covers(self, full_name: str) -> bool:
        owner = full_name.split("/")[0].lower()
        return owner == self.account.lower() and (
            self.repos is None or full_name.lower() in self.repos
        )


@dataclass(frozen=True)
class AppToken:
    installation: Installation
    expires_at: float


@dataclass
class GithubApps:
    # The App's ID (and its client ID, when registered) -> its public key (PEM), as GitHub keeps
    # the key of each private key an App's owner generated.
    keys: dict[str, str] = field(default_factory=dict)
    installations: dict[int, Installation] = field(default_factory=dict)
    client_ids: dict[str, str] = field(default_factory=dict)  # client ID -> App ID
    tokens: dict[str, AppToken] = field(default_factory=dict)  # the minted installation tokens
    minted: int = 0

    def register(self, app_id: str, public_key: str, *, client_id: str | None = None) -> None:
        self.keys[app_id] = public_key
        if client_id:
            self.keys[client_id] = public_key
            self.client_ids[client_id] = app_id

    def install(
        self,
        app_id: str,
        account: str,
        *,
        repos: tuple[str, ...] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> Installation:
        """The App installed on `account`: on its `repos` only, or (None) on all of them."""
        number = 40_000_000 + len(self.installations) + 1
        chosen = frozenset(r.lower() for r in repos) if repos is not None else None
        granted = dict(READER_PERMISSIONS if permissions is None else permissions)
        installation = Installation(number, app_id, account, chosen, granted)
        self.installations[number] = installation
        return installation

    def app_of(self, authorization: str, now: float) -> str:
        """The App a JWT authenticates, or JwtRefused."""
        scheme, _, jwt = authorization.partition(" ")
        parts = jwt.strip().split(".")
        if scheme != "Bearer" or len(parts) != 3:
            raise JwtRefused(NOT_DECODED)
        try:
            header, claims = (json.loads(_unb64(part)) for part in parts[:2])
            signature = _unb64(parts[2])
        except ValueError:
            raise JwtRefused(NOT_DECODED) from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise JwtRefused(NOT_DECODED)
        pem = self.keys.get(str(claims.get("iss")))
        if header.get("alg") != "RS256" or pem is None:
            raise JwtRefused(NOT_DECODED)
        key = load_pem_public_key(pem.encode())
        assert isinstance(key, rsa.RSAPublicKey)
        signed = f"{parts[0]}.{parts[1]}".encode()
        try:
            key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise JwtRefused(NOT_DECODED) from None
        issued, expires = claims.get("iat"), claims.get("exp")
        if not _number(expires) or expires <= now:
            raise JwtRefused(EXPIRED)
        if expires > now + JWT_MAX_S:
            raise JwtRefused(TOO_FAR)
        if not isinstance(issued, int) or isinstance(issued, bool) or issued > now:
            raise JwtRefused(NOT_ISSUED)
        iss = str(claims["iss"])
        return self.client_ids.get(iss, iss)

    def mint(self, installation: Installation, now: float) -> tuple[str, AppToken]:
        self.minted += 1
        seed = f"{installation.id}:{self.minted}".encode()
        token = "ghs_" + hashlib.sha256(seed).hexdigest()[:36]
        self.tokens[token] = AppToken(installation, now + TOKEN_LIFETIME_S)
        return token, self.tokens[token]

    def revoke(self, token: str) -> None:
        """As `DELETE /installation/token` does (or an owner suspending the installation)."""
        self.tokens.pop(token, None)


def _unb64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (ValueError, TypeError):
        raise ValueError("not base64url") from None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
