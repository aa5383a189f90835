"""The local Slack page: a one-person Slack client served by the emulator at `/`.

The browser shows the workspace (`GET /_page/state`, refreshed on every change announced by the
server-sent events of `GET /_page/events`) and says what its user did: clicked an element of a
message or modal, submitted or closed a modal, typed a slash command. This module turns each of
those into what Slack would send the app (`slack_interactions`), signed, to the app's Request
URL, and applies the app's answer the way Slack's client does: a `response_action` on a modal, a
slash command's body shown only to its user, a `response_url` answered here. The page never
names a value itself: it points at an element of a message or view the emulator holds, so what
reaches the app is built from what the app sent.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from sandbox.slack_interactions import (
    AppAnswer,
    AppLink,
    app_home_opened,
    block_actions_payload,
    slash_command_form,
    view_closed_payload,
    view_submission_payload,
)
from sandbox.slack_methods import check_view
from sandbox.slack_model import BOT_USER_ID, SlackError
from sandbox.slack_state import Workspace

if TYPE_CHECKING:
    from sandbox.slack_api import SlackEmulator

PAGE_DIR = Path(__file__).resolve().parent / "page"
# An idle event stream still sends a comment this often, so proxies and browsers keep it open.
HEARTBEAT_S = 15.0


class PageError(Exception):
    """Something the page asked that Slack's client would not send; a 400 with the reason."""


def page_routes(emulator: SlackEmulator) -> list[BaseRoute]:
    page = SlackPage(emulator)
    return [
        Route("/", page.index, methods=["GET"]),
        Route("/archives/{channel:str}/{stamp:str}", page.permalink, methods=["GET"]),
        Mount("/page", StaticFiles(directory=PAGE_DIR), name="page"),
        Route("/_page/state", page.state, methods=["GET"]),
        Route("/_page/events", page.events, methods=["GET"]),
        Route("/_page/action", page.action, methods=["POST"]),
        Route("/_page/command", page.command, methods=["POST"]),
        Route("/_page/view", page.submit, methods=["POST"]),
        Route("/_page/view/close", page.close, methods=["POST"]),
        Route("/_page/home", page.home, methods=["POST"]),
        Route("/_emulator/respond/{token:str}", page.respond, methods=["POST"]),
        Route("/_emulator/files/{file_id:str}", page.file, methods=["GET"]),
    ]


class SlackPage:
    def __init__(self, emulator: SlackEmulator) -> None:
        self._emulator = emulator

    @property
    def _me(self) -> str:
        return self._emulator.person.id

    # -- what the page shows --------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        return FileResponse(PAGE_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def permalink(self, request: Request) -> Response:
        """A message's permalink (`chat.getPermalink`'s, as the bot's GitHub comments carry it):
        the page, which opens that message's thread; a 404 for a message the workspace lacks."""
        channel, stamp = request.path_params["channel"], request.path_params["stamp"]
        ts = f"{stamp[1:-6]}.{stamp[-6:]}" if re.fullmatch(r"p\d{7,}", stamp) else ""
        with self._emulator.reading() as ws:
            try:
                ws.find(channel, ts)
            except SlackError:
                return PlainTextResponse("No such message in this local Slack.", 404)
        return await self.index(request)

    async def state(self, request: Request) -> Response:
        with self._emulator.reading() as ws:
            return JSONResponse(self._state(ws), headers={"Cache-Control": "no-store"})

    def _state(self, ws: Workspace) -> dict[str, Any]:
        channels = []
        for cid in ws.channels:
            channel = ws.channel_json(cid)
            mine = [e for e in channel["ephemerals"] if e["user"] == self._me]
            channels.append(
                {
                    "id": cid,
                    "name": ws.channel_name(cid),
                    "messages": channel["messages"],
                    "ephemerals": mine,
                }
            )
        stack = ws.ui.modal_of(self._me)
        modal = None
        if stack:
            top = stack[-1]
            modal = {**ws.views[top], "errors": ws.ui.view_errors.get(top, {})}
        return {
            "version": ws.version,
            "me": {"id": self._me, "name": self._emulator.person.name},
            "command": self._emulator.command,
            # Users' and channels' names by ID: a mention, `<#C…>` too, shows its name.
            "names": {**ws.users, **{c["id"]: c["name"] for c in channels}},
            "bot_user_id": BOT_USER_ID,
            "channels": channels,
            "modal": modal,
            # The app's Home tab as this person sees it: the view last published to them.
            "home": ws.homes.get(self._me),
        }

    async def events(self, request: Request) -> Response:
        """Server-sent events: `change` with the workspace's version whenever it moves."""

        async def stream() -> Any:
            version = -1
            yield "retry: 1000\n\n"
            while not self._emulator.closing:
                current = await self._emulator.wait_for_change(version, HEARTBEAT_S)
                if current == version:
                    yield ": heartbeat\n\n"
                    continue
                version = current
                yield f"event: change\ndata: {version}\n\n"

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        with self._emulator.reading() as ws:
            stored = ws.files.get(file_id)
            if stored is None or stored.data is None:
                return JSONResponse({"ok": False, "error": "file_not_found"}, 404)
            data, kind = stored.data, stored.public()["mimetype"]
        return Response(data, media_type=kind, headers={"Cache-Control": "max-age=3600"})

    # -- what the page's user does ---------------------------------------------------------

    async def action(self, request: Request) -> Response:
        """A click or a choice in a message (`channel`, `message_ts`) or a modal (`view_id`)."""

        def build(ws: Workspace, ask: dict[str, Any], base_url: str) -> dict[str, Any]:
            trigger = ws.ui.issue_trigger(self._me)
            if ask.get("view_id"):
                view = self._my_view(ws, str(ask["view_id"]))
                action = _action(view.get("blocks", []), ask)
                return block_actions_payload(
                    self._emulator.person, action=action, trigger_id=trigger, view=view
                )
            channel, ts = str(ask.get("channel", "")), str(ask.get("message_ts", ""))
            message = ws.find(channel, ts)
            action = _action(message.blocks, ask)
            token = ws.ui.new_response_url(channel, self._me, ts)
            return block_actions_payload(
                self._emulator.person,
                action=action,
                trigger_id=trigger,
                channel=channel,
                message=ws.render(message),
                response_url=f"{base_url}_emulator/respond/{token}",
            )

        try:
            ask = await _ask(request)
            link = self._link()
            with self._emulator.workspace() as ws:
                payload = build(ws, ask, str(request.base_url))
        except (PageError, SlackError) as exc:
            return _refused(exc)
        answer = await link.send_payload(payload)
        return _told(answer)

    async def command(self, request: Request) -> Response:
        """`/queue …` typed in the composer: sent like Slack sends a slash command."""
        try:
            ask = await _ask(request)
            link = self._link()
            channel = str(ask.get("channel", ""))
            command, _, text = str(ask.get("text", "")).strip().partition(" ")
            if command != self._emulator.command:
                known = self._emulator.command
                raise PageError(f"{command or 'That'} is not a command here: try {known}")
            with self._emulator.workspace() as ws:
                ws.writable_channel(channel)
                trigger = ws.ui.issue_trigger(self._me)
                token = ws.ui.new_response_url(channel, self._me, None)
            form = slash_command_form(
                self._emulator.person,
                command=command,
                text=text.strip(),
                channel=channel,
                trigger_id=trigger,
                response_url=f"{request.base_url}_emulator/respond/{token}",
            )
        except (PageError, SlackError) as exc:
            return _refused(exc)
        answer = await link.send_command(form)
        if answer.ok and answer.body.strip():
            # The command's immediate answer: ephemeral unless the app says in_channel.
            data = answer.json() or {"text": answer.body.decode("utf-8", "replace")}
            with self._emulator.workspace() as ws:
                _answer_in(ws, channel, self._me, data, message_ts=None)
        return _told(answer)

    async def submit(self, request: Request) -> Response:
        """The modal's submit button, with the inputs' values as the page collected them."""
        try:
            ask = await _ask(request)
            link = self._link()
            view_id = str(ask.get("view_id", ""))
            with self._emulator.workspace() as ws:
                view = self._my_view(ws, view_id, top=True)
                view["state"] = {"values": _values(view.get("blocks", []), ask.get("values"))}
                ws.ui.view_errors.pop(view_id, None)
                payload = view_submission_payload(
                    self._emulator.person,
                    view=copy.deepcopy(view),
                    trigger_id=ws.ui.issue_trigger(self._me),
                )
        except (PageError, SlackError) as exc:
            return _refused(exc)
        answer = await link.send_payload(payload)
        if not answer.ok:
            return _told(answer)
        try:
            with self._emulator.workspace() as ws:
                _apply_response_action(ws, self._me, view_id, answer.json() or {})
        except (PageError, SlackError) as exc:
            return _refused(exc)
        return _told(answer)

    async def close(self, request: Request) -> Response:
        try:
            ask = await _ask(request)
            with self._emulator.workspace() as ws:
                view = self._my_view(ws, str(ask.get("view_id", "")), top=True)
                ws.ui.close(self._me)
        except (PageError, SlackError) as exc:
            return _refused(exc)
        link = self._emulator.app_link
        if view.get("notify_on_close") and link is not None:
            await link.send_payload(view_closed_payload(self._emulator.person, view=view))
        return JSONResponse({"ok": True})

    async def home(self, request: Request) -> Response:
        """The person opened the app's Home tab: Slack sends the app `app_home_opened`, with the
        view it shows them when one was published; the app publishes theirs (views.publish),
        and the page shows it when it comes."""
        try:
            link = self._link()
            with self._emulator.reading() as ws:
                view = copy.deepcopy(ws.homes.get(self._me))
        except PageError as exc:
            return _refused(exc)
        event = app_home_opened(self._emulator.person, tab="home", view=view)
        return _told(await link.send_event(event))

    # -- what the app answers through a response_url ------------------------------------------

    async def respond(self, request: Request) -> Response:
        try:
            data = await _ask(request)
        except PageError:
            return JSONResponse({"ok": False, "error": "invalid_payload"}, 400)
        try:
            with self._emulator.workspace() as ws:
                target = ws.ui.use_response_url(request.path_params["token"])
                _answer_in(ws, target.channel, target.user, data, message_ts=target.message_ts)
        except SlackError as exc:
            return JSONResponse({"ok": False, "error": exc.error}, exc.status or 400)
        return JSONResponse({"ok": True})

    # -- helpers ----------------------------------------------------------------------------

    def _my_view(self, ws: Workspace, view_id: str, *, top: bool = False) -> dict[str, Any]:
        stack = ws.ui.modal_of(self._me)
        if view_id not in (stack[-1:] if top else stack):
            raise PageError("that modal is not open")
        return ws.views[view_id]

    def _link(self) -> AppLink:
        link = self._emulator.app_link
        if link is None:
            raise PageError("no app is connected to this workspace yet")
        return link


async def _ask(request: Request) -> dict[str, Any]:
    """A JSON object from the page (or an app's response_url post)."""
    try:
        ask = json.loads(await request.body())
    except ValueError:
        raise PageError("the page sent something that is not JSON") from None
    if not isinstance(ask, dict):
        raise PageError("the page sent something that is not an object")
    return ask


def _refused(exc: Exception) -> Response:
    reason = exc.error if isinstance(exc, SlackError) else str(exc)
    return JSONResponse({"ok": False, "problem": reason}, 400)


def _told(answer: AppAnswer) -> Response:
    """What the page shows: nothing when the app answered, else Slack's kind of complaint."""
    if answer.ok:
        return JSONResponse({"ok": True})
    return JSONResponse({"ok": False, "problem": f"queuepilot did not respond: {answer.problem}"})


# -- Block Kit: the elements the page points at --------------------------------------------


def _elements(blocks: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(block_id, interactive element) of every actions block, accessory and input."""
    for block in blocks:
        block_id = str(block.get("block_id", ""))
        kind = block.get("type")
        if kind == "actions":
            for element in block.get("elements", []):
                yield block_id, element
        elif kind == "section" and isinstance(block.get("accessory"), dict):
            yield block_id, block["accessory"]
        elif kind == "input" and isinstance(block.get("element"), dict):
            yield block_id, block["element"]


def _find(blocks: list[dict[str, Any]], block_id: str, action_id: str) -> dict[str, Any]:
    for found_block, element in _elements(blocks):
        if found_block == block_id and element.get("action_id") == action_id:
            return element
    raise PageError(f"no element {action_id!r} in block {block_id!r}")


def _options(element: dict[str, Any]) -> list[dict[str, Any]]:
    options = list(element.get("options", []))
    for group in element.get("option_groups", []):
        options.extend(group.get("options", []))
    return options


def _option(element: dict[str, Any], value: object) -> dict[str, Any]:
    for option in _options(element):
        if option.get("value") == value:
            return option
    raise PageError(f"no option {value!r} in {element.get('action_id')!r}")


def _action(blocks: list[dict[str, Any]], ask: dict[str, Any]) -> dict[str, Any]:
    """The `actions[0]` Slack sends for a click on this element (or this option of it)."""
    block_id, action_id = str(ask.get("block_id", "")), str(ask.get("action_id", ""))
    element = _find(blocks, block_id, action_id)
    kind = element.get("type")
    action: dict[str, Any] = {"type": kind, "action_id": action_id, "block_id": block_id}
    if kind == "button":
        action["text"] = element.get("text")
        for key in ("value", "style", "url"):
            if key in element:
                action[key] = element[key]
    elif kind in ("static_select", "overflow", "radio_buttons"):
        action["selected_option"] = _option(element, ask.get("selected"))
        if "placeholder" in element:
            action["placeholder"] = element["placeholder"]
    else:
        raise PageError(f"the page cannot act on a {kind} here")
    return action


def _values(blocks: list[dict[str, Any]], given: object) -> dict[str, Any]:
    """`view.state.values` as Slack builds it: every input, set or not, by block and action."""
    given = given if isinstance(given, dict) else {}
    values: dict[str, Any] = {}
    for block in blocks:
        if block.get("type") != "input" or not isinstance(block.get("element"), dict):
            continue
        element, block_id = block["element"], str(block.get("block_id", ""))
        action_id = str(element.get("action_id", ""))
        raw = (given.get(block_id) or {}).get(action_id)
        state = _input_state(element, raw)
        if _is_empty(state) and not block.get("optional"):
            raise PageError(f"{_label(block)} is required")
        values.setdefault(block_id, {})[action_id] = state
    return values


def _input_state(element: dict[str, Any], raw: object) -> dict[str, Any]:
    kind = element.get("type")
    if kind in ("static_select", "radio_buttons"):
        chosen = None if raw in (None, "") else _option(element, raw)
        return {"type": kind, "selected_option": chosen}
    if kind == "checkboxes":
        chosen = [_option(element, v) for v in raw] if isinstance(raw, list) else []
        return {"type": kind, "selected_options": chosen}
    if kind == "number_input":
        return {"type": kind, "value": _number(element, raw)}
    if kind == "plain_text_input":
        return {"type": kind, "value": None if raw in (None, "") else str(raw)}
    raise PageError(f"the page cannot fill a {kind} input")


def _number(element: dict[str, Any], raw: object) -> str | None:
    """Slack's client checks a number input before it submits; so does the page's."""
    if raw in (None, ""):
        return None
    text = str(raw).strip()
    try:
        number = float(text)
    except ValueError:
        raise PageError(f"{text!r} is not a number") from None
    if not element.get("is_decimal_allowed") and not number.is_integer():
        raise PageError("a whole number, please")
    for bound, beyond in (("min_value", number.__lt__), ("max_value", number.__gt__)):
        if bound in element and beyond(float(element[bound])):
            limit = "at least" if bound == "min_value" else "at most"
            raise PageError(f"must be {limit} {element[bound]}")
    return text


def _is_empty(state: dict[str, Any]) -> bool:
    return all(v in (None, []) for k, v in state.items() if k != "type")


def _label(block: dict[str, Any]) -> str:
    label = block.get("label")
    return str(label.get("text")) if isinstance(label, dict) else "this field"


# -- the app's answers ------------------------------------------------------------------------


def _apply_response_action(ws: Workspace, user: str, view_id: str, answer: dict[str, Any]) -> None:
    """A `view_submission`'s answer: close, show errors, update, push or clear."""
    action = answer.get("response_action")
    if action is None:
        ws.ui.close(user)
    elif action == "errors":
        errors = answer.get("errors")
        if not isinstance(errors, dict):
            raise PageError("the app answered errors without an errors object")
        ws.ui.view_errors[view_id] = {str(k): str(v) for k, v in errors.items()}
    elif action == "update":
        view = check_view(answer.get("view"))
        ws.update_view(view, view_id=view_id, external_id=None, expected_hash=None)
    elif action == "push":
        stack = ws.ui.modal_of(user)
        pushed = ws.open_view(check_view(answer.get("view")), root_view_id=stack[0])
        stack.append(pushed["id"])
    elif action == "clear":
        ws.ui.close(user, everything=True)
    else:
        raise PageError(f"the app answered an unknown response_action {action!r}")


def _answer_in(
    ws: Workspace, channel: str, user: str, data: dict[str, Any], *, message_ts: str | None
) -> None:
    """A slash command's body or a response_url post, as Slack shows it."""
    text = str(data.get("text") or "")
    blocks = data.get("blocks") if isinstance(data.get("blocks"), list) else []
    if message_ts and data.get("delete_original"):
        ws.delete(channel, message_ts)
        return
    if message_ts and data.get("replace_original") in (True, "true"):
        ws.update(channel, message_ts, text=text, blocks=blocks)
        return
    thread_ts = data.get("thread_ts")
    if data.get("response_type") == "in_channel":
        ws.post(channel, text=text, blocks=blocks, thread_ts=thread_ts)
        return
    ws.post_ephemeral(channel, user, text=text, blocks=blocks, thread_ts=thread_ts)
