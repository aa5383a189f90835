// Slack's mrkdwn to safe HTML: text arrives with &, < and > escaped as Slack escapes them, and
// `<...>` holding links, mentions and dates. Everything else is escaped before any markup is added,
// so an alert's text can never become HTML.

import { slackDate } from "./dates.js";

const EMOJI = {
  rotating_light: "🚨", warning: "⚠️", white_check_mark: "✅", red_circle: "🔴",
  large_green_circle: "🟢", large_yellow_circle: "🟡", mag: "🔍", mute: "🔇", sound: "🔉",
  arrow_up: "⬆️", hourglass: "⌛", chart_with_upwards_trend: "📈", eyes: "👀", fire: "🔥",
};

export function escapeHtml(text) {
  return String(text)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

function unescapeSlack(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function safeUrl(url) {
  return /^(https?:|mailto:)/i.test(url) ? url : null;
}

// `names`: users' and channels' names by ID. Slack shows a channel's name as it is now, whatever
// the label says.
function special(inner, names) {
  const [target, label] = splitOnce(inner, "|");
  if (target.startsWith("@")) {
    const name = names[target.slice(1)] || label || target.slice(1);
    return `<span class="mention">@${escapeHtml(name)}</span>`;
  }
  if (target.startsWith("#")) {
    const name = names[target.slice(1)] || label || target.slice(1);
    return `<span class="mention">#${escapeHtml(name)}</span>`;
  }
  if (target.startsWith("!date^")) {
    // In the reader's zone with the token's format, as Slack shows it; the fallback only where
    // Slack would show it too. The moment itself is kept as a <time> element's, to the second.
    const [, epoch, format = "", link = ""] = unescapeSlack(target).split("^");
    const moment = new Date(Number(epoch) * 1000);
    const shown = slackDate(epoch, format);
    const text = escapeHtml(shown ?? unescapeSlack(label || ""));
    if (shown === null) return text;
    const time = `<time datetime="${moment.toISOString()}">${text}</time>`;
    const url = safeUrl(link);
    return url ? `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${time}</a>` : time;
  }
  if (target.startsWith("!")) {
    return `<span class="mention">@${escapeHtml(target.slice(1).split("^")[0])}</span>`;
  }
  const url = safeUrl(unescapeSlack(target));
  // Anything else between < and > is a link to nowhere: Slack shows its label, and without one
  // nothing at all (an unescaped `<duration>` in a message disappears there, so it does here).
  if (!url) return escapeHtml(unescapeSlack(label));
  const text = escapeHtml(unescapeSlack(label || target));
  return `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${text}</a>`;
}

function splitOnce(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
}

function inline(html) {
  const edge = "(^|[\\s(\\[{>\"'])";
  const end = "(?=$|[\\s)\\]}.,;:!?<\"'])";
  return html
    .replace(new RegExp(`${edge}\\*([^*\\n]+?)\\*${end}`, "g"), "$1<b>$2</b>")
    .replace(new RegExp(`${edge}_([^_\\n]+?)_${end}`, "g"), "$1<i>$2</i>")
    .replace(new RegExp(`${edge}~([^~\\n]+?)~${end}`, "g"), "$1<s>$2</s>")
    .replace(/:([a-z0-9_+-]+):/g, (whole, name) => EMOJI[name] || whole);
}

export function mrkdwn(text, names = {}) {
  const pieces = [];
  const stash = (html) => `\u0000${pieces.push(html) - 1}\u0000`;
  let source = String(text || "").replace(/<([^<>\n]+)>/g, (_, inner) => stash(special(inner, names)));
  // Code spans and blocks are literal: nothing inside them is formatted.
  source = source.replace(/```([\s\S]*?)```/g, (_, code) => stash(`<pre>${escapeHtml(unescapeSlack(code))}</pre>`));
  source = source.replace(/`([^`\n]+)`/g, (_, code) => stash(`<code>${escapeHtml(unescapeSlack(code))}</code>`));
  const lines = escapeHtml(unescapeSlack(source)).split("\n");
  const out = [];
  let quote = [];
  const flush = () => {
    if (quote.length) out.push(`<blockquote>${quote.join("<br>")}</blockquote>`);
    quote = [];
  };
  for (const line of lines) {
    const quoted = line.match(/^&gt; ?(.*)$/);
    if (quoted) { quote.push(inline(quoted[1])); continue; }
    flush();
    out.push(inline(line));
  }
  flush();
  // A code span set aside a token inside it: restored within the span, never shown as its number.
  const restore = (html) => html.replace(/\u0000(\d+)\u0000/g, (_, i) => restore(pieces[Number(i)]));
  return restore(out.join("<br>").replace(/<\/blockquote><br>/g, "</blockquote>"));
}

export function plain(text) {
  return escapeHtml(String(text || "")).replace(/\n/g, "<br>");
}

// A text object ({type: "mrkdwn" | "plain_text", text}) as HTML.
export function textObject(object, names) {
  if (!object) return "";
  return object.type === "mrkdwn" ? mrkdwn(object.text, names) : plain(object.text);
}
