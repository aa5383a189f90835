"""GitHub's REST API for self-hosted runners and workflow jobs, shaped like the real one
(`../shared/fixtures/github/README.md`): bearer token, `link` pagination with URLs the client
must follow as given, ETags with 304 answers that cost no quota, `x-ratelimit-*` headers on every
answer, and rate-limit refusals a test switches on, as GitHub's docs describe them ("Rate limits
for the REST API", "Exceeding the rate limit"): 403 or 429, the primary limit with
`x-ratelimit-remaining: 0` until `x-ratelimit-reset`, a secondary one with its own message and a
`retry-after` or not. `GET /rate_limit` answers the token's quota
without spending it, as GitHub's does; paths under `forbidden` answer 403 as GitHub answers a
fine-grained token without the permission. The quota (`sandbox.github_quota`) may be shared with
the issues' stand-in (`one_github`): one token, one hour's requests, counted, refused at zero with
`x-ratelimit-remaining: 0` until its reset. ETags are the token's, as GitHub's (`Vary:
Authorization`; GitHub support, eclipse-csi/otterdog#201): another token's ETag is a 200.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandbox.github_issues import GithubIssues
from sandbox.github_quota import GithubQuota


@dataclass
class FakeGithub:
    token: str = "ghp-test"
    runners: list[dict[str, Any]] = field(default_factory=list)
    # repo -> runs (each: id, status, jobs)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    page_size: int = 2
    quota: GithubQuota = field(default_factory=GithubQuota)
    clock: Callable[[], float] = time.time  # epoch seconds, as `x-ratelimit-reset`
    # Set by a test: the next answers are refused as past GitHub's primary limit (the hour's
    # quota) or a secondary one, with `limit_status` (GitHub answers either 403 or 429).
    limit: Literal["primary", "secondary"] | None = None
    limit_status: int = 403
    retry_after: int | None = None  # a secondary limit's `retry-after`, when it gives one
    reset_at: int | None = None  # `x-ratelimit-reset` (epoch seconds); None: in an hour
    calls: list[str] = field(default_factory=list)
    spent_at: list[float] = field(default_factory=list)  # when each counted request came
    base_url: str = ""
    # Path prefixes the token may not read ("/orgs/pytorch/actions/runners").
    forbidden: set[str] = field(default_factory=set)

    def runner(self, rid: int, *labels: str, status: str = "online", busy: bool = False) -> None:
        generic = [{"id": 5, "name": "self-hosted", "type": "read-only"},
                   {"id": 7, "name": "X64", "type": "read-only"},
                   {"id": 11, "name": "Linux", "type": "read-only"}]  # fmt: skip
        custom = [{"id": 3000 + i, "name": name, "type": "custom"} for i, name in enumerate(labels)]
        self.runners.append(
            {
                "id": rid,
                "runner_group_id": 1,
                "name": f"i-{rid:016x}",
                "os": "linux",
                "status": status,
                "busy": busy,
                "ephemeral": True,
                "version": "2.328.0",
                "labels": generic + custom,
            }
        )

    def run(
        self,
        repo: str,
        run_id: int,
        status: str,
        jobs: list[dict[str, Any]],
        *,
        name: str = "pull",
        event: str = "pull_request",
        head_branch: str = "fix-sdpa-mask",
        conclusion: str | None = None,
        run_attempt: int = 1,
        listed_as: str | None = None,
    ) -> None:
        """A workflow run (the `workflow-run` schema's fields the bot reads) and its jobs, which
        carry the run's id, workflow name, branch and attempt as GitHub's `job` schema does.

        `listed_as`: the status the `?status=` filter finds it under, when that lags behind its
        real status (a run that completed while its jobs still say queued: a ghost)."""
        for job in jobs:
            job.update(
                run_id=run_id, workflow_name=name, head_branch=head_branch,
                run_attempt=run_attempt,
                run_url=f"{self.base_url}/repos/{repo}/actions/runs/{run_id}",
                html_url=f"https://github.com/{repo}/actions/runs/{run_id}/job/{job['id']}",
            )  # fmt: skip
        self.runs.setdefault(repo, []).append(
            {"id": run_id, "status": status, "jobs": jobs, "name": name, "event": event,
             "head_branch": head_branch, "conclusion": conclusion, "run_attempt": run_attempt,
             "listed_as": listed_as or status, "updated_at": _iso(self.clock())}
        )  # fmt: skip

    def touch(self, run: dict[str, Any]) -> None:
        """A run changed (a job of it did, or its status): GitHub moves its `updated_at`."""
        run["updated_at"] = _iso(self.clock())

    @property
    def remaining(self) -> int:
        return self.quota.rate(self.token, self.clock())["remaining"]

    @remaining.setter
    def remaining(self, value: int) -> None:
        self.quota.set_remaining(self.token, self.clock(), value)

    @staticmethod
    def job(
        job_id: int,
        labels: list[str],
        status: str,
        created_at: str,
        *,
        name: str = "linux-jammy-py3.10-gcc11 / test",
        conclusion: str | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
        runner_name: str = "i-77",
    ) -> dict[str, Any]:
        queued = status == "queued"
        # `started_at` is the time queued until a runner takes the job (actions/runner#1881).
        started = started_at or created_at
        return {
            "id": job_id, "name": name, "status": status, "conclusion": conclusion,
            "created_at": created_at, "started_at": started, "completed_at": completed_at,
            "labels": labels, "steps": [],
            "runner_id": None if queued else 77, "runner_name": None if queued else runner_name,
            "runner_group_id": None if queued else 1,
            "runner_group_name": None if queued else "Default",
        }  # fmt: skip

    # -- HTTP ----------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = self.quota.headers(self.token, self.clock())
        if self.reset_at is not None:
            headers["x-ratelimit-reset"] = str(self.reset_at)
        return headers

    def _page(
        self, request: Request, items: list[Any], key: str, path: str, extra: dict
    ) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse(
                {"message": "Bad credentials"}, status_code=401, headers=self._headers()
            )
        if any(request.url.path.startswith(prefix) for prefix in self.forbidden):
            return JSONResponse(
                {
                    "message": "Resource not accessible by personal access token",
                    "documentation_url": "https://docs.github.com/rest",
                    "status": "403",
                },
                status_code=403,
                headers=self._headers(),
            )
        if self.limit is not None:
            return self._limited()
        if self.quota.exhausted(self.token, self.clock()):
            return self._limited("primary")
        per_page = int(request.query_params.get("per_page", "30"))
        per_page = min(per_page, self.page_size)
        page = int(request.query_params.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        body = {"total_count": len(items), key: chunk, **extra}
        raw = json.dumps(body).encode()
        seen = request.headers["authorization"].encode() + raw
        etag = 'W/"' + hashlib.sha256(seen).hexdigest()[:32] + '"'
        headers = {**self._headers(), "etag": etag}
        if page * per_page < len(items):
            status = request.query_params.get("status")
            query = f"per_page={per_page}&page={page + 1}" + (f"&status={status}" if status else "")
            headers["link"] = f'<{self.base_url}{path}?{query}>; rel="next"'
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)  # free: no quota used
        self.quota.spend(self.token, self.clock())
        self.spent_at.append(self.clock())
        return Response(raw, headers={**headers, **self._headers()}, media_type="application/json")

    def _limited(self, limit: Literal["primary", "secondary"] | None = None) -> Response:
        """GitHub's refusal past a limit: its headers, and its body (`message`, with a request ID
        the real one varies, and `documentation_url`)."""
        headers = self._headers()
        request_id = "D24F:221686:28BC1:9F91F:69D56197"
        if (limit or self.limit) == "primary":
            headers["x-ratelimit-remaining"] = "0"
            headers["x-ratelimit-used"] = headers["x-ratelimit-limit"]
            message = (
                "API rate limit exceeded for user ID 1234567. If you reach out to GitHub Support "
                f"for help, please include the request ID {request_id}."
            )
            anchor = ""
        else:
            if self.retry_after is not None:
                headers["retry-after"] = str(self.retry_after)
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes before you "
                "try again. If you reach out to GitHub Support for help, please include the "
                f"request ID {request_id}."
            )
            anchor = "#about-secondary-rate-limits"
        body = {
            "message": message,
            "documentation_url": (
                f"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api{anchor}"
            ),
        }
        return JSONResponse(body, status_code=self.limit_status, headers=headers)

    @property
    def app(self) -> Starlette:
        async def org_runners(request: Request) -> Response:
            self.calls.append(str(request.url))
            # Next pages point elsewhere, as GitHub's do: the client must follow them as given.
            return self._page(
                request, self.runners, "runners", "/organizations/1/actions/runners", {}
            )

        async def runs(request: Request) -> Response:
            self.calls.append(str(request.url))
            repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
            status = request.query_params.get("status")
            chosen = [
                {**{k: v for k, v in r.items() if k not in ("jobs", "listed_as")},
                 "url": f"{self.base_url}/repos/{repo}/actions/runs/{r['id']}",
                 "html_url": f"https://github.com/{repo}/actions/runs/{r['id']}",
                 "repository": {"full_name": repo}}
                for r in self.runs.get(repo, []) if status in (None, r["listed_as"])
            ]  # fmt: skip
            return self._page(request, chosen, "workflow_runs", f"/repos/{repo}/actions/runs", {})

        async def jobs(request: Request) -> Response:
            self.calls.append(str(request.url))
            repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
            run_id = int(request.path_params["run_id"])
            run = next((r for r in self.runs.get(repo, []) if r["id"] == run_id), None)
            if run is None:
                return JSONResponse({"message": "Not Found"}, status_code=404)
            path = f"/repos/{repo}/actions/runs/{run_id}/jobs"
            return self._page(request, run["jobs"], "jobs", path, {})

        async def rate_limit(request: Request) -> Response:
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse(
                    {"message": "Bad credentials"}, status_code=401, headers=self._headers()
                )
            headers = self._headers()
            core = {**self.quota.rate(self.token, self.clock()),
                    "reset": int(headers["x-ratelimit-reset"])}  # fmt: skip
            return JSONResponse({"resources": {"core": core}, "rate": core}, headers=headers)

        return Starlette(
            routes=[
                Route("/rate_limit", rate_limit),
                Route("/orgs/{org}/actions/runners", org_runners),
                Route("/organizations/{org_id}/actions/runners", org_runners),
                Route("/repos/{owner}/{repo}/actions/runs", runs),
                Route("/repos/{owner}/{repo}/actions/runs/{run_id:int}/jobs", jobs),
            ]
        )


def one_github(actions: FakeGithub, issues: GithubIssues) -> Callable[..., Any]:
    """One GitHub under one URL: its Actions API from one stand-in, the rest from the other. Give
    both one `GithubQuota` and one clock for one token's one hour of requests."""
    actions_app, issues_app = actions.app, issues.app

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and ("/actions/" in path or path == "/rate_limit"):
            await actions_app(scope, receive, send)
        else:
            await issues_app(scope, receive, send)

    return app


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
