"""Recovery after Redis restarts and loses everything: how long until a notification accepted
afterwards is a thread in Slack, with the default settings (a 30 s INTAKE_RECLAIM_IDLE_MS, Slack's
own pacing).

Each round stops redis-server, starts it again on the same port with no data, posts a new alert
group the way Grafana does (retrying 503s), and times the 202 and the root message's arrival.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import httpx

from bench import incident_roots
from bot.app import build_app, build_bot
from bot.config import load_settings
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

ALERT = Path(__file__).resolve().parents[1] / "sandbox/alerts/queue-alert-firing.json"
TOKEN, CHANNEL = "recovery-token", "C0RECOVER"


def _until(done, timeout: float = 120.0) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    while not done():
        if time.perf_counter() - started > timeout:
            raise TimeoutError("no recovery within two minutes")
        time.sleep(0.01)
    return time.perf_counter()


def run(rounds: int) -> None:
    base = json.loads(ALERT.read_text())
    emulator = SlackEmulator(token="xoxb-recovery", channels=(CHANNEL,), enforce_rate_limits=True)
    redis = RedisServer()
    redis.start()
    try:
        with serve_in_thread(emulator.app) as slack:
            settings = load_settings(
                _env_file=None,
                slack_app_token=None,
                slack_bot_token="xoxb-recovery",
                slack_signing_secret="recovery",
                slack_api_url=f"{slack.url}/api/",
                slack_channel=CHANNEL,
                redis_url=redis.url,
                alert_webhook_token=TOKEN,
                log_level="ERROR",
            )
            bot = serve_in_thread(build_app(build_bot(settings)), port=free_port())
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            with bot, httpx.Client(base_url=bot.url, headers=headers, timeout=10) as http:
                shown = []
                for n in range(rounds):
                    shown.append(_round(n, base, http, emulator, redis))
    finally:
        redis.stop()
    print(f"recovery after a Redis restart that lost everything ({rounds} rounds, defaults):")
    for accepted, visible in shown:
        print(f"  202 {accepted:.2f} s after the restart; thread {visible:.2f} s after the 202")


def _round(
    n: int, base: dict, http: httpx.Client, emulator: SlackEmulator, redis: RedisServer
) -> tuple[float, float]:
    before = len(incident_roots(emulator, CHANNEL))
    redis.stop()
    redis.start()  # same port, empty
    restarted = time.perf_counter()
    payload = copy.deepcopy(base)
    payload["groupKey"] = f"{base['groupKey']}/recovery-{n}"
    body = json.dumps(payload)
    accepted_at = _until(lambda: http.post("/alerts/grafana", content=body).status_code == 202)
    visible_at = _until(lambda: len(incident_roots(emulator, CHANNEL)) > before)
    return accepted_at - restarted, visible_at - accepted_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
