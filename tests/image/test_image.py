"""The container image as a cluster runs it (tests/image/container.py): a non-root PID 1 on a
read-only root, serving a real Redis and the Slack emulator, stopping cleanly on SIGTERM."""

from __future__ import annotations

import json
import subprocess
import time
import tomllib
from pathlib import Path

import httpx
import pytest
from packaging.utils import canonicalize_name

from tests.deploy.test_lock import entries
from tests.image.container import REPO, Container, Image, run_once
from tests.support.payloads import fixture_json
from tests.support.running import WEBHOOK_TOKEN
from tests.support.servers import free_port
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack

pytestmark = pytest.mark.image

# The lifespan gives the consumer and the senders 10 s to finish; an idle bot needs far less.
STOPS_WITHIN_S = 10.0


def bot_env(redis_url: str, slack: Slack, port: int) -> dict[str, str]:
    """What a deployment sets: the secrets, Redis, the channel; here all on the host's loopback."""
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack.api_url,
        "SLACK_CHANNEL": CHANNEL,
        "REDIS_URL": redis_url,
        "ALERT_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }


def test_configuration_is_what_a_restricted_pod_needs(image: Image) -> None:
    uid, gid = image.user
    assert uid != 0 and gid != 0, "runAsNonRoot verifies a numeric, non-zero USER"
    assert image.config["Entrypoint"] == ["queuepilot"]
    assert image.config["Cmd"] == ["serve"]
    assert image.env["PYTHONUNBUFFERED"] == "1"
    assert image.env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert image.env["MPLCONFIGDIR"].startswith("/tmp/"), "the one writable place"
    assert "3000/tcp" in image.config["ExposedPorts"]


def test_prints_its_version_and_a_development_ones_commit(image: Image, tmp_path: Path) -> None:
    """The image holds no checkout: its build names the commit (QUEUEPILOT_COMMIT)."""
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    output = run_once(image, tmp_path, command=["--version"])
    built = f"+g{head[:12]}" if ".dev" in version else ""
    assert output.strip() == f"queuepilot {version}{built}"


def test_holds_the_runtime_only(image: Image, tmp_path: Path) -> None:
    """The bot and its dependencies (boto3 too: the `aws` extra is in); nothing of the checkout,
    no installer, no pip cache."""
    modules = ["bot", "handlers", "boto3", "pytest", "sandbox", "tests", "pip", "setuptools"]
    code = f"import importlib.util as u, json; print(json.dumps([*filter(u.find_spec, {modules})]))"
    output = run_once(image, tmp_path, entrypoint=["python"], command=["-c", code])
    assert json.loads(output) == ["bot", "handlers", "boto3"]
    assert not (image.rootfs / "root" / ".cache").exists()
    assert not list((image.rootfs / "usr" / "bin").glob("gcc*"))


def test_holds_exactly_the_locked_dependencies(image: Image) -> None:
    """Each distribution the image holds at the version the lock pins; each pinned one for every
    platform is there (those behind a marker depend on the platform)."""
    versions: dict[str, set[str]] = {}
    for name, version, _, _ in entries():
        versions.setdefault(canonicalize_name(name), set()).add(version)
    everywhere = {canonicalize_name(name) for name, _, marker, _ in entries() if not marker}
    (site,) = (image.rootfs / "opt" / "queuepilot" / "lib").glob("python3*/site-packages")
    held = {}
    for info in site.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        held[canonicalize_name(name)] = version
    assert held.pop("queuepilot")
    assert [f"{n} {v}" for n, v in held.items() if v not in versions.get(n, ())] == []
    # setuptools is locked to build the package, then removed.
    assert everywhere - set(held) == {"setuptools"}


def test_draws_the_trend_chart_on_a_read_only_root(image: Image, tmp_path: Path) -> None:
    """Matplotlib writes its font cache to MPLCONFIGDIR, under /tmp; it would warn that it made
    a temporary one if that were not writable."""
    code = """
from datetime import UTC, datetime
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.trend import Trend
from bot.render.chart import ChartData, render_chart
trend = Trend()
for at, queued, wait in ((0, 3, 1), (60, 9, 4)):
    shown = {"linux": RunnerQueue(queued=queued, longest_wait_mins=wait)}
    trend = trend.appended(datetime.fromtimestamp(at, UTC), None, shown, limit=2)
print(render_chart(ChartData("trend", trend))[:4])
"""
    output = run_once(image, tmp_path, entrypoint=["python"], command=["-c", code])
    assert output.strip() == "b'\\x89PNG'", output


def test_serves_an_alert_then_stops_cleanly_on_sigterm(
    image: Image, tmp_path: Path, redis_url: str, slack: Slack
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with Container(image, tmp_path, env=bot_env(redis_url, slack, port)) as bot:
        bot.wait_for(lambda: httpx.get(f"{url}/healthz").status_code == 200, what="/healthz")
        assert httpx.get(f"{url}/readyz").status_code == 200

        status = bot.status()
        assert status["Uid"].split()[0] != "0", "runs as the image's user, not root"
        assert status["NSpid"].split()[-1] == "1", "PID 1 in its namespace, as in a pod"

        response = httpx.post(
            f"{url}/alerts/grafana",
            json=fixture_json("grafana/queue-alert-firing.json"),
            headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
        )
        assert response.status_code == 202, response.text
        bot.wait_for(lambda: slack.emulator.channel_messages(CHANNEL), what="the incident's root")

        asked = time.monotonic()
        bot.signal("TERM")
        assert bot.wait(STOPS_WITHIN_S) == 0, bot.output()
        print(f"stopped {time.monotonic() - asked:.1f} s after SIGTERM")
        assert "queuepilot stopped cleanly" in bot.output()
        assert "Traceback" not in bot.output()


def test_check_passes_against_the_same_servers(
    image: Image, tmp_path: Path, redis_url: str, slack: Slack
) -> None:
    env = bot_env(redis_url, slack, free_port())
    run_once(image, tmp_path, command=["check"], env=env)
