// Slack's `<!date^epoch^format^link|fallback>` as Slack's client shows it: in the reader's time
// zone (the browser's), each {token} of the format replaced, the rest of the format kept as
// written. The page's message headers use `clock`, so a header and the text under it agree.

const DAY_MS = 86_400_000;

function parts(moment, options) {
  return Object.fromEntries(new Intl.DateTimeFormat("en-US", options).formatToParts(moment)
    .map((part) => [part.type, part.value]));
}

function ordinal(day) {
  const n = Number(day);
  const suffix = n % 100 >= 11 && n % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] || "th";
  return `${n}${suffix}`;
}

// The reader's hour cycle (6:39 PM or 18:39), as Slack takes it from the user's preference.
function timeOf(moment, seconds) {
  const options = { hour: "numeric", minute: "2-digit", ...(seconds ? { second: "2-digit" } : {}) };
  return new Intl.DateTimeFormat([], options).format(moment);
}

function calendarDay(moment) {
  const p = parts(moment, { year: "numeric", month: "2-digit", day: "2-digit" });
  return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day));
}

// "today", "yesterday" or "tomorrow" in the reader's zone; null on any other day.
function nearDay(moment, now) {
  const days = Math.round((calendarDay(moment) - calendarDay(now)) / DAY_MS);
  return { "-1": "yesterday", 0: "today", 1: "tomorrow" }[days] ?? null;
}

function ago(moment, now) {
  const seconds = Math.round((now - moment) / 1000);
  const future = seconds < 0;
  const size = Math.abs(seconds);
  const [count, unit] = size < 60 ? [size, "second"] : size < 3600 ? [Math.floor(size / 60), "minute"]
    : size < 86_400 ? [Math.floor(size / 3600), "hour"] : [Math.floor(size / 86_400), "day"];
  const said = `${count} ${unit}${count === 1 ? "" : "s"}`;
  return future ? `in ${said}` : `${said} ago`;
}

function token(name, moment, now) {
  const p = parts(moment, {
    year: "numeric", month: "long", day: "numeric", weekday: "long",
  });
  const short = parts(moment, { month: "short" }).month;
  const num = parts(moment, { year: "numeric", month: "2-digit", day: "2-digit" });
  const formats = {
    date_num: () => `${num.year}-${num.month}-${num.day}`,
    date: () => `${p.month} ${ordinal(p.day)}, ${p.year}`,
    date_short: () => `${short} ${p.day}, ${p.year}`,
    date_long: () => `${p.weekday}, ${p.month} ${ordinal(p.day)}, ${p.year}`,
    date_pretty: () => nearDay(moment, now) ?? formats.date(),
    date_short_pretty: () => nearDay(moment, now) ?? formats.date_short(),
    date_long_pretty: () => nearDay(moment, now) ?? formats.date_long(),
    time: () => timeOf(moment, false),
    time_secs: () => timeOf(moment, true),
    ago: () => ago(moment, now),
  };
  return formats[name]?.() ?? null;
}

// The format's text with its tokens filled in; null when a token is not one Slack knows, so the
// caller shows the fallback as Slack does.
export function slackDate(epoch, format, now = new Date()) {
  const moment = new Date(Number(epoch) * 1000);
  if (!/^-?\d+(\.\d+)?$/.test(String(epoch)) || Number.isNaN(moment.getTime())) return null;
  let unknown = false;
  const text = String(format).replace(/\{([a-z_]+)\}/g, (whole, name) => {
    const said = token(name, moment, now);
    if (said === null) unknown = true;
    return said ?? whole;
  });
  return unknown ? null : text;
}

// A message header's time: the reader's zone and hour cycle, to the second.
export function clock(ts) {
  return timeOf(new Date(Number(ts) * 1000), true);
}
