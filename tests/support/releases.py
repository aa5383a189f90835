"""A released version's code, taken from git, to run as a replica beside the checkout's: what an
upgrade or a rollback looks like from Redis and Slack, where a Deployment's pods run both for a
while. Both run `bot`'s `__main__` (`serve`) as processes of their own on one redis-server and one
Slack (the emulator), started from one environment, as a Deployment's pods are from one ConfigMap;
what is checked is what the channel shows."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot.storage.keys import Keys
from sandbox.silence_api import FakeSilenceApi
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.processes import REPO, BotProcess
from tests.support.running import WEBHOOK_TOKEN
from tests.support.scale import RUNNER
from tests.support.slack import CHANNEL, USER, Slack, block_action, ephemeral_texts, signed

# The packages a replica imports; the rest of a release (sandbox, tests, docs) is not shipped.
SHIPPED = ("bot", "handlers")

# `python -m bot serve`, after saying which code it imported: PYTHONPATH or the working
# directory decides, and an editable install of the checkout is one import away.
SERVE_SAYING_WHICH_CODE = (
    "-c",
    "import json, runpy, bot.app, handlers; "
    "print(json.dumps({'imported': {'bot': bot.app.__file__, 'handlers': handlers.__file__}}), "
    "flush=True); "
    "runpy.run_module('bot', run_name='__main__', alter_sys=True)",
    "serve",
)

FIRING = "grafana/queue-alert-firing.json"
RESOLVED = "grafana/queue-alert-resolved.json"
AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"
SCALE_SET = ("arc-runners", "mt-l-x86iavx512-8-64")
STATUS_INTERVAL_S = 1
# Keys as every release since 0.21.0 names them: the v2 layout, and the same stream.
KEYS = Keys("qp")
REPORT = "*Capacity report · the last 7 days*"


def release_tree(commit: str, into: Path) -> Path:
    """The shipped packages as they were at `commit`, written under `into`; a skip where this
    clone lacks the commit (a shallow clone: CI fetches the whole history)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the previous release's code comes from git")
    known = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    if known.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone (shallow?): git fetch --unshallow")
    archive = subprocess.run(
        [git, "-C", str(REPO), "archive", "--format=tar", commit, *SHIPPED],
        capture_output=True,
        check=True,
    )
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def imported_from(output: str) -> dict[str, str]:
    """Where a replica started with `SERVE_SAYING_WHICH_CODE` found `bot` and `handlers`."""
    for line in output.splitlines():
        if line.startswith('{"imported"'):
            return dict(json.loads(line)["imported"])
    raise AssertionError(f"the replica did not say which code it imported:\n{output[-2000:]}")


# -- the replicas ----------------------------------------------------------------------------


def shared_settings(kube: FakeKubeApi, grafana: FakeSilenceApi, tmp_path: Path) -> dict[str, str]:
    """One environment for every version, in the names and forms 0.27.0 and the checkout both
    read (durations with their unit)."""
    return {
        "SILENCE_BACKEND": "grafana",
        "GRAFANA_URL": grafana.url,  # type: ignore[attr-defined]
        "GRAFANA_TOKEN": grafana.token,
        "SCALER_BACKEND": "arc",
        "SCALER_KUBECONFIG": str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        "SCALER_TARGETS": json.dumps({RUNNER: {"target": "/".join(SCALE_SET), "cap": 20}}),
        "SCALE_ALLOWED_USERS": USER,
        "STATUS_INTERVAL_SECONDS": str(STATUS_INTERVAL_S),
        # One version scales an incident seconds after the other did.
        "SCALE_COOLDOWN_SECONDS": "0",
        # A put-back waits for the queue to stay drained: a second here, not 30 minutes.
        "SCALE_REVERT_SETTLE": "1s",
        # Each step waits for what a root shows: edited within a fifth of a second, not two.
        "ROOT_EDIT_INTERVAL_MS": "200",
    }


def replica(
    slack: Slack, redis_url: str, code: Path, workdir: Path, name: str, **env: str
) -> BotProcess:
    """A replica of the packages under `code` (a release's, or the checkout), started in
    `workdir` (no `.env` there), which says where it imported them from."""
    return BotProcess(
        slack, redis_url, workdir, name, argv=SERVE_SAYING_WHICH_CODE, PYTHONPATH=str(code), **env
    )


async def ready(process: BotProcess, code: Path) -> None:
    await process.wait_healthy()
    for package, path in imported_from(process.output()).items():
        assert Path(path).is_relative_to(code), f"{process.name} imported {package} from {path}"


async def terminated(process: BotProcess) -> None:
    """As the kubelet stops a pod: SIGTERM, and the replica shuts down cleanly."""
    process.signal(signal.SIGTERM)
    # uvicorn re-raises SIGTERM once it has shut down, so the status is 0 or -SIGTERM.
    assert await asyncio.to_thread(process.process.wait, 20) in (0, -signal.SIGTERM)
    assert "queuepilot stopped cleanly" in process.output()


async def notify(process: BotProcess, source: str, payload: dict[str, Any]) -> None:
    async with httpx.AsyncClient(base_url=process.url, timeout=10) as http:
        response = await http.post(
            f"/alerts/{source}", json=payload, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
        )
    assert response.status_code == 202, f"{process.name}: {response.status_code} {response.text}"


async def deliver(process: BotProcess, body: str) -> None:
    """A signed Slack request (a click, a command), to one replica."""
    async with httpx.AsyncClient(base_url=process.url, timeout=10) as http:
        response = await http.post("/slack/events", content=body, headers=signed(body))
    assert response.status_code == 200, f"{process.name}: {response.status_code} {response.text}"


async def samples(process: BotProcess) -> dict[str, float]:
    """This replica's `/metrics`: each sample's value by its name, summed over its labels (a
    labelled series appears at its first increment)."""
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{process.url}/metrics")).text
    summed: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            summed[sample.name] = summed.get(sample.name, 0.0) + sample.value
    return summed


async def leads(process: BotProcess) -> bool:
    """Whether this replica holds the leader's lease now, as its `/metrics` says."""
    return (await samples(process)).get("queuepilot_leader", 0.0) == 1


async def applied(process: BotProcess) -> float:
    """Notifications this replica's consumer applied, whatever they changed."""
    return (await samples(process)).get("queuepilot_notifications_applied_total", 0.0)


def logged_no_error(process: BotProcess) -> None:
    output = process.output()
    for sign in ("Traceback", '"level": "error"'):
        assert sign not in output, f"{process.name} logged {sign}:\n{output[-4000:]}"


def drained(store: redis.Redis) -> bool:
    """Every accepted notification applied: the stream keeps entries only until then."""
    return store.xlen(KEYS.stream) == 0


# -- what people send --------------------------------------------------------------------------


def press(value: str, action_id: str, message_ts: str, *, ephemeral: bool = False) -> str:
    action = {"type": "button", "action_id": action_id, "value": value}
    return block_action(action, message_ts=message_ts, ephemeral=ephemeral)


def choose_silence(seconds: int, message_ts: str) -> str:
    option = {"text": {"type": "plain_text", "text": "1 h"}, "value": str(seconds)}
    action = {"type": "static_select", "action_id": "incident_silence", "selected_option": option}
    return block_action(action, message_ts=message_ts)


def renotified(payload: dict[str, Any], *, wait: float) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    changed["alerts"][0]["values"]["max_queue_time_mins"] = wait
    return changed


def min_runners(kube: FakeKubeApi) -> int:
    return int(kube.sets[SCALE_SET]["spec"]["minRunners"])


# -- what the channel shows --------------------------------------------------------------------


def text_of(message: Any) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


def roots(slack: Slack) -> list[Any]:
    return slack.emulator.channel_messages(CHANNEL)


def root(slack: Slack, ts: str) -> Any:
    return slack.emulator.thread(CHANNEL, ts)[0]


def reports(slack: Slack) -> int:
    return sum(text.startswith(REPORT) for text in ephemeral_texts(slack))


def is_status(text: str) -> bool:
    return text.startswith("Status update")


def events(slack: Slack, ts: str) -> list[str]:
    """The thread's replies other than statuses."""
    return [m.text for m in slack.emulator.thread(CHANNEL, ts)[1:] if not is_status(m.text)]


def statuses_shown(slack: Slack, ts: str) -> int:
    """Statuses a reader saw come in: a quiet status edits the previous one in place."""
    thread = slack.emulator.thread(CHANNEL, ts)[1:]
    return sum(1 + m.edits for m in thread if is_status(m.text))


def status_times(slack: Slack, ts: str) -> list[float]:
    """When Slack was given each status of the thread, posted or edited in."""
    shown = {m.ts for m in slack.emulator.thread(CHANNEL, ts)[1:] if is_status(m.text)}

    def of_status(method: str, params: dict[str, Any]) -> bool:
        if method == "chat.update":
            return params.get("ts") in shown
        posted = method == "chat.postMessage" and params.get("thread_ts") == ts
        return posted and is_status(str(params.get("text", "")))

    calls = slack.emulator.calls()
    return [call.at for call in calls if call.ok and of_status(call.method, call.params)]


def one_status_an_interval(slack: Slack, ts: str) -> None:
    """Whichever replicas tick, one status an interval: two for one interval would add one for
    each interval both versions ran."""
    times = status_times(slack, ts)
    assert len(times) == statuses_shown(slack, ts)
    assert len(times) <= (times[-1] - times[0]) / STATUS_INTERVAL_S + 2, times


def once_each(said: list[str], expected: tuple[str, ...]) -> None:
    assert len(said) == len(expected), said
    for start in expected:
        assert sum(text.startswith(start) for text in said) == 1, (start, said)


def dump(slack: Slack, processes: list[BotProcess]) -> None:
    for message in roots(slack):
        for reply in slack.emulator.thread(CHANNEL, message.ts):
            print(f"{message.ts} ({reply.edits} edits) {reply.text[:160]}")
    for answer in ephemeral_texts(slack):
        print(f"ephemeral: {answer[:160]}")
    for process in processes:
        print(f"--- {process.name} ---\n{process.output()[-6000:]}")
