"""The bot in Socket Mode (SLACK_APP_TOKEN set), started as production starts it, against the
emulator's Socket Mode: the page's clicks, commands and modal submissions reach it as envelopes
on its websocket and its acks answer them; it reconnects after `disconnect`; two replicas share
the envelopes, each acted on once; a hostile envelope is acknowledged with a plain ack.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.config import Settings
from bot.render.scale_modal import AMOUNT_BLOCK, TYPE_BLOCK, VALUE
from bot.storage.keys import Keys
from handlers.slack_boundary import SocketEnvelopes
from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from sandbox.slack_socket import SocketMode
from tests.support.fakes.scale_receiver import ScaleReceiver
from tests.support.mutations import JSON, mutated
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import BLOCK_ACTION, ephemeral_texts

APP_TOKEN = "xapp-1-A0QUEUEBOT-1-bot-socket-test"
BOT_TOKEN = "xoxb-bot-socket-test"
CHANNEL = "C0QUEUE"
USER = "U0ALICE"
RUNNER = "linux.g5.4xlarge.nvidia.gpu"  # the runner type of the Alertmanager fixture


@dataclass
class Slack:
    emulator: SlackEmulator
    socket: SocketMode
    server: RunningServer
    page: httpx.AsyncClient  # what the browser does, over HTTP

    @property
    def api_url(self) -> str:
        """Where the bot's Web API calls go (read by conftest's `settings_for`)."""
        return f"{self.server.url}/api/"

    async def press(self, root: Any, action_id: str) -> dict[str, Any]:
        """Click one of the root's buttons on the page."""
        for block in root.blocks:
            for element in block.get("elements", []):
                if element.get("action_id") == action_id:
                    ask = {
                        "channel": CHANNEL,
                        "message_ts": root.ts,
                        "block_id": block["block_id"],
                        "action_id": action_id,
                    }
                    return (await self.page.post("/_page/action", json=ask)).json()
        raise AssertionError(f"no {action_id} on the root")

    async def command(self, text: str) -> dict[str, Any]:
        ask = {"channel": CHANNEL, "text": text}
        return (await self.page.post("/_page/command", json=ask)).json()

    def root_json(self) -> str:
        return json.dumps(self.emulator.channel_messages(CHANNEL)[0].blocks)


@pytest.fixture
def emulator() -> Iterator[tuple[SlackEmulator, RunningServer]]:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), app_token=APP_TOKEN)
    with serve_in_thread(emulator.app) as server:
        yield emulator, server
        emulator.close()


@pytest.fixture
async def slack(emulator: tuple[SlackEmulator, RunningServer]) -> AsyncIterator[Slack]:
    found, server = emulator
    assert found.socket is not None
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as page:
        yield Slack(found, found.socket, server, page)


SettingsFor = Callable[..., Settings]


@pytest.fixture
def socket_settings(settings_for: SettingsFor) -> SettingsFor:
    """conftest's `settings_for`, on this module's emulator (its `slack` fixture is this
    module's), in Socket Mode: an app-level token and no signing secret, nothing arrives over
    HTTP."""

    def make(**overrides: Any) -> Settings:
        socket = {"slack_app_token": APP_TOKEN, "slack_signing_secret": None}
        return settings_for(**{"slack_bot_token": BOT_TOKEN, **socket, **overrides})

    return make


async def open_incident(running: RunningBot, slack: Slack, fixture: str) -> Any:
    assert (await running.send(fixture.split("/")[0], fixture_json(fixture))).status_code == 202
    roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="the root")
    return roots[0]


async def connected(slack: Slack, count: int = 1) -> None:
    await eventually(lambda: slack.socket.connections() == count, what=f"{count} connection(s)")


def acknowledged_by_alice(slack: Slack) -> bool:
    root = slack.root_json().lower()
    return f"<@{USER.lower()}>" in root and "acknowledged" in root


async def test_a_click_on_the_page_is_acted_on_and_the_root_shows_it(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    async with run_bot(socket_settings()) as running:
        await connected(slack)
        root = await open_incident(running, slack, "grafana/queue-alert-firing.json")
        assert await slack.press(root, "incident_ack") == {"ok": True}
        await eventually(lambda: acknowledged_by_alice(slack), what="the root acknowledged")
        assert (await running.http.post("/slack/events")).status_code == 404, "no HTTP route"
    [envelope] = slack.socket.envelopes()
    assert (envelope.type, envelope.acked) == ("interactive", True)


async def test_a_slash_command_is_answered_over_the_socket(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    async with run_bot(socket_settings()):
        await connected(slack)
        assert await slack.command("/queue help") == {"ok": True}
        [answer] = await eventually(
            lambda: slack.emulator.ephemerals(CHANNEL), what="the command's answer"
        )
    assert answer.user == USER
    assert "/queue" in answer.text + json.dumps(answer.blocks)
    [envelope] = slack.socket.envelopes()
    assert (envelope.type, envelope.acked) == ("slash_commands", True)


async def test_the_home_tab_opened_on_the_page_is_published_over_the_socket(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    async with run_bot(socket_settings()) as running:
        await connected(slack)
        await open_incident(running, slack, "grafana/queue-alert-firing.json")
        assert (await slack.page.post("/_page/home", json={})).json() == {"ok": True}
        home = await eventually(lambda: slack.emulator.home(USER), what="alice's Home")
    assert "Open incidents" in json.dumps(home)
    [envelope] = slack.socket.envelopes()
    assert (envelope.type, envelope.acked) == ("events_api", True)
    assert envelope.payload["type"] == "event_callback"
    assert envelope.payload["event"]["type"] == "app_home_opened"


async def test_a_command_is_acked_in_time_while_bolt_waits_on_slack(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    """Bolt checks the bot's token (`auth.test`) on its first request; with Slack slow to answer
    it the ack waited for it, past Slack's 3 s ("did not answer"). Now the envelope is acked in
    time and the answer follows once Slack has answered Bolt."""
    async with run_bot(socket_settings()):
        await connected(slack)
        slack.emulator.stall("auth.test", 5)
        assert await slack.command("/queue help") == {"ok": True}
        [answer] = await eventually(
            lambda: slack.emulator.ephemerals(CHANNEL), what="the command's answer"
        )
    assert "/queue" in answer.text + json.dumps(answer.blocks)
    [envelope] = slack.socket.envelopes()
    assert (envelope.type, envelope.acked) == ("slash_commands", True)


async def test_the_scale_modal_is_opened_submitted_and_answered_over_the_socket(
    socket_settings: SettingsFor, slack: Slack, receiver: ScaleReceiver
) -> None:
    receiver.capacity[RUNNER] = 12
    settings = socket_settings(
        scaler_backend="webhook",
        scaler_webhook_url=receiver.url,  # type: ignore[attr-defined]
        scaler_webhook_secret=receiver.secret,
        scaler_targets=json.dumps({RUNNER: {"target": "gpu-pool", "cap": 10}}),
        scale_allowed_users=USER,
    )
    async with run_bot(settings) as running:
        await connected(slack)
        root = await open_incident(running, slack, "alertmanager/runner-queue-am-00-firing.json")
        assert await slack.press(root, "incident_scale") == {"ok": True}

        def form_shown() -> list[dict[str, Any]]:
            # The form is opened at once, then updated with what the scaler says of capacity.
            views = slack.emulator.views()
            return [v for v in views if "cannot report" in json.dumps(v["blocks"])]

        [form] = await eventually(form_shown, what="the scale form")
        values = {TYPE_BLOCK: {VALUE: RUNNER}, AMOUNT_BLOCK: {VALUE: "4"}}
        ask = {"view_id": form["id"], "values": values}
        assert (await slack.page.post("/_page/view", json=ask)).json() == {"ok": True}
        confirm = next(v for v in slack.emulator.views() if v["id"] == form["id"])
        assert confirm["callback_id"] == "incident_scale_confirm", "response_action update"
        assert f"Scale *{RUNNER}* by *+4*" in json.dumps(confirm["blocks"], ensure_ascii=False)
        assert not receiver.accepted, "nothing is called before the confirmation"

        ask = {"view_id": form["id"], "values": {}}
        assert (await slack.page.post("/_page/view", json=ask)).json() == {"ok": True}
        state = (await slack.page.get("/_page/state")).json()
        assert state["modal"] is None, "response_action clear closed the modal"
        await eventually(lambda: receiver.accepted, what="the scale webhook called")
    [call] = receiver.accepted
    assert (call["runner_type"], call["delta"], call["requested_by"]) == (RUNNER, 4, "alice")
    submissions = [e for e in slack.socket.envelopes() if e.payload["type"] == "view_submission"]
    assert [e.acked for e in submissions] == [True, True]


async def test_after_disconnect_the_bot_reconnects_and_the_next_click_works(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    async with run_bot(socket_settings()) as running:
        await connected(slack)
        root = await open_incident(running, slack, "grafana/queue-alert-firing.json")
        told = await slack.page.post("/_emulator/socket/disconnect", json={})
        assert told.json() == {"ok": True, "connections": 1}
        await connected(slack)
        assert await slack.press(root, "incident_ack") == {"ok": True}
        await eventually(lambda: acknowledged_by_alice(slack), what="the root acknowledged")
    opened = slack.emulator.calls("apps.connections.open")
    assert [c.ok for c in opened] == [True, True], "a fresh URL for the new connection"
    assert slack.socket.envelopes()[0].connection == 2, "the click came over the new one"


async def test_two_replicas_each_hold_a_connection_and_a_click_is_done_once(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    settings = socket_settings()
    async with run_bot(settings) as first, run_bot(settings):
        await connected(slack, 2)
        root = await open_incident(first, slack, "grafana/queue-alert-firing.json")
        assert await slack.press(root, "incident_ack") == {"ok": True}
        await eventually(lambda: acknowledged_by_alice(slack), what="the root acknowledged")

        def acknowledgements() -> list[str]:
            replies = slack.emulator.thread(CHANNEL, root.ts)[1:]
            texts = [m.text + json.dumps(m.blocks) for m in replies]
            return [t for t in texts if "Acknowledged" in t]

        await eventually(acknowledgements, what="the acknowledgement in the thread")
        # A second press of the same button is a second click: still one acknowledgement.
        assert await slack.press(root, "incident_ack") == {"ok": True}
        assert len(slack.socket.envelopes()) == 2
        # Once the second click's answer is out, its effect (none) is committed too.
        await eventually(
            lambda: any("already own" in t for t in ephemeral_texts(slack)),
            what="the second click answered",
        )
        assert sum("You acknowledged" in t for t in ephemeral_texts(slack)) == 1
        assert len(acknowledgements()) == 1, acknowledgements()
    assert [e.retry_attempt for e in slack.socket.envelopes()] == [0, 0], "each sent once"


@dataclass
class RecordingClient:
    """Where `SocketEnvelopes` sends its acks (what Bolt's socket adapter uses of slack_sdk's
    client: its one method and its logger)."""

    sent: list[dict[str, Any]]
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("slack_sdk"))

    async def send_socket_mode_response(self, response: SocketModeResponse) -> None:
        self.sent.append(response.to_dict())


@pytest.mark.parametrize(
    "message",
    [
        {"type": "interactive", "payload": "not an object"},
        {"type": "interactive", "payload": {"type": "block_actions", "user": {"id": 5}}},
        {"type": "interactive", "payload": {"type": "block_actions", "user": {"id": "U1"}}},
        {"type": "interactive", "payload": {"type": ["x"]}},
        {"type": "slash_commands", "payload": {"command": "queue", "user_id": "U1"}},
        {"type": "events_api", "payload": {"type": "event_callback", "event": {"type": 5}}},
        {"type": "interactive", "payload": {"type": "shortcut", "user": {"id": "U1"}}},
        {"type": "something_new", "payload": {}},
        {"type": "interactive", "payload": [1]},
        {"type": "events_api", "payload": {"type": "event_callback", "event": "x"}},
        {"type": "interactive", "payload": {"type": "view_submission", "response_urls": "x"}},
    ],
)
async def test_a_hostile_envelope_is_acknowledged_with_a_plain_ack(
    socket_settings: SettingsFor,
    slack: Slack,
    message: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with run_bot(socket_settings()) as running:
        bot = running.bot
        client = RecordingClient([])
        envelopes = SocketEnvelopes(bot.bolt)
        with caplog.at_level(logging.INFO):
            await envelopes(client, {**message, "envelope_id": "e1"}, None)  # type: ignore[arg-type]
        assert client.sent == [{"envelope_id": "e1"}]
        assert bot.alive()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


COMMAND_JSON = {"command": "/queue", "text": "help", "user_id": USER, "channel_id": CHANNEL}
EVENT_JSON = {"type": "event_callback", "event_id": "Ev0PROP", "event": {"type": "app_mention"}}
ENVELOPES = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["interactive", "slash_commands", "events_api", "hello", "x"]),
        "payload": mutated(BLOCK_ACTION) | mutated(COMMAND_JSON) | mutated(EVENT_JSON) | JSON,
        "retry_attempt": st.none() | JSON,
        "retry_reason": st.none() | JSON,
    }
)


async def test_any_envelope_is_acknowledged_once_without_a_traceback(
    socket_settings: SettingsFor, slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever payload an envelope carries, and whatever retry fields, it gets exactly one ack
    and the log no traceback (the envelopes reach the bot's own loop, as slack_sdk's do). Its
    periodic jobs idle while Hypothesis draws (APScheduler's jitter draws from `random`)."""
    async with run_bot(socket_settings(status_tick_seconds=300)) as running:
        envelopes = SocketEnvelopes(running.bot.bolt)
        loop = asyncio.get_running_loop()

        @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
        @given(message=ENVELOPES)
        def deliver(message: dict[str, Any]) -> None:
            client = RecordingClient([])
            envelope = {**message, "envelope_id": "e1"}
            asyncio.run_coroutine_threadsafe(envelopes(client, envelope, None), loop).result(10)  # type: ignore[arg-type]
            assert [sent["envelope_id"] for sent in client.sent] == ["e1"]

        with caplog.at_level(logging.INFO):
            await asyncio.to_thread(deliver)
        assert running.bot.alive()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


async def test_an_event_is_acknowledged_and_its_retry_not_handled_twice(
    socket_settings: SettingsFor, slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    async with run_bot(socket_settings()) as running:
        bot = running.bot
        envelopes = SocketEnvelopes(bot.bolt)
        client = RecordingClient([])
        event = {
            "type": "events_api",
            "payload": {
                "type": "event_callback",
                "event_id": "Ev0SOCKET",
                "event": {"type": "app_mention", "text": "hi"},
            },
        }
        await envelopes(client, {**event, "envelope_id": "e1"}, None)  # type: ignore[arg-type]
        keys = Keys(bot.settings.redis_prefix)
        assert await bot.redis.exists(keys.slack_event("Ev0SOCKET")), "remembered as handled"
        assert not await bot.redis.exists(keys.slack_event("Ev0OTHER"))
        retry = {**event, "envelope_id": "e2", "retry_attempt": 1, "retry_reason": "timeout"}
        with caplog.at_level(logging.INFO, logger="handlers.slack_boundary"):
            await envelopes(client, retry, None)  # type: ignore[arg-type]
        assert client.sent == [{"envelope_id": "e1"}, {"envelope_id": "e2"}]
    assert any("Ev0SOCKET delivered again (retry 1)" in r.getMessage() for r in caplog.records)


async def test_a_command_envelope_naming_its_user_and_channel_again_is_answered(
    socket_settings: SettingsFor, slack: Slack
) -> None:
    """Bolt reads a command's `user` and `channel` before `user_id` and `channel_id`, as a string
    or an object; the listener read them as objects only, failed after the ack, and the person
    got no answer."""
    async with run_bot(socket_settings()) as running:
        bot = running.bot
        with slack.emulator.workspace() as ws:
            token = ws.ui.new_response_url(CHANNEL, USER, None)
        command = {
            "command": "/queue",
            "text": "help",
            "user_id": USER,
            "channel_id": CHANNEL,
            "user": {"id": USER},
            "channel": "C0ELSEWHERE",
            "response_url": f"{slack.server.url}/_emulator/respond/{token}",
            "trigger_id": "1.2.3",
        }
        client = RecordingClient([])
        envelope = {"type": "slash_commands", "payload": command, "envelope_id": "e1"}
        await SocketEnvelopes(bot.bolt)(client, envelope, None)  # type: ignore[arg-type]
        assert client.sent == [{"envelope_id": "e1"}]
        [answer] = await eventually(
            lambda: slack.emulator.ephemerals(CHANNEL), what="the command's answer"
        )
    assert answer.user == USER and "/queue" in answer.text + json.dumps(answer.blocks)
