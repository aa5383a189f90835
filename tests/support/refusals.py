"""A stand-in's refusals as one table: each row a request and the answer the real system gives it,
written from that system's published description (its docs, API description, source), never
from what our code sends.

An `Answer` is compared whole: the status, the body in the real system's shape, and the headers a
row names (None: the header must be absent). Where the real system's words are only partly known
(a request ID inside a message, a wording of which only the shape is documented), the row says
what is known: `Like`, a regular expression the text must match whole, or `Holding`, the fields
an object must carry among others.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any = None
    headers: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, response: httpx.Response) -> Answer:
        """An HTTP answer: its JSON body, else its text (None when it has none)."""
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text or None
        return cls(response.status_code, body, {k.lower(): v for k, v in response.headers.items()})


def assert_answered(answer: Answer, expected: Answer) -> None:
    """`answer` is `expected`: status and body whole, and each header `expected` names."""
    named = {name: answer.headers.get(name.lower()) for name in expected.headers}
    assert Answer(answer.status, answer.body, named) == expected


class Like:
    """Text matching `pattern` whole (re.DOTALL)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and re.fullmatch(self.pattern, other, re.DOTALL) is not None

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Like({self.pattern!r})"


class Holding:
    """An object carrying at least `fields`, each equal to its value here."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and all(
            name in other and other[name] == value for name, value in self.fields.items()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Holding({self.fields!r})"
