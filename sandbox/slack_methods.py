"""The Slack Web API methods the emulator serves, each a function of (workspace, parameters).

Which arguments a method requires, and whether it reads a JSON body at all, come from Slack's
own table of its methods (`web_api_methods.json`, shipped with the emulator): `check_required`
refuses a call without one before any handler runs. A handler then reads its parameters the
way Slack does (malformed ones earn `invalid_arguments` with Slack's wording), checks the
payload against `slack_limits`, asks the `Workspace` to act and shapes the reply. Handlers run
under the emulator's lock and return only the fields after `"ok": true`; the HTTP layer
(`slack_api`) adds the rest.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from importlib import resources
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.views import View

from sandbox.slack_limits import (
    MAX_VIEW_BLOCKS,
    MAX_VIEW_BYTES,
    SCHEMA_MISMATCH,
    check_content,
    check_metadata,
    located,
    validate_blocks,
)
from sandbox.slack_model import (
    BOT_ID,
    BOT_USER_ID,
    BOT_USER_NAME,
    TEAM_ID,
    TEAM_NAME,
    Message,
    SlackError,
    invalid_arguments,
)
from sandbox.slack_state import Workspace

Params = dict[str, Any]
Handler = Callable[[Workspace, Params, str], dict[str, Any]]

# Slack's description of every Web API method: `json` (does it read an application/json body),
# `slack_sdk_sends` (query, form or json) and `required` (arguments it refuses to run without).
WEB_API: Mapping[str, Mapping[str, Any]] = json.loads(
    resources.files(__package__).joinpath("web_api_methods.json").read_text(encoding="utf-8")
)["methods"]


def takes_json(method: str) -> bool:
    """Whether Slack reads this method's arguments from a JSON body; for the others a JSON body
    reaches Slack as no arguments at all."""
    return bool(WEB_API.get(method, {}).get("json"))


def check_required(method: str, p: Params) -> None:
    """Refuse a call that lacks an argument Slack requires for `method`, as Slack does.

    Absent is what counts: Slack resolves an empty value like any other (`channel=` is
    `channel_not_found`, `ts=` in conversations.replies `thread_not_found`), measured against
    slack.com in brekkylab/backlot#84.
    """
    missing = [name for name in WEB_API.get(method, {}).get("required", ()) if p.get(name) is None]
    if missing:
        raise invalid_arguments(*(f"[ERROR] missing required field: {name}" for name in missing))


# -- reading parameters --------------------------------------------------------------------


def _required(p: Params, name: str) -> str:
    """An argument the handler cannot do without (`check_required` has already refused the
    table's required ones when absent; an empty one goes on to fail as Slack resolves it)."""
    value = p.get(name)
    if value is None:
        raise invalid_arguments(f"[ERROR] missing required field: {name}")
    return str(value)


def optional(p: Params, name: str) -> str | None:
    """The parameter as text, or None: Slack treats an empty value as an absent one."""
    value = p.get(name)
    return None if value is None or value == "" else str(value)


def _flag(p: Params, name: str) -> bool:
    return str(p.get(name, "")).lower() in ("1", "true")


def _integer(p: Params, name: str, default: int) -> int:
    value = p.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise invalid_arguments(f"[ERROR] {name} must be an integer") from None


def _blocks(p: Params) -> list[dict[str, Any]] | None:
    blocks = p.get("blocks")
    if blocks is None or isinstance(blocks, list):
        return blocks
    raise SlackError("invalid_blocks_format")


def _text_and_blocks(ws: Workspace, p: Params) -> tuple[str, list[dict[str, Any]] | None]:
    blocks = _blocks(p)
    text = str(p.get("text") or "")
    check_content(text, blocks, has_other=bool(p.get("attachments")), chart_blocks=ws.chart_blocks)
    return text, blocks


# -- chat.* and conversations.* ----------------------------------------------------------


def _auth_test(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {
        "url": base_url,
        "team": TEAM_NAME,
        "user": BOT_USER_NAME,
        "team_id": TEAM_ID,
        "user_id": BOT_USER_ID,
        "bot_id": BOT_ID,
        "is_enterprise_install": False,
    }


def _chat_post_message(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel = _required(p, "channel")
    ws.writable_channel(channel)  # Slack reports channel problems before content problems
    text, blocks = _text_and_blocks(ws, p)
    message = ws.post(
        channel,
        text=text,
        blocks=blocks or [],
        thread_ts=optional(p, "thread_ts"),
        metadata=check_metadata(p.get("metadata")),
        broadcast=_flag(p, "reply_broadcast"),
    )
    return {"channel": channel, "ts": message.ts, "message": ws.render(message)}


def _chat_update(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, ts = _required(p, "channel"), _required(p, "ts")
    ws.find(channel, ts)
    text, blocks = _text_and_blocks(ws, p)
    new_text = text if "text" in p else None
    metadata = check_metadata(p.get("metadata"))
    message = ws.update(channel, ts, text=new_text, blocks=blocks, metadata=metadata)
    return {"channel": channel, "ts": ts, "text": message.text, "message": ws.render(message)}


def _chat_post_ephemeral(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, user = _required(p, "channel"), _required(p, "user")
    ws.writable_channel(channel)
    text, blocks = _text_and_blocks(ws, p)
    message = ws.post_ephemeral(
        channel, user, text=text, blocks=blocks or [], thread_ts=optional(p, "thread_ts")
    )
    return {"message_ts": message.ts}


def _chat_get_permalink(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, ts = _required(p, "channel"), _required(p, "message_ts")
    message = ws.find(channel, ts)
    link = f"{base_url}archives/{channel}/p{ts.replace('.', '')}"
    if message.thread_ts is not None:
        link += f"?thread_ts={message.thread_ts}&cid={channel}"
    return {"channel": channel, "permalink": link}


def _conversations_info(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    """A public channel as Slack describes it to a bot: anyone may look, `is_member` says
    whether the app is in it (an archived one too, `is_archived`)."""
    channel = ws.channel(_required(p, "channel"))
    return {
        "channel": {
            "id": channel.id,
            "name": ws.channel_name(channel.id),
            "is_channel": True,
            "is_private": False,
            "is_archived": channel.archived,
            "is_member": channel.member,
        }
    }


def _conversations_history(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel = ws.channel(_required(p, "channel"))
    if not channel.member:
        raise SlackError("not_in_channel")
    inclusive = _flag(p, "inclusive")
    oldest, latest = _ts_bound(p, "oldest"), _ts_bound(p, "latest")
    newest_first = [
        m for m in reversed(channel.timeline) if _in_window(m.ts, oldest, latest, inclusive)
    ]
    page, paging = _paginate(newest_first, p, ws, "conversations.history")
    return {"messages": _rendered(ws, page, p), "pin_count": 0, **paging}


def _conversations_replies(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel_id, ts = _required(p, "channel"), _required(p, "ts")
    if not ws.channel(channel_id).member:
        raise SlackError("not_in_channel")
    inclusive = _flag(p, "inclusive")
    oldest, latest = _ts_bound(p, "oldest"), _ts_bound(p, "latest")
    parent, *replies = ws.thread(channel_id, ts)
    # Slack's docs (conversations.replies): "The earliest messages in the time range are
    # returned first"; `inclusive` keeps a message at exactly `oldest` or `latest`. The parent
    # comes first whatever the window, on the first page only: the docs do not say so, but
    # clients of the real API drop it for that reason ("conversations.replies always returns
    # the parent regardless of `oldest`", in several unrelated projects; "continuation pages
    # omit the thread parent", a review on simstudioai/sim#4934).
    in_window = [m for m in replies if _in_window(m.ts, oldest, latest, inclusive)]
    page, paging = _paginate([parent, *in_window], p, ws, "conversations.replies")
    return {"messages": _rendered(ws, page, p), **paging}


def _rendered(ws: Workspace, messages: list[Message], p: Params) -> list[dict[str, Any]]:
    """Slack's docs (conversations.history, conversations.replies): `include_all_metadata`,
    "Return all metadata associated with this message", default false: without it a message
    comes without its `metadata`."""
    rendered = [ws.render(m) for m in messages]
    if not _flag(p, "include_all_metadata"):
        for message in rendered:
            message.pop("metadata", None)
    return rendered


def _ts_bound(p: Params, name: str) -> Decimal | None:
    value = optional(p, name)
    if value is None:
        return None
    try:
        return Decimal(value)
    except InvalidOperation:
        raise SlackError(f"invalid_ts_{name}") from None  # Slack's invalid_ts_oldest/_latest


def _in_window(ts: str, oldest: Decimal | None, latest: Decimal | None, inclusive: bool) -> bool:
    value = Decimal(ts)
    if oldest is not None and (value < oldest or (value == oldest and not inclusive)):
        return False
    return latest is None or value < latest or (value == latest and inclusive)


def _paginate(
    items: list[Message], p: Params, ws: Workspace, method: str
) -> tuple[list[Message], Params]:
    """Pages of the size the app's history tier allows; offset cursors, base64-wrapped so
    clients treat them as opaque like Slack's."""
    requested = _integer(p, "limit", 0)
    limit = ws.history.page_size(method, requested)
    start = _decode_cursor(optional(p, "cursor"))
    end = start + limit
    next_cursor = base64.b64encode(f"offset:{end}".encode()).decode() if end < len(items) else ""
    paging = {"has_more": bool(next_cursor), "response_metadata": {"next_cursor": next_cursor}}
    return items[start:end], paging


def _decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        prefix, _, offset = base64.b64decode(cursor).decode().partition(":")
        if prefix == "offset":
            return max(0, int(offset))
    except ValueError:
        pass
    raise SlackError("invalid_cursor")


# -- views.* -----------------------------------------------------------------------------

# Slack's modal stack: views.open's view and at most two pushed on it ("push_limit_reached").
MAX_VIEW_STACK = 3


def check_view(view: object) -> dict[str, Any]:
    """Structural checks Slack applies to a view (from a views.* call or an app's
    `response_action`), reported as invalid_arguments."""
    return _view({"view": view})


def _view(p: Params) -> dict[str, Any]:
    """The view, or `invalid_arguments` naming what Slack would refuse in it, as views.open
    answers: "[ERROR] failed to match all allowed schemas [json-pointer:/view]" first (a view
    is one of several schemas), then each problem at its field, e.g. "[ERROR] must be less than
    3001 characters [json-pointer:/view/private_metadata]" or "[ERROR] no more than 10 items
    allowed [json-pointer:/view/blocks/13/fields]" (both quoted from Slack's answers by apps
    that met them; Slack puts no top-level `errors` on views.* refusals)."""
    view = p.get("view")
    if not isinstance(view, dict):
        raise invalid_arguments("[ERROR] missing required field: view")
    if view.get("type") not in ("modal", "home"):
        raise invalid_arguments("[ERROR] view type must be modal or home [json-pointer:/view/type]")
    if view["type"] == "modal" and not view.get("title"):
        raise invalid_arguments("[ERROR] missing required field: title [json-pointer:/view]")
    blocks = view.get("blocks", [])
    problems = [
        e.replace("[json-pointer:/blocks", "[json-pointer:/view/blocks")
        for e in validate_blocks(blocks, limit=MAX_VIEW_BLOCKS)
    ]
    # The view's own limits (title, submit and close text, private_metadata...) from slack_sdk's
    # model. Its blocks are judged above; the model would also want at least one, which
    # Slack's view reference does not ask, so it sees a stand-in.
    try:
        View(**{**view, "blocks": [{"type": "divider"}]}).validate_json()
    except (SlackObjectFormationError, TypeError) as exc:
        problems += [
            f"[ERROR] {why} [json-pointer:{at}]" for at, why in located(view, "/view", str(exc))
        ]
    if problems:
        raise invalid_arguments(f"[ERROR] {SCHEMA_MISMATCH} [json-pointer:/view]", *problems)
    # A block_id names one block of the view (Slack's block reference: "a unique identifier");
    # a view with two of one is refused invalid_arguments (slack-go/slack#725 met it, with no
    # message beside it: this one is the emulator's wording).
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        block_id = block.get("block_id")
        if not isinstance(block_id, str):
            continue
        if block_id in seen:
            raise invalid_arguments(
                f"[ERROR] block_id must be unique [json-pointer:/view/blocks/{i}/block_id]"
            )
        seen.add(block_id)
    inputs = [i for i, block in enumerate(blocks) if block.get("type") == "input"]
    if view["type"] == "modal" and not view.get("submit") and inputs:
        # Slack's view reference: "submit is required when an input block is within the
        # blocks array"; its answer, node-slack-sdk#875.
        raise invalid_arguments(
            "[ERROR] must define `submit` to use `input` block"
            f" [json-pointer:/view/blocks/{inputs[0]}/input]"
        )
    return view


def _views_open(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    user = ws.ui.take_trigger(_required(p, "trigger_id"))
    view = ws.open_view(_view(p))
    if user is not None:  # a trigger the page issued: the modal opens in front of its user
        ws.ui.modals[user] = [view["id"]]
    return {"view": view}


def _views_push(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    user = ws.ui.take_trigger(_required(p, "trigger_id"))
    stack = ws.ui.modal_of(user) if user is not None else []
    if len(stack) >= MAX_VIEW_STACK:
        raise SlackError("push_limit_reached")
    root = ws.views[stack[0]]["root_view_id"] if stack else ws.latest_modal_root()
    view = ws.open_view(_view(p), root_view_id=root)
    if user is not None:
        stack.append(view["id"])
    return {"view": view}


def _views_update(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    view = _view(p)
    view_id, external_id = optional(p, "view_id"), optional(p, "external_id")
    if view_id is None and external_id is None:
        raise invalid_arguments("[ERROR] either view_id or external_id is required")
    updated = ws.update_view(
        view, view_id=view_id, external_id=external_id, expected_hash=optional(p, "hash")
    )
    return {"view": updated}


def _views_publish(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    """A person's Home tab (views.publish's page): a user the workspace does not know is
    `invalid_arguments` "invalid `user_id`" (the page's own example of an error), an app without
    its Home tab `not_enabled`, a view that is no `home` view refused as views.* refuse a view,
    one over 250 kB `view_too_large`, a stale `hash` `hash_conflict`."""
    user = _required(p, "user_id")
    if user not in ws.users:
        raise invalid_arguments("invalid `user_id`")
    if not ws.home_enabled:
        raise SlackError("not_enabled")
    view = _view(p)
    if view["type"] != "home":
        raise invalid_arguments(
            f"[ERROR] {SCHEMA_MISMATCH} [json-pointer:/view]",
            "[ERROR] must be home [json-pointer:/view/type]",
        )
    if len(json.dumps(view).encode()) > MAX_VIEW_BYTES:
        raise SlackError("view_too_large")
    return {"view": ws.publish_home(user, view, expected_hash=optional(p, "hash"))}


# -- users.*, usergroups.*, files.* --------------------------------------------------------


def _users_info(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {"user": ws.user(_required(p, "user"))}


def _usergroups_users_list(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {"users": ws.usergroup_members(_required(p, "usergroup"))}


def _files_get_upload_url(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    filename = _required(p, "filename")
    length = _integer(p, "length", -1)
    if length < 0:
        raise invalid_arguments("[ERROR] missing required field: length")
    stored = ws.reserve_file(filename, length)
    return {"upload_url": f"{base_url}_emulator/upload/{stored.id}", "file_id": stored.id}


def _files_complete_upload(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    entries = p.get("files")
    if not isinstance(entries, list) or not entries:
        raise invalid_arguments("[ERROR] missing required field: files")
    channel_id = optional(p, "channel_id")
    targets = (
        [channel_id] if channel_id else [c for c in str(p.get("channels", "")).split(",") if c]
    )
    thread_ts = optional(p, "thread_ts")
    for target in targets:  # check every destination before changing anything
        ws.writable_channel(target)
    files = ws.complete_upload(entries)
    comment = str(p.get("initial_comment") or "")
    for target in targets:
        ws.share_files(files, target, comment=comment, thread_ts=thread_ts)
    return {"files": [stored.public() for stored in files]}


def _files_info(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    stored = ws.files.get(_required(p, "file"))
    if stored is None:
        raise SlackError("file_not_found")
    return {"file": stored.public()}


# The bot token scope each method needs, as Slack's method pages list them for a public channel
# (the emulator's channels are all public; a private one would take groups:read and
# groups:history). Missing, Slack answers `missing_scope` naming it (`needed`) and the token's
# scopes (`provided`). auth.test, chat.getPermalink and views.* need none.
SCOPES: Mapping[str, str] = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.info": "channels:read",
    "conversations.history": "channels:history",
    "conversations.replies": "channels:history",
    "users.info": "users:read",
    "usergroups.users.list": "usergroups:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "files.info": "files:read",
}
# What an app installed with every feature on holds (and files:read, for files.info): what the
# emulator grants unless told otherwise.
ALL_SCOPES = frozenset({*SCOPES.values(), "commands", "groups:read", "groups:history"})


def check_scope(method: str, granted: frozenset[str]) -> None:
    """Refuse a call whose token lacks the method's scope, as Slack does."""
    needed = SCOPES.get(method)
    if needed is not None and needed not in granted:
        provided = ",".join(sorted(granted))
        raise SlackError("missing_scope", extra={"needed": needed, "provided": provided})


METHODS: dict[str, Handler] = {
    "auth.test": _auth_test,
    "chat.postMessage": _chat_post_message,
    "chat.update": _chat_update,
    "chat.postEphemeral": _chat_post_ephemeral,
    "chat.getPermalink": _chat_get_permalink,
    "conversations.info": _conversations_info,
    "conversations.history": _conversations_history,
    "conversations.replies": _conversations_replies,
    "views.open": _views_open,
    "views.push": _views_push,
    "views.update": _views_update,
    "views.publish": _views_publish,
    "users.info": _users_info,
    "usergroups.users.list": _usergroups_users_list,
    "files.getUploadURLExternal": _files_get_upload_url,
    "files.completeUploadExternal": _files_complete_upload,
    "files.info": _files_info,
}
