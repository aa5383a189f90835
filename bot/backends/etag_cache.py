"""The pages GitHub answered, kept for their ETag: an unchanged page asked again is a 304 that
costs no quota. Bounded, least recently used first out: a finished run's `/jobs` never comes
back, so an unbounded cache would grow with every run the organization ever had."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

# A reading asks for one `/jobs` page per active run: a busy organization has hundreds, rarely past
# a thousand, so 4,096 entries hold the working set several times over. A page is kept as GitHub's
# bytes (100-300 KB for 100 jobs), within the cache's share of memory (`bot.config.memory`).
MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Page:
    etag: str
    content: bytes  # as GitHub sent it
    next_url: str | None


class EtagCache:
    def __init__(self, *, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._pages: OrderedDict[str, Page] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, url: str) -> Page | None:
        page = self._pages.get(url)
        if page is not None:
            self._pages.move_to_end(url)
        return page

    def put(self, url: str, page: Page) -> None:
        self.discard(url)
        if len(page.content) > self.max_bytes:
            return  # a page past the whole budget would evict everything and stay alone
        self._pages[url] = page
        self.bytes += len(page.content)
        while len(self._pages) > self.max_entries or self.bytes > self.max_bytes:
            _, oldest = self._pages.popitem(last=False)
            self.bytes -= len(oldest.content)

    def discard(self, url: str) -> None:
        page = self._pages.pop(url, None)
        if page is not None:
            self.bytes -= len(page.content)
