"""`python -m sandbox`: the whole loop locally, no Slack workspace needed (what `make demo` runs).

The sandbox (the local Slack, the simulated fleet, the demo) lives in the checkout and is not
installed with queuepilot: the production command line (`queuepilot serve`) does not carry it.
"""

from __future__ import annotations

import argparse
import sys

from sandbox.fleet import DEMO_SPEED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument(
        "--once", action="store_true", help="replay a canned alert's life in the terminal, exit"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=DEMO_SPEED,
        help=f"simulated fleet seconds per real second (default {DEMO_SPEED:g}: a person can "
        "follow each step; 30 plays it in a few minutes)",
    )
    parser.add_argument(
        "--until-resolved", action="store_true", help="stop once the incident has resolved"
    )
    parser.add_argument(
        "--socket-mode",
        action="store_true",
        help="the bot takes Slack's traffic over Socket Mode (an app-level token) instead of HTTP",
    )
    parser.add_argument(
        "--stall-listener",
        action="store_true",
        help="linux.2xlarge's ARC listener stops taking jobs: diagnostics should say so",
    )
    parser.add_argument(
        "--pilot",
        action="store_true",
        help="the pilot on linux.2xlarge and the GPU type: it scales up on its own within a "
        "policy, once the advice held; the GPU type's it declines (its pods cannot start)",
    )
    parser.add_argument(
        "--edits",
        action="store_true",
        help="the terminal also prints every edit of a root message (its numbers, each reading)",
    )
    args = parser.parse_args(argv)
    if args.once and args.socket_mode:
        parser.error(
            "--once replays in the terminal, with no Slack to connect to: drop --socket-mode"
        )
    if args.once:
        from sandbox.demo import run_demo

        return run_demo()
    if args.speed <= 0:
        parser.error("--speed must be positive")
    from sandbox.live_demo import run_live_demo

    return run_live_demo(
        speed=args.speed,
        until_resolved=args.until_resolved,
        socket_mode=args.socket_mode,
        stall_listener=args.stall_listener,
        pilot=args.pilot,
        edits=args.edits,
    )


if __name__ == "__main__":
    sys.exit(main())
