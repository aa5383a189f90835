"""Hypothesis strategies for hostile input: arbitrary JSON, and real payloads mutated in shape,
in bytes and in headers, the way an attacker or a broken sender would; and the settings the
property tests share."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import time
import urllib.parse
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# What the property tests share: their budget of examples, a signing secret and a clock.
# QP_PROPERTY_EXAMPLES=5000 for a long hunt; the suite's default keeps it to seconds.
EXAMPLES = int(os.environ.get("QP_PROPERTY_EXAMPLES", "150"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECRET = "prop-secret"
NOW = 1_780_000_000.0

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
# Arbitrary JSON as a backend or Slack might answer it (NaN included), and objects of it.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(st.text(max_size=12), json_values, max_size=6)


def field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += field_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += field_paths(item, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, original: Any) -> Any:
    """`original` with one to three of its parts replaced by arbitrary JSON, or removed."""
    data = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        paths = field_paths(data)
        path = draw(st.sampled_from(paths))
        if not path:
            data = draw(JSON)
            continue
        parent = data
        try:
            for part in path[:-1]:
                parent = parent[part]
        except (KeyError, IndexError, TypeError):
            continue
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(JSON)
    return data


# Numbers as people and broken senders write them: thousands of digits, signs, exponents, and
# digits Python's int() reads although no one means them (`int('١٢') == 12`) or refuses ('²').
HOSTILE_NUMBERS = st.sampled_from(
    ["9" * 5000, "-1", "0", "+0", "1e999", "١٢", "+١٢", "²", "1_000", "0x1f", "9" * 25, " 7", "NaN"]
) | st.integers(min_value=-(10**30), max_value=10**30).map(str)
# One value of each JSON type, hostile within its type.
JSON_OF_TYPE = {
    "null": st.none(),
    "bool": st.booleans(),
    "number": st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False),
    "string": st.text(max_size=40) | HOSTILE_NUMBERS | st.just("x" * 5000),
    "list": st.lists(JSON, max_size=3)
    | st.lists(
        st.dictionaries(st.text(max_size=8), JSON_SCALARS, max_size=3), min_size=1, max_size=2
    ),
    "object": st.dictionaries(st.text(max_size=12), JSON, max_size=4),
}


@st.composite
def field_replaced(draw: st.DrawFn, original: dict[str, Any]) -> dict[str, Any]:
    """`original` with one of its fields (at any depth) missing, or holding a value of one JSON
    type, every type in turn: what a sender that gets one field's shape wrong sends."""
    data = copy.deepcopy(original)
    path = draw(st.sampled_from([path for path in field_paths(data) if path]))
    kind = draw(st.sampled_from(["missing", *JSON_OF_TYPE]))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    if kind == "missing" and isinstance(parent, dict):
        del parent[path[-1]]
    elif kind != "missing":
        parent[path[-1]] = draw(JSON_OF_TYPE[kind])
    return data


@st.composite
def mangled_bytes(draw: st.DrawFn, original: bytes) -> bytes:
    """`original` with bytes flipped, cut or inserted: invalid UTF-8, bad escapes, truncation."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        if action == "flip":
            data[at] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[at]
        elif action == "insert":
            data[at:at] = draw(
                st.sampled_from([b"%", b"%zz", b"%ff", b"\xff\xfe", b"&", b"=", b"\x00"])
            )
        else:
            del data[at:]
    return bytes(data)


def slack_signed(body: bytes, secret: str, *, at: float | None = None) -> dict[str, str]:
    """Headers Slack would send with `body` (v0 signature over the raw bytes)."""
    timestamp = str(int(at if at is not None else time.time()))
    base = b"v0:" + timestamp.encode() + b":" + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


def interaction_body(payload: Any) -> bytes:
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60
) | st.sampled_from(["", "0", "-1", "1" * 5000, "v0=" + "0" * 64, "١٢٣", "1e9", " 12"])
# What of HEADER_TEXT a client can send: httpx sends only ASCII header values without
# surrounding whitespace.
SENDABLE_HEADER = HEADER_TEXT.map(str.strip).filter(str.isascii)
