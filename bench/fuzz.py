"""10,000 hostile requests to every endpoint of a running bot: how many 5xx, how many tracebacks,
how many slash commands went unanswered.

Real Grafana and Alertmanager payloads, GitHub's workflow_job delivery (as JSON and as its form
encoding) and Slack interaction and command bodies, mutated in shape
(values replaced by arbitrary JSON or by a value of another JSON type, like `response_urls` as a
string, keys removed), in bytes (flips, cuts, bad percent escapes,
invalid UTF-8) and in headers (missing, garbled, non-numeric or 5,000-digit timestamps), half of
them correctly signed so they get past authentication into the parsers; and well-formed `/queue`
commands with numbers no one means (5,000 digits, `١٢`, `1e999`), each of which must reach the
person as an answer. The bot runs with a real
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bot.app import build_app, build_bot
from bot.config import load_settings
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
SECRET, TOKEN, CHANNEL = "fuzz-secret", "fuzz-token", "C0FUZZ"
GITHUB_SECRET = "fuzz-github-secret"
GITHUB_DELIVERY = json.loads((FIXTURES / "backends/github/workflow_job-queued.json").read_text())
ACTION = {
    "type": "block_actions",
    "user": {"id": "U0ALICE", "username": "alice"},
    "channel": {"id": CHANNEL},
    "container": {"type": "message", "message_ts": "1.2", "channel_id": CHANNEL},
    "trigger_id": "1.2.3",
    "actions": [{"type": "button", "action_id": "incident_ack", "value": "1:u"}],
}
SELECT = {
    **ACTION,
    "response_url": "https://hooks.slack.invalid/1",
    "message": {"ts": "1.2", "blocks": [{"type": "context", "block_id": "incident:1:u"}]},
    "actions": [
        {
            "type": "static_select",
            "action_id": "incident_silence",
            "selected_option": {"value": "3600"},
            "action_ts": "1.5",
        }
    ],
}
SUBMISSION = {
    "type": "view_submission",
    "user": {"id": "U0ALICE", "username": "alice", "team_id": "T1"},
    "team": {"id": "T1", "enterprise_id": "E1"},
    "is_enterprise_install": False,
    "view": {
        "id": "V1",
        "type": "modal",
        "callback_id": "incident_scale_modal",
        "private_metadata": json.dumps({"ref": "1:u", "channel": CHANNEL}),
        "hash": "1.x",
        "app_installed_team_id": "T1",
        "state": {
            "values": {
                "runner_type": {"value": {"selected_option": {"value": "linux.2xlarge"}}},
                "amount": {"value": {"type": "plain_text_input", "value": "4"}},
            }
        },
    },
    "response_urls": [{"block_id": "b", "action_id": "a", "response_url": "https://x.invalid/1"}],
}
INTERACTIONS = [
    ACTION,
    SELECT,
    SUBMISSION,
    {**SUBMISSION, "view": {**SUBMISSION["view"], "callback_id": "incident_scale_confirm"}},
]
COMMAND = f"command=%2Fqueue&text=ack&user_id=U0ALICE&channel_id={CHANNEL}".encode()
WEIRD = [None, True, 0, -1, 2**70, 1.5, "", "x" * 3000, [], {}, [1], {"a": None}, "\u202e"]
# A value of each JSON type, for a field replaced by one of another type (a list as a string).
OF_TYPE = {
    type(None): None,
    bool: True,
    int: 2**70,
    float: -1.5,
    str: "https://x.invalid/1",
    list: [{"a": 1}],
    dict: {"id": 5},
}
# /queue with numbers no one means: thousands of digits, signs, exponents, Unicode digits.
NUMBERS = ["9" * 5000, "-1", "0", "1e999", "١٢", "²", "+١٢", "99999999999999999999", "1_000"]
VERBS = [
    "silence {}",
    "silence {}m",
    "silence {}d",
    "scale linux.2xlarge +{}",
    "scale x {}",
    "ack {}",
]
COMMANDER = "U0BOB"  # commands come from bob, so his answers count the commands answered


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


def _retype(rng: random.Random, value: dict[str, Any]) -> dict[str, Any]:
    """`value` with one field, at any depth, replaced by a value of another JSON type."""
    data = copy.deepcopy(value)
    node: Any = data
    while True:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        child = node[key]
        if isinstance(child, dict | list) and child and rng.random() < 0.6:
            node = child
            continue
        other = [v for t, v in OF_TYPE.items() if not isinstance(child, t)]
        node[key] = copy.deepcopy(rng.choice(other))
        return data


def _command(rng: random.Random, response_url: str) -> bytes:
    """A well-formed, signed /queue whose text carries a hostile number: it must be answered."""
    text = rng.choice(VERBS).format(rng.choice(NUMBERS))
    return urllib.parse.urlencode(
        {
            "command": "/queue",
            "text": text,
            "user_id": COMMANDER,
            "channel_id": CHANNEL,
            "response_url": response_url,
            "trigger_id": f"{rng.random()}",
        }
    ).encode()


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


def _github(rng: random.Random) -> tuple[str, bytes, dict[str, str], bool]:
    """GitHub's delivery mutated in shape or bytes, as JSON or a form, signed (past the check,
    into the parser) or not."""
    payload = _mutate(rng, GITHUB_DELIVERY) if rng.random() < 0.7 else GITHUB_DELIVERY
    form = rng.random() < 0.3
    body = json.dumps(payload).encode()
    if form:
        body = urllib.parse.urlencode({"payload": body.decode()}).encode()
    if rng.random() < 0.3:
        body = _mangle(rng, body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
        "X-GitHub-Event": rng.choice(["workflow_job", "workflow_job", "ping", "push", ""]),
        "X-GitHub-Delivery": f"{rng.random()}",
    }
    roll = rng.random()
    if roll < 0.6:
        digest = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = f"sha256={digest}"
    elif roll < 0.8:
        forged = ["", "sha256=", "sha1=00", "sha256=" + "0" * 64]
        headers["X-Hub-Signature-256"] = rng.choice(forged)
    return "/webhooks/github", body, headers, False


Request = tuple[str, bytes, dict[str, str], bool]  # the last: a command that must be answered


def request(
    rng: random.Random, alerts: list[tuple[str, Any]], response_url: Callable[[], str]
) -> Request:
    if rng.random() < 0.1:
        return _github(rng)
    if rng.random() < 0.5:
        path, payload = rng.choice(alerts)
        body = json.dumps(_mutate(rng, payload)).encode()
        if rng.random() < 0.4:
            body = _mangle(rng, body)
        headers = {"Content-Type": rng.choice(["application/json", "text/plain"])}
        if rng.random() < 0.8:
            headers["Authorization"] = f"Bearer {TOKEN}"
        return path, body, headers, False
    kind = rng.random()
    if kind < 0.15:
        body = _command(rng, response_url())
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return "/slack/events", body, headers | _signed(body, time.time()), True
    if kind < 0.5:
        base = rng.choice(INTERACTIONS)
        payload = _retype(rng, base) if rng.random() < 0.5 else _mutate(rng, base)
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
    elif kind < 0.75:
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
    return "/slack/events", body, headers, False


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
    commands = 0
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
            github_webhook_secret=GITHUB_SECRET,
            log_level="WARNING",
        )

        def response_url() -> str:
            with emulator.workspace() as ws:
                token = ws.ui.new_response_url(CHANNEL, COMMANDER, None)
            return f"{slack.url}/_emulator/respond/{token}"

        with (
            serve_in_thread(build_app(build_bot(settings)), port=free_port()) as bot,
            httpx.Client(base_url=bot.url, timeout=10) as http,
        ):
            started = time.perf_counter()
            for _ in range(count):
                path, body, headers, must_answer = request(rng, alerts, response_url)
                try:
                    status = http.post(path, content=body, headers=headers).status_code
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    status = 599  # the connection closed without an answer
                statuses[status] += 1
                commands += must_answer and status == 200
            took = time.perf_counter() - started
            answered = _answers_settled(emulator, commands)
            alive = http.get("/healthz").status_code
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    shown = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
    print(f"fuzz ({count} hostile requests across all endpoints, {took:.0f} s):")
    print(
        f"  {server_errors} answers of 5xx (599: no answer at all), {tracebacks.count} tracebacks "
        f"logged, /healthz {alive} afterwards"
    )
    print(
        f"  /queue with hostile numbers: {commands} acknowledged, {commands - answered} of them "
        "unanswered to the person"
    )
    print(f"  answers: {shown}")


def _answers_settled(emulator: SlackEmulator, expected: int, timeout: float = 30.0) -> int:
    """How many answers the commander got, once all `expected` came or `timeout` passed (the
    last commands' answers are posted after their acknowledgement)."""
    deadline = time.monotonic() + timeout
    while True:
        got = sum(1 for m in emulator.ephemerals(CHANNEL) if m.user == COMMANDER)
        if got >= expected or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    run(args.count, args.seed)


if __name__ == "__main__":
    main()
