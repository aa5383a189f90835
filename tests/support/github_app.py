"""A GitHub App for the tests: its ID, its key pair (made once per run: RSA is slow to generate),
and JWTs signed with any claims, to see the stand-in refuse what GitHub refuses."""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

APP_ID = "1040123"
CLIENT_ID = "Iv23liQueuePilot0001"


@cache
def key(which: str = "app") -> rsa.RSAPrivateKey:
    """The App's key ("app"), or another one ("other": a key GitHub does not know)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(which: str = "app") -> str:
    return (
        key(which)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,  # GitHub's: BEGIN RSA PRIVATE KEY
            serialization.NoEncryption(),
        )
        .decode()
    )


def public_pem(which: str = "app") -> str:
    return (
        key(which)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def signed(claims: dict[str, Any], *, which: str = "app", alg: str = "RS256") -> str:
    """A JWT of these claims, signed RS256 with `which` key (whatever `alg` the header says)."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    header = part(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = part(json.dumps(claims).encode())
    signature = key(which).sign(f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{body}.{part(signature)}"
