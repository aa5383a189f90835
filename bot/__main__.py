"""`queuepilot serve | check | send`: the command line (the local demo is `python -m sandbox`,
from the checkout: `make demo`)."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from pathlib import Path

from bot.config import SettingsError, Startup, read_startup
from bot.telemetry import queuepilot_version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="queuepilot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"queuepilot {queuepilot_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the production server (reads the environment and .env)")
    check = commands.add_parser(
        "check",
        help="check the settings and every dependency they configure (Slack, Redis, …), as "
        "serve would use them; exit 1 if anything would fail",
    )
    check.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: one document for CI, each check's name, status (ok, warn, fail), message "
        "and fix",
    )
    send = commands.add_parser("send", help="POST an alert payload file to a running bot")
    send.add_argument("file", type=Path)
    send.add_argument("--url", default="http://127.0.0.1:3000", help="the bot's base URL")
    send.add_argument("--source", choices=["grafana", "alertmanager"], default=None)
    send.add_argument("--token", default=None, help="bearer token (default: ALERT_WEBHOOK_TOKEN)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve()
    if args.command == "check":
        from bot.checks.run import main as run_checks

        return run_checks(os.environ, sys.stdout, as_json=args.format == "json")
    return _send(args.file, args.url, args.source, args.token)


def _serve() -> int:
    import uvicorn

    from bot import logs
    from bot.app import build_app, build_bot
    from bot.storage.connection import RedisSetupError, refuse_cluster

    # What `check` says of the settings, read the same way (one function for both).
    startup = read_startup()
    settings = startup.settings
    if settings is None:
        _refuse(startup.problems, startup)
        return 2
    try:
        # Before anything is built: what Bolt and the backends log as they are made is JSON too.
        logs.configure(settings.log_level)
        # Building the backends can still find a setting unusable (an unreadable kubeconfig).
        bot = build_bot(settings)
    except SettingsError as exc:
        _refuse(exc.problems, startup)
        return 2
    log = logging.getLogger("queuepilot")
    for near_miss in startup.near_misses:
        log.warning("%s (ignored)", near_miss)
    for warning in startup.warnings:
        log.warning("%s", warning)
    try:
        refuse_cluster(settings.redis_url, settings.sentinel())
    except RedisSetupError as exc:
        print(f"queuepilot: configuration error: {exc}", file=sys.stderr)
        return 2
    app = build_app(bot)
    # Everything built at start out of the collector's view: a full collection otherwise walks it
    # all every few thousand requests, tens of milliseconds in a burst of webhooks (their p99).
    gc.collect()
    gc.freeze()
    # No access log: a line per request is CPU the intake needs under load.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        lifespan="on",
        access_log=False,
        # Without a bound uvicorn waits for a stalled client until Kubernetes kills the pod,
        # and the lifespan's orderly stop (the lease given up) never runs.
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )
    return 0


def _refuse(problems: list[str], startup: Startup) -> None:
    """`serve` will not start: every problem, and the near misses with them, as a misspelt name
    may be why a setting is missing (PROMETHEUS_ULR, so PROMETHEUS_URL is)."""
    for problem in [*problems, *startup.near_misses]:
        print(f"queuepilot: configuration error: {problem}", file=sys.stderr)
    for warning in startup.warnings:
        print(f"queuepilot: warning: {warning}", file=sys.stderr)


def _send(file: Path, url: str, source: str | None, token: str | None) -> int:
    import httpx

    body = file.read_bytes()
    if source is None:
        source = "alertmanager" if json.loads(body).get("version") == "4" else "grafana"
    headers = {"Content-Type": "application/json"}
    token = token or os.environ.get("ALERT_WEBHOOK_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = httpx.post(f"{url.rstrip('/')}/alerts/{source}", content=body, headers=headers)
    print(f"{response.status_code} {response.text}")
    return 0 if response.status_code == 202 else 1


if __name__ == "__main__":
    sys.exit(main())
