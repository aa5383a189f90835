"""What the logs never carry: credentials, wherever a library or an error message puts them; and
what every line carries: the incident and channel being worked on, where there is one."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import warnings
from collections.abc import Iterator

import httpx
import pytest

from bot import logs
from tests.support.slack import Slack


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test's `logs.configure` changes is put back after it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    httpx_level = logging.getLogger("httpx").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(httpx_level)
    logging.captureWarnings(False)
    sys.excepthook = sys.__excepthook__


def test_a_backend_url_with_a_password_never_reaches_the_logs(
    restored: None, slack: Slack, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO")  # the production set-up, writing to the captured stderr
    # Basic auth in the URL, as PROMETHEUS_URL or GRAFANA_URL are often set; httpx logs every
    # request's URL at INFO, and an error quoting the URL is logged by the bot itself.
    url = slack.api_url.replace("://", "://reader:hunter2-secret@") + "api.test"
    response = httpx.post(url)
    logging.getLogger("bot.backends").warning("metrics: %s answered %d", url, response.status_code)

    output = capsys.readouterr().err
    assert "answered 200" in output
    assert "reader:[redacted]@" in output
    assert "hunter2-secret" not in output
    assert "HTTP Request" not in output


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


async def test_lines_name_the_incident_and_channel_being_worked_on(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO")
    log = logging.getLogger("bot.test")

    async def a_channels_sender() -> None:  # a task that works for one channel
        logs.tag(channel="C2")
        log.info("sender")

    with logs.about("7", channel="C1"):
        log.info("status")
    with logs.about():  # an action: what it tags once it loaded its incident stays inside
        log.info("action starts")
        logs.tag(incident="8", channel="C1")
        log.info("action on 8")
    await asyncio.create_task(a_channels_sender())
    log.info("between")

    named = [(e["message"], e.get("incident"), e.get("channel")) for e in lines(capsys)]
    assert named == [
        ("status", "7", "C1"),
        ("action starts", None, None),
        ("action on 8", "8", "C1"),
        ("sender", None, "C2"),
        ("between", None, None),
    ]


def test_a_librarys_warning_is_a_json_line(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("this call is deprecated", UserWarning, stacklevel=1)

    [entry] = lines(capsys)
    assert entry["level"] == "warning" and "this call is deprecated" in entry["message"]


def test_an_error_that_ends_the_process_is_a_json_line(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO")
    try:
        raise RuntimeError("the event loop is closed")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())  # what Python calls with an uncaught exception

    [entry] = lines(capsys)
    assert entry["level"] == "critical" and entry["message"] == "stopped by RuntimeError"
    assert "the event loop is closed" in entry["error"]
