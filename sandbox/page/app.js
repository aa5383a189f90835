// The local Slack page: shows the emulator's workspace to one person and tells the emulator what
// they did. The emulator turns each act into the signed request Slack would send the bot; this
// file never talks to the bot itself.

import { collectValues, el, renderBlocks } from "./blocks.js";
import { clock } from "./dates.js";
import { mrkdwn } from "./mrkdwn.js";

const view = {
  state: null,
  channel: null, // the channel shown
  home: false, // the app's Home tab is shown instead of a channel
  thread: null, // root ts of the open thread
  threadClosed: false, // the visitor closed it: do not reopen one by itself
  threadAuto: false, // the open thread was chosen by the page, not the visitor: it follows the newest
  modalKey: null,
};

const $ = (id) => document.getElementById(id);

// A permalink (/archives/C…/p…, a reply's with ?thread_ts=) opens its channel at its thread, as
// Slack's client does.
function openPermalink() {
  const found = location.pathname.match(/^\/archives\/([^/]+)\/p(\d+)(\d{6})$/);
  if (!found) return;
  view.channel = found[1];
  view.thread = new URLSearchParams(location.search).get("thread_ts") || `${found[2]}.${found[3]}`;
}

async function post(path, body) {
  let answer;
  try {
    const response = await fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    answer = await response.json();
  } catch (error) {
    answer = { ok: false, problem: `the local Slack did not answer (${error})` };
  }
  if (!answer.ok) toast(answer.problem || "something went wrong");
  return answer;
}

function toast(message) {
  const box = $("toast");
  box.textContent = message;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 6000);
}

// -- state and live updates ------------------------------------------------------------------

async function refresh() {
  const response = await fetch("/_page/state", { cache: "no-store" });
  view.state = await response.json();
  render();
}

function listen() {
  const events = new EventSource("/_page/events");
  let pending = null;
  events.addEventListener("change", () => {
    // Changes come in bursts (a post, then its edit): one refresh per frame is enough.
    if (pending) return;
    pending = requestAnimationFrame(async () => { pending = null; await refresh(); });
  });
  events.onopen = () => $("live").classList.add("on");
  events.onerror = () => $("live").classList.remove("on");
}

// -- rendering -------------------------------------------------------------------------------

function render() {
  const state = view.state;
  document.body.dataset.version = state.version;
  $("me").textContent = `● ${state.me.name}`;
  const channels = state.channels;
  if (!view.channel || !channels.some((c) => c.id === view.channel)) view.channel = channels[0]?.id;
  $("channels").replaceChildren(...channels.map((c) => el("li", {},
    el("button", {
      type: "button", class: c.id === view.channel && !view.home ? "channel current" : "channel",
      onclick: () => { view.channel = c.id; view.home = false; view.thread = null; render(); },
    }, `# ${c.name}`))));
  $("home-link").className = view.home ? "channel current" : "channel";
  renderModal(state.modal);
  if (view.home) { renderHome(state.home); return; }
  $("home").hidden = true;
  $("messages").hidden = false;
  $("composer").hidden = false;
  const channel = channels.find((c) => c.id === view.channel);
  if (!channel) return;
  $("channel-name").textContent = `# ${channel.name}`;
  $("composer-input").placeholder = `Message #${channel.name}, or type ${state.command} help`;
  renderChannel(channel);
  renderThread(channel);
}

// The app's Home tab: the view the app last published to this person, drawn like any blocks.
function renderHome(home) {
  $("channel-name").textContent = "queuepilot · Home";
  $("messages").hidden = true;
  $("composer").hidden = true;
  $("thread").hidden = true;
  const box = $("home");
  box.hidden = false;
  box.dataset.hash = home?.hash || "";
  box.replaceChildren(home ? renderBlocks(home.blocks, {
    names: view.state.names, confirm,
    act: () => toast("The local page takes no clicks on the Home tab"),
  }) : el("p", { class: "empty" }, "Opening queuepilot's Home…"));
}

function renderChannel(channel) {
  const box = $("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const loose = channel.ephemerals.filter((e) => !e.thread_ts);
  const items = [...channel.messages.map((m) => ({ ...m, kind: "message" })),
    ...loose.map((e) => ({ ...e, kind: "ephemeral" }))].sort((a, b) => Number(a.ts) - Number(b.ts));
  if ((!view.thread || view.threadAuto) && !view.threadClosed) {
    // Follow the newest incident by itself: the newest message with a thread, else an incident's
    // root before its first reply (its metadata names it "root"); a message of its own, such as
    // an early warning or the weekly report, opens no thread.
    const newest = [...channel.messages].reverse();
    const isRoot = (m) => m.metadata?.event_payload?.item === "root";
    const incident = newest.find((m) => m.reply_count) || (view.thread ? null : newest.find(isRoot));
    if (incident) { view.thread = incident.ts; view.threadAuto = true; }
  }
  box.replaceChildren(...(items.length ? items.map((item) => message(item, channel, true))
    : [el("p", { class: "empty" }, "No messages yet. The simulated fleet's alert will open an incident here.")]));
  if (atBottom) stickToBottom(box);
}

function renderThread(channel) {
  const pane = $("thread");
  const root = channel.messages.find((m) => m.ts === view.thread);
  if (!root) { pane.hidden = true; return; }
  const opened = pane.hidden || pane.dataset.root !== root.ts;
  pane.hidden = false;
  pane.dataset.root = root.ts;
  const box = $("thread-messages");
  const atBottom = opened || box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const mine = channel.ephemerals.filter((e) => e.thread_ts === root.ts).map((e) => ({ ...e, kind: "ephemeral" }));
  const replies = [...root.replies.map((r) => ({ ...r, kind: "message" })), ...mine]
    .sort((a, b) => Number(a.ts) - Number(b.ts));
  box.replaceChildren(
    message({ ...root, kind: "message" }, channel, false),
    el("div", { class: "reply-count" }, `${root.replies.length} ${root.replies.length === 1 ? "reply" : "replies"}`),
    ...replies.map((r) => message(r, channel, false)));
  if (atBottom) stickToBottom(box);
}

// Scroll to the newest message, again as images load (a chart arrives after its message).
function stickToBottom(box) {
  box.scrollTop = box.scrollHeight;
  for (const image of box.querySelectorAll("img")) {
    if (!image.complete) image.addEventListener("load", () => { box.scrollTop = box.scrollHeight; }, { once: true });
  }
}

function message(item, channel, inChannel) {
  const names = view.state.names;
  // An ephemeral's `user` is who sees it; the app sent it (the page has no other sender of them).
  const isBot = item.kind === "ephemeral" || item.user === view.state.bot_user_id || item.bot_id;
  const name = isBot ? "queuepilot" : names[item.user] || item.user;
  const when = clock(item.ts);
  const ctx = {
    names,
    confirm,
    act: (blockId, element, selected) => post("/_page/action", {
      channel: channel.id, message_ts: item.ts, block_id: blockId, action_id: element.action_id, selected,
    }),
  };
  const interactive = item.kind === "message";
  const body = item.blocks?.length ? renderBlocks(item.blocks, interactive ? ctx : { ...ctx, act: () => {} })
    : el("div", { class: "message-text", html: mrkdwn(item.text, names) });
  const files = (item.files || []).map((file) => file.mimetype?.startsWith("image/")
    ? el("figure", { class: "file" },
      el("img", { src: `/_emulator/files/${file.id}`, alt: file.title || file.name, loading: "lazy" }),
      el("figcaption", {}, file.title || file.name))
    : el("div", { class: "file" }, `📎 ${file.title || file.name}`));
  const threadLink = inChannel && item.reply_count ? el("button", {
    type: "button", class: "thread-link",
    onclick: () => { view.thread = item.ts; view.threadAuto = false; view.threadClosed = false; render(); },
  }, `${item.reply_count} ${item.reply_count === 1 ? "reply" : "replies"}`) : null;
  return el("article", {
    class: `message ${item.kind}${view.thread === item.ts && inChannel ? " selected" : ""}`,
    "data-ts": item.ts,
  },
  el("div", { class: `avatar${isBot ? " bot" : ""}` }, name[0].toUpperCase()),
  el("div", { class: "message-main" },
    el("div", { class: "message-meta" },
      el("b", {}, name), isBot ? el("span", { class: "app-badge" }, "APP") : null,
      el("time", {}, when), item.edits ? el("span", { class: "edited" }, "(edited)") : null,
      item.kind === "ephemeral" ? el("span", { class: "only-you" }, "Only visible to you") : null),
    body, ...files, threadLink));
}

// -- modals and confirm dialogs ------------------------------------------------------------------

function renderModal(modal) {
  const overlay = $("overlay");
  const key = modal ? `${modal.id}:${modal.hash}:${JSON.stringify(modal.errors)}` : null;
  if (key === view.modalKey) return; // unchanged: keep what the visitor typed
  view.modalKey = key;
  if (!modal) { overlay.hidden = true; overlay.replaceChildren(); return; }
  const form = el("form", { class: "modal", role: "dialog", "aria-modal": "true", "aria-label": modal.title?.text });
  const body = renderBlocks(modal.blocks, {
    names: view.state.names, confirm, errors: modal.errors,
    act: (blockId, element, selected) => post("/_page/action", { view_id: modal.id, block_id: blockId, action_id: element.action_id, selected }),
  });
  const close = () => post("/_page/view/close", { view_id: modal.id });
  form.append(
    el("header", {}, el("h2", {}, modal.title?.text || ""), el("button", { type: "button", class: "modal-x", "aria-label": "Close", onclick: close }, "×")),
    el("div", { class: "modal-body" }, body),
    el("footer", {},
      el("button", { type: "button", class: "button", onclick: close }, modal.close?.text || "Cancel"),
      modal.submit ? el("button", { type: "submit", class: "button button-primary" }, modal.submit.text) : null));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("button[type=submit]");
    submit.disabled = true;
    await post("/_page/view", { view_id: modal.id, values: collectValues(form) });
    submit.disabled = false;
  });
  overlay.replaceChildren(form);
  overlay.hidden = false;
}

function confirm(dialog) {
  return new Promise((resolve) => {
    const overlay = el("div", { class: "confirm-overlay" });
    const done = (answer) => { overlay.remove(); resolve(answer); };
    overlay.append(el("div", { class: "modal confirm", role: "alertdialog", "aria-label": dialog.title?.text || "Confirm" },
      el("header", {}, el("h2", {}, dialog.title?.text || "Are you sure?")),
      el("div", { class: "modal-body", html: mrkdwn(dialog.text?.text || "", view.state.names) }),
      el("footer", {},
        el("button", { type: "button", class: "button", onclick: () => done(false) }, dialog.deny?.text || "Cancel"),
        el("button", { type: "button", class: `button button-${dialog.style || "primary"}`, onclick: () => done(true) }, dialog.confirm?.text || "Yes"))));
    document.body.append(overlay);
  });
}

// -- composer ------------------------------------------------------------------------------------

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("composer-input");
  const text = input.value.trim();
  if (!text) return;
  if (!text.startsWith("/")) {
    toast(`Only slash commands reach the bot here: try ${view.state.command} help`);
    return;
  }
  input.value = "";
  const answer = await post("/_page/command", { channel: view.channel, text });
  if (!answer.ok) input.value = text;
});

// Opening the Home tab is what Slack tells the app (app_home_opened): the app publishes it.
$("home-link").addEventListener("click", () => {
  view.home = true;
  render();
  post("/_page/home", {});
});

$("thread-close").addEventListener("click", () => { view.thread = null; view.threadClosed = true; render(); });

openPermalink();
refresh().then(listen);
