"""`make screenshot`: play the demo to its end in chromium and save the page as a PNG.

    python -m sandbox.screenshot docs/demo-thread.png

The README opens with this picture; regenerating it after a change to the messages keeps the
README honest. It runs the same sandbox and the same visitor as the browser test.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

from bot import logs
from sandbox.demo import DemoError, demo_redis
from sandbox.stack import SandboxConfig, start_sandbox
from sandbox.visitor import (
    chromium_page,
    run_diagnostics,
    scale_up,
    see_it_drain,
    see_it_put_back,
    see_the_incident,
    see_them_come,
    silence_for_four_hours,
)

STEP_MS = 60_000


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m sandbox.screenshot OUTPUT.png", file=sys.stderr)
        return 2
    output = Path(argv[0])
    logs.configure("WARNING")
    with ExitStack() as stack:
        try:
            redis_url, prefix, _ = demo_redis(stack)
        except DemoError as exc:
            print(f"screenshot: {exc}", file=sys.stderr)
            return 1
        # As the browser test plays it: quick, read every second, put back 5 s after the drain.
        config = SandboxConfig(speed=30, metrics_interval_s=1, revert_settle_s=5)
        sandbox = start_sandbox(stack, redis_url, prefix, config)
        print(f"screenshot: playing the demo at {sandbox.page_url}", flush=True)
        with chromium_page(sandbox.page_url) as page:
            root = see_the_incident(page, within_ms=STEP_MS)
            silence_for_four_hours(page, root, within_ms=STEP_MS)
            added, _ = scale_up(page, root, within_ms=STEP_MS)
            run_diagnostics(page, root, within_ms=STEP_MS)
            see_them_come(page, "linux.2xlarge", added, within_ms=STEP_MS)
            see_it_drain(page, root, within_ms=4 * STEP_MS)
            see_it_put_back(page, within_ms=STEP_MS)
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output))
    print(f"screenshot: wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
