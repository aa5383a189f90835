"""A visitor on the local Slack page, played by Playwright in Debian's chromium.

The browser end-to-end test and `make screenshot` both walk the demo this way: read the incident,
choose Silence 1h, scale up through the modal and see its runners register, run diagnostics, and
wait for the drained queue's summary. Each step waits for what a person would wait for on the
page (Playwright's `expect` retries until it holds or the step's time runs out), never for a
fixed time.

Playwright is a development dependency: this module is imported only by the test and the
screenshot target, never by the bot.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from playwright.sync_api import Page, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

# Headless chromium on a closed network: no background connections, no GPU, and no sandbox
# (CI runs as root, where chromium's own sandbox cannot start).
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
)
VIEWPORT = {"width": 1500, "height": 1000}
TITLE = "Jobs queueing in autoscaled machines"
SUMMARY = re.compile(r"Incident \d+ resolved \(queue drained\)")
STATUS = "Status update ·"
DIAGNOSTICS = "Diagnostics · incident"
T = TypeVar("T")


def chromium_path() -> str | None:
    found = shutil.which("chromium") or "/usr/bin/chromium"
    return found if os.path.exists(found) else None


@contextmanager
def chromium_page(
    url: str, *, timezone: str | None = None, locale: str | None = None
) -> Iterator[Page]:
    """A page of Debian's chromium at `url`, in the machine's time zone and locale unless given;
    page errors fail the visit when it ends."""
    executable = chromium_path()
    if executable is None:
        raise RuntimeError("Debian's chromium is missing: apt-get install chromium")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport=VIEWPORT, timezone_id=timezone, locale=locale)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            yield page
            if errors:
                raise AssertionError(f"the page threw: {errors}")
        finally:
            browser.close()


def see_the_incident(page: Page, *, within_ms: float) -> Any:
    """The incident's root, once it shows the live numbers by runner type."""
    root = find_the_incident(page, TITLE, within_ms=within_ms)
    expect(root).to_contain_text(re.compile(r"linux\.2xlarge: \d+ queued"), timeout=within_ms)
    expect(root).to_contain_text("live from Prometheus", timeout=within_ms)
    return root


def find_the_incident(page: Page, title: str, *, within_ms: float) -> Any:
    """The root titled `title` in the channel shown (an early warning may be there before it)."""
    root = page.locator("#messages article.message", has_text=title).first
    expect(root).to_contain_text(title, timeout=within_ms)
    return root


def open_the_channel(page: Page, name: str) -> None:
    """Choose a channel in the sidebar; its newest incident's thread opens by itself."""
    page.locator("#channels button", has_text=f"# {name}").click()
    expect(page.locator("#channel-name")).to_have_text(f"# {name}")


def silence_for_four_hours(page: Page, root: Any, *, within_ms: float) -> None:
    """Four fleet hours: at ×30 they outlast the walk (8 minutes), so only the bot's own drain
    ends the incident, never the silence running out."""
    root.locator("select[data-action-id=incident_silence]").select_option("14400")
    expect(root.locator("[data-action-id=incident_unsilence]")).to_be_visible(timeout=within_ms)
    expect(root).to_contain_text("silenced until", timeout=within_ms)


def scale_up(page: Page, root: Any, *, within_ms: float) -> tuple[int, str]:
    """Open the scale modal, take what it offers (the root's advice, in a shape the scale set
    accepts), confirm, and see the thread say it; the runners it added, and the advice the
    modal said. The scale set is at its maximum, so the modal raises maxRunners (its default)
    and says the scale-up is put back after the incident."""
    root.locator("[data-action-id=incident_scale]").click()
    modal = page.locator("#overlay .modal")
    expect(modal).to_contain_text("Runner type", timeout=within_ms)
    expect(modal).to_contain_text("Recommended", timeout=within_ms)
    expect(modal.locator("input[type=radio][value=raise_max]")).to_be_checked()
    expect(modal).to_contain_text("Keep it after the incident")
    offered = modal.locator("input[type=number]").input_value()
    assert offered, "the form offers the advice: a number a responder can take as it is"
    runners, advice = int(offered), modal.inner_text()
    modal.locator("button[type=submit]").click()
    expect(modal).to_contain_text(f"+{runners}", timeout=within_ms)  # the confirmation step
    modal.locator("button[type=submit]").click()
    expect(page.locator("#overlay")).to_be_hidden(timeout=within_ms)
    expect(page.locator("#thread")).to_contain_text(
        re.compile(rf"Scaled \S+ by \+{runners}: maxRunners \d+ → \d+ \(ARC\)"), timeout=within_ms
    )
    return runners, advice


def see_them_come(page: Page, runner_type: str, runners: int, *, within_ms: float) -> None:
    """The scale-up followed to its effect: the fleet's ARC boots the runners the patch lets
    it, and the thread says they registered ("+5 on linux.2xlarge at 14:02: 5 registered by
    14:03, …")."""
    came = rf"\+{runners} on {re.escape(runner_type)} at .+?: \d+ registered by"
    expect(page.locator("#thread")).to_contain_text(re.compile(came), timeout=within_ms)


@dataclass(frozen=True)
class Seen:
    """The incident as the page shows it at one moment (one rendering of the emulator's state):
    the root's text and the thread's replies', oldest first, as a person reads them; and the
    moment of the reading each shows, to the second (epoch seconds; None where none is shown):
    the root's "Now · live from … at", a reply's heading. The text shows that moment to the
    minute, as Slack does; the page keeps it whole in a <time> element."""

    version: str
    root: str
    replies: tuple[str, ...]
    root_at: float | None = None
    reply_ats: tuple[float | None, ...] = ()

    def latest(self, marker: str) -> str | None:
        return next((text for text in reversed(self.replies) if marker in text), None)

    def latest_at(self, marker: str) -> float | None:
        """The moment of the reading the latest reply saying `marker` shows."""
        said = zip(reversed(self.replies), reversed(self.reply_ats), strict=True)
        return next((at for text, at in said if marker in text), None)


# The page redraws the channel and the thread together from one state: their texts in one call.
READ = """title => {
  const moment = time => (time ? Date.parse(time.dateTime) / 1000 : null);
  const live = article => [...article.querySelectorAll("time[datetime]")]
    .find(time => /live from .+ at $/.test(time.previousSibling?.textContent || ""));
  const root = [...document.querySelectorAll("#messages article.message")]
    .find(a => a.innerText.includes(title));
  const replies = [...document.querySelectorAll("#thread-messages > article")].slice(1);
  return {
    version: document.body.dataset.version || "",
    root: root ? root.innerText : "",
    rootAt: root ? moment(live(root)) : null,
    replies: replies.map(a => a.innerText),
    replyAts: replies.map(a => moment(a.querySelector("time[datetime]"))),
  };
}"""


def read_the_incident(page: Page) -> Seen:
    seen = page.evaluate(READ, TITLE)
    replies, ats = tuple(seen["replies"]), tuple(seen["replyAts"])
    return Seen(seen["version"], seen["root"], replies, seen["rootAt"], ats)


def wait_for(page: Page, found: Callable[[Seen], T | None], *, within_ms: float, what: str) -> T:
    """What `found` makes of the page once it is not None, read again each time the page
    changes; an AssertionError with the page's last texts when `within_ms` runs out."""
    deadline = time.monotonic() + within_ms / 1000
    while True:
        seen = read_the_incident(page)
        result = found(seen)
        if result is not None:
            return result
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0:
            replies = "\n---\n".join(seen.replies)
            raise AssertionError(
                f"timed out waiting for {what}; root:\n{seen.root}\nreplies:\n{replies}"
            )
        with suppress(PlaywrightTimeout):  # read once more, then give up
            page.wait_for_function(
                "v => document.body.dataset.version !== v", arg=seen.version, timeout=left_ms
            )


def run_diagnostics(page: Page, root: Any, *, within_ms: float) -> None:
    root.locator("[data-action-id=incident_diagnose]").click()
    expect(page.locator("#thread")).to_contain_text("Likely cause", timeout=within_ms)


def ask_the_queue(page: Page, *, within_ms: float) -> Any:
    """Type `/queue` in the composer; the answer shows only to the visitor, in the channel."""
    answers = page.locator("#messages article.ephemeral", has_text="Queue by runner type")
    before = answers.count()
    page.locator("#composer-input").fill("/queue")
    page.locator("#composer-input").press("Enter")
    expect(answers).to_have_count(before + 1, timeout=within_ms)  # this answer, not an earlier
    answer = answers.last
    expect(answer).to_contain_text("Only visible to you", timeout=within_ms)
    return answer


def open_the_home(page: Page, *, within_ms: float) -> Any:
    """Open the app's Home tab from the sidebar; the bot publishes it when Slack says so."""
    page.locator("#home-link").click()
    home = page.locator("#home")
    expect(home).to_contain_text("Open incidents", timeout=within_ms)
    return home


def see_it_drain(page: Page, root: Any, *, within_ms: float) -> None:
    """The summary in the thread, the root marked resolved, the summary's chart shown."""
    thread = page.locator("#thread")
    expect(thread).to_contain_text(SUMMARY, timeout=within_ms)
    expect(root).to_contain_text("Resolved", timeout=within_ms)
    # The summary's trend chart, drawn from its data_visualization block as Slack draws it.
    summary = thread.locator("article", has_text=SUMMARY).last
    expect(summary.locator("figure.block-chart svg .series").first).to_be_visible(timeout=within_ms)


def see_the_issue_linked(root: Any, *, within_ms: float) -> None:
    """The root links the alert's GitHub issue."""
    expect(root.locator("a", has_text=re.compile(r"GitHub issue #\d+"))).to_be_visible(
        timeout=within_ms
    )


def ask_for_the_postmortem(page: Page, *, within_ms: float) -> None:
    """Type `/queue postmortem` in the composer: told it is on its way, then the file in the
    thread."""
    page.locator("#composer-input").fill("/queue postmortem")
    page.locator("#composer-input").press("Enter")
    answer = page.locator("#messages article.ephemeral", has_text="postmortem").last
    expect(answer).to_contain_text("on its way to the thread", timeout=within_ms)
    expect(page.locator("#thread")).to_contain_text("📎 Postmortem · incident", timeout=within_ms)


def see_it_put_back(page: Page, *, within_ms: float) -> None:
    """The scale-up made from Slack put back, once the incident resolved and its queue settled."""
    expect(page.locator("#thread")).to_contain_text(
        re.compile(r"Put \S+ back \(the incident resolved[^)]*\): maxRunners \d+ → \d+ \(ARC\)"),
        timeout=within_ms,
    )
