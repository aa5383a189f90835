"""10,000 hostile requests to every endpoint of a running bot: how many 5xx, how many tracebacks.

Real Grafana and Alertmanager payloads and Slack interaction and command bodies, mutated in shape
(values replaced by arbitrary JSON, keys removed), in bytes (flips, cuts, bad percent escapes,
invalid UTF-8) and in headers (missing, garbled, non-numeric or 5,000-digit timestamps), half of
them correctly signed so they get past authentication into the parsers. The bot runs with a real
redis-server and the Slack emulator, like `make demo`.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import hmac
import json
import logging
import random
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bot.app import build_app, build_bot
from bot.config import load_settings
from bot.sandbox.redis_server import RedisServer, free_port
from bot.sandbox.serve import serve_in_thread
from bot.sandbox.slack_api import SlackEmulator

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
SECRET, TOKEN, CHANNEL = "fuzz-secret", "fuzz-token", "C0FUZZ"
ACTION = {
    "type": "block_actions",
    "user": {"id": "U0ALICE", "username": "alice"},
    "channel": {"id": CHANNEL},
    "container": {"type": "message", "message_ts": "1.2", "channel_id": CHANNEL},
    "trigger_id": "1.2.3",
    "actions": [{"type": "button", "action_id": "incident_ack", "value": "1:u"}],
}
COMMAND = f"command=%2Fqueue&text=ack&user_id=U0ALICE&channel_id={CHANNEL}".encode()
WEIRD = [None, True, 0, -1, 2**70, 1.5, "", "x" * 3000, [], {}, [1], {"a": None}, "\u202e"]


def _mutate(rng: random.Random, value: Any) -> Any:
    data = copy.deepcopy(value)
    for _ in range(rng.randint(1, 3)):
        node, key = data, None
        while isinstance(node, dict | list) and node and rng.random() < 0.7:
            key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        if isinstance(node, dict) and node:
            key = key if key in node else rng.choice(list(node))
            if rng.random() < 0.3:
                node.pop(key)
            else:
                node[key] = copy.deepcopy(rng.choice(WEIRD))
        elif isinstance(node, list) and node:
            node[rng.randrange(len(node))] = copy.deepcopy(rng.choice(WEIRD))
        else:
            data = copy.deepcopy(rng.choice(WEIRD))
    return data


def _mangle(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        at = rng.randrange(len(data))
        choice = rng.random()
        if choice < 0.4:
            data[at] = rng.randrange(256)
        elif choice < 0.7:
            data[at:at] = rng.choice([b"%", b"%zz", b"%ff", b"\xff\xfe", b"&", b"="])
        else:
            del data[at:]
    return bytes(data)


def _signed(body: bytes, at: float) -> dict[str, str]:
    timestamp = str(int(at))
    digest = hmac.new(SECRET.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": "v0=" + digest.hexdigest()}


def request(rng: random.Random, alerts: list[tuple[str, Any]]) -> tuple[str, bytes, dict[str, str]]:
    if rng.random() < 0.5:
        path, payload = rng.choice(alerts)
        body = json.dumps(_mutate(rng, payload)).encode()
        if rng.random() < 0.4:
            body = _mangle(rng, body)
        headers = {"Content-Type": rng.choice(["application/json", "text/plain"])}
        if rng.random() < 0.8:
            headers["Authorization"] = f"Bearer {TOKEN}"
        return path, body, headers
    kind = rng.random()
    if kind < 0.4:
        body = urllib.parse.urlencode({"payload": json.dumps(_mutate(rng, ACTION))}).encode()
    elif kind < 0.7:
        body = _mangle(rng, rng.choice([COMMAND, b"payload=" + json.dumps(ACTION).encode()]))
    else:
        body = rng.choice([b"payload=1", b"payload=[1]", b"payload=%zz", COMMAND, b""])
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    roll = rng.random()
    if roll < 0.5:
        headers |= _signed(body, time.time())
    elif roll < 0.8:
        headers |= {
            "X-Slack-Request-Timestamp": rng.choice(["", "soon", "1" * 5000, "-5", "1e9", "0"]),
            "X-Slack-Signature": rng.choice(["", "v0=", "v0=" + "0" * 64, "garbage"]),
        }
    return "/slack/events", body, headers


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.count += 1


def run(count: int, seed: int) -> None:
    rng = random.Random(seed)
    alerts = [
        (f"/alerts/{path.parent.name}", json.loads(path.read_text()))
        for path in sorted(FIXTURES.glob("*/*.json"))
    ]
    tracebacks = _Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    logging.getLogger().setLevel(logging.WARNING)
    emulator = SlackEmulator(token="xoxb-fuzz", channels=(CHANNEL,))
    statuses: Counter[int] = Counter()
    with RedisServer() as redis, serve_in_thread(emulator.app) as slack:
        settings = load_settings(
            _env_file=None,
            slack_app_token=None,
            slack_bot_token="xoxb-fuzz",
            slack_signing_secret=SECRET,
            slack_api_url=f"{slack.url}/api/",
            slack_channel=CHANNEL,
            redis_url=redis.url,
            alert_webhook_token=TOKEN,
            log_level="WARNING",
        )
        with (
            serve_in_thread(build_app(build_bot(settings)), port=free_port()) as bot,
            httpx.Client(base_url=bot.url, timeout=10) as http,
        ):
            started = time.perf_counter()
            for _ in range(count):
                path, body, headers = request(rng, alerts)
                try:
                    statuses[http.post(path, content=body, headers=headers).status_code] += 1
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    statuses[599] += 1  # the connection closed without an answer
            took = time.perf_counter() - started
            alive = http.get("/healthz").status_code
    server_errors = sum(n for status, n in statuses.items() if 500 <= status < 599)
    shown = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()) if status != 599)
    print(f"fuzz ({count} hostile requests across all endpoints, {took:.0f} s):")
    print(
        f"  {server_errors} answers of 5xx, {tracebacks.count} tracebacks logged, "
        f"/healthz {alive} afterwards"
    )
    print(f"  answers: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    run(args.count, args.seed)


if __name__ == "__main__":
    main()
