"""Reading a request body with a size limit, before anything parses or verifies it."""

from __future__ import annotations

from starlette.requests import Request


class BodyTooLarge(Exception):
    """The body (declared or actual) is over the limit; answered with 413."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refusing early on Content-Length and while streaming a body without one."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)
