"""What the logs never carry: credentials, wherever a library or an error message puts them."""

from __future__ import annotations

import logging
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
