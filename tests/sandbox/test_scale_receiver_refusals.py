"""What a receiver of the `webhook` scaler refuses, as docs/backends.md tells one to (and as its
stand-in, `tests.support.fakes.scale_receiver`, must): one table. A receiver recomputes the
HMAC-SHA256 of `<timestamp>:<raw body>` under the shared secret, refuses a timestamp more than
300 s off its clock and a `request_id` it has seen; the stand-in answers 401 with its reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from bot.backends.scale.webhook import sign
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.refusals import Answer, assert_answered

BODY = json.dumps(
    {"runner_type": "linux.2xlarge", "delta": 4, "target": "gpu-pool", "incident_id": "1",
     "requested_by": "alice", "request_id": "r-1"}
).encode()  # fmt: skip

Headers = Callable[[ScaleReceiver], dict[str, str]]


def signed(*, secret: str | None = None, at_s: float = 0, stamp: str | None = None) -> Headers:
    def headers(receiver: ScaleReceiver) -> dict[str, str]:
        when = int(time.time() + at_s)
        signature = sign(secret or receiver.secret, when, BODY)
        return {
            "Content-Type": "application/json",
            "X-Queuepilot-Timestamp": str(when) if stamp is None else stamp,
            "X-Queuepilot-Signature": signature,
        }

    return headers


def refused(reason: str) -> Answer:
    return Answer(401, {"message": reason})


OUTSIDE = refused("timestamp outside the replay window")


# (whether the same request was taken before, its headers), the receiver's answer
ROWS: list[tuple[str, bool, Headers, Answer]] = [
    ("no timestamp", False, lambda receiver: {"X-Queuepilot-Signature": "00"},
     refused("missing or malformed timestamp")),
    ("a timestamp that is no number", False, signed(stamp="soon"),
     refused("missing or malformed timestamp")),
    ("a timestamp past 300 s", False, signed(at_s=-301), OUTSIDE),
    ("a timestamp 300 s ahead", False, signed(at_s=301), OUTSIDE),
    ("another secret's signature", False, signed(secret="another"), refused("signature mismatch")),
    ("a request_id seen before", True, signed(), refused("replayed request")),
]  # fmt: skip


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[ScaleReceiver, httpx.AsyncClient]]:
    fake = ScaleReceiver()
    transport = httpx.ASGITransport(app=fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://receiver.test") as http:
        yield fake, http


@pytest.mark.parametrize(
    ("again", "headers", "expected"), [pytest.param(a, h, e, id=name) for name, a, h, e in ROWS]
)
async def test_the_receiver_refuses_it_so(
    receiver: tuple[ScaleReceiver, httpx.AsyncClient],
    again: bool,
    headers: Headers,
    expected: Answer,
) -> None:
    fake, http = receiver
    if again:
        taken = await http.post("/scale", content=BODY, headers=headers(fake))
        assert taken.status_code == 200
    scaled = len(fake.accepted)

    answer = await http.post("/scale", content=BODY, headers=headers(fake))

    assert_answered(Answer.of(answer), expected)
    assert len(fake.accepted) == scaled, "nothing more was scaled"
