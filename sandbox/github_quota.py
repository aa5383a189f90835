"""GitHub's primary rate limit, one quota per principal, for the GitHub stand-ins: the issues API
(`sandbox.github_issues`) and the Actions API (`tests/support/fakes/github_api.py`) consult one
object, so readings and the alert's issue on one token spend one hour's requests, as on GitHub.

From "Rate limits for the REST API": 5,000 requests an hour per user (each GitHub App
installation has its own); the hour starts with the first request after the last one ended and
ends at `x-ratelimit-reset` (epoch seconds); a 304 to a conditional request is not counted;
`GET /rate_limit` is not counted; every answer says `x-ratelimit-limit`, `-remaining`, `-used`,
`-reset` and `-resource`. Past the limit GitHub answers 403 or 429 with
`x-ratelimit-remaining: 0` until the reset (the stand-ins word the refusal).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

WINDOW_S = 3600


@dataclass
class GithubQuota:
    limit: int = 5000
    # principal -> (requests counted, when its hour ends); an hour that ended is replaced.
    windows: dict[str, tuple[int, float]] = field(default_factory=dict)
    # Each hour that ended: (principal, its end, requests counted in it), for the tests.
    ended: list[tuple[str, float, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()  # a stand-in may serve on another thread

    def window(self, who: str, now: float) -> tuple[int, float]:
        """(used, reset) of `who`'s hour; an hour that ended starts again now."""
        with self._lock:
            used, reset = self.windows.get(who, (0, 0.0))
            if now >= reset:
                if reset:
                    self.ended.append((who, reset, used))
                used, reset = 0, now + WINDOW_S
                self.windows[who] = (used, reset)
            return used, reset

    def exhausted(self, who: str, now: float) -> bool:
        return self.window(who, now)[0] >= self.limit

    def spend(self, who: str, now: float, count: int = 1) -> None:
        """One request counted (`count` -1: a 304 given back, as GitHub counts none)."""
        with self._lock:
            used, reset = self.window(who, now)
            self.windows[who] = (max(used + count, 0), reset)

    def set_remaining(self, who: str, now: float, remaining: int) -> None:
        with self._lock:
            _, reset = self.window(who, now)
            self.windows[who] = (max(self.limit - remaining, 0), reset)

    def rate(self, who: str, now: float) -> dict[str, int]:
        """The `core` resource as `GET /rate_limit` answers it."""
        used, reset = self.window(who, now)
        used = min(used, self.limit)
        return {"limit": self.limit, "used": used, "remaining": self.limit - used,
                "reset": int(reset)}  # fmt: skip

    def headers(self, who: str, now: float) -> dict[str, str]:
        rate = self.rate(who, now)
        return {"x-ratelimit-limit": str(rate["limit"]),
                "x-ratelimit-remaining": str(rate["remaining"]),
                "x-ratelimit-used": str(rate["used"]), "x-ratelimit-reset": str(rate["reset"]),
                "x-ratelimit-resource": "core"}  # fmt: skip

    def clear(self) -> None:
        with self._lock:
            self.windows.clear()
