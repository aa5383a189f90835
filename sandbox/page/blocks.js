// Block Kit as DOM: the blocks and elements queuepilot sends (and the common ones around them),
// rendered close enough to Slack's client to use. Interactive elements call ctx.act(blockId,
// element, selectedValue); a `confirm` object asks first, as Slack does.

import { escapeHtml, textObject } from "./mrkdwn.js";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "html") node.innerHTML = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const text = (object, ctx) => el("span", { html: textObject(object, ctx.names) });

export function renderBlocks(blocks, ctx) {
  const box = el("div", { class: "blocks" });
  for (const block of blocks || []) {
    const render = RENDERERS[block.type];
    const node = render ? render(block, ctx) : el("div", { class: "unknown-block" }, `[${block.type} block]`);
    if (block.block_id) node.dataset.blockId = block.block_id;
    box.append(node);
  }
  return box;
}

const RENDERERS = {
  header: (block, ctx) => el("h3", { class: "block-header" }, text(block.text, ctx)),
  divider: () => el("hr", { class: "block-divider" }),
  context: (block, ctx) =>
    el("div", { class: "block-context" }, (block.elements || []).map((item) =>
      item.type === "image"
        ? el("img", { src: item.image_url, alt: item.alt_text || "", class: "context-image" })
        : text(item, ctx))),
  image: (block, ctx) =>
    el("figure", { class: "block-image" },
      block.title ? el("figcaption", {}, text(block.title, ctx)) : null,
      el("img", { src: block.image_url || block.slack_file?.url, alt: block.alt_text || "" })),
  section: (block, ctx) => {
    const body = el("div", { class: "section-body" });
    if (block.text) body.append(el("div", { class: "section-text" }, text(block.text, ctx)));
    if (block.fields?.length) {
      body.append(el("div", { class: "section-fields" },
        block.fields.map((field) => el("div", { class: "section-field" }, text(field, ctx)))));
    }
    const accessory = block.accessory ? element(block.accessory, block.block_id, ctx) : null;
    return el("div", { class: "block-section" }, body, accessory && el("div", { class: "accessory" }, accessory));
  },
  actions: (block, ctx) =>
    el("div", { class: "block-actions" }, (block.elements || []).map((item) => element(item, block.block_id, ctx))),
  input: (block, ctx) => {
    const error = ctx.errors?.[block.block_id];
    return el("div", { class: `block-input${error ? " has-error" : ""}` },
      el("label", { class: "input-label" }, text(block.label, ctx),
        block.optional ? el("span", { class: "optional" }, " (optional)") : null),
      inputElement(block.element, block.block_id, ctx),
      block.hint ? el("div", { class: "input-hint" }, text(block.hint, ctx)) : null,
      error ? el("div", { class: "input-error", role: "alert" }, error) : null);
  },
  rich_text: (block) => el("div", { class: "block-rich" }, richText(block.elements)),
  data_visualization: (block) => dataVisualization(block),
};

// -- data_visualization: the line, bar, area and pie charts Slack draws itself, here as inline SVG.
// Every string of the block (title, names, labels) goes in as a text node, never as markup.

const SVG_NS = "http://www.w3.org/2000/svg";
// Okabe-Ito: colours told apart with every common colour-vision deficiency.
const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"];
const colour = (i) => PALETTE[i % PALETTE.length];
const WIDTH = 520;
const CHAR_PX = 6; // an 11px label's average advance

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function dataVisualization(block) {
  const chart = block.chart || {};
  const drawn = chart.type === "pie" ? pieChart(chart.segments || []) : seriesChart(chart);
  drawn.svg.setAttribute("aria-label", String(block.title ?? ""));
  return el("figure", { class: "block-chart", "data-chart-type": chart.type },
    el("figcaption", { class: "chart-title" }, String(block.title ?? "")),
    drawn.svg,
    el("ul", { class: "chart-legend" }, drawn.legend.map((name, i) =>
      el("li", {}, el("span", { class: "chart-swatch", style: `background: ${colour(i)}` }), name))));
}

// The plot's box. Many categories would overlap side by side, so they lean at 45°, which takes
// room below the plot (and left of it, for the first) as their length does.
function plotArea(categories, axis) {
  const lean = categories.length > 6;
  const longest = Math.max(0, ...categories.map((c) => c.length));
  const reach = lean ? Math.ceil(longest * CHAR_PX * Math.SQRT1_2) : 0;
  const [top, bottom] = [12, 192];
  const height = bottom + (lean ? 12 + reach : 18) + (axis.x_label ? 20 : 4);
  return { lean, left: Math.max(56, reach - 6), right: WIDTH - 12, top, bottom, height };
}

// bar, area and line: one mark per series over the axis' categories, a y axis from 0 (or below,
// for negative values) to the largest value.
function seriesChart(chart) {
  const axis = chart.axis_config || {};
  const categories = (axis.categories || []).map(String);
  const series = (chart.series || []).map((s) => ({
    name: String(s?.name ?? ""), values: categories.map((c) => valueAt(s?.data, c)),
  }));
  const values = series.flatMap((s) => s.values).filter((v) => v !== null);
  const ticks = niceTicks(Math.min(0, ...values), Math.max(0, ...values));
  const [low, high] = [ticks[0], ticks[ticks.length - 1]];
  const plot = plotArea(categories, axis);
  const band = (plot.right - plot.left) / Math.max(1, categories.length);
  const scale = {
    plot, band, count: series.length,
    x: (i) => plot.left + band * (i + 0.5),
    y: (v) => plot.bottom - ((v - low) / (high - low)) * (plot.bottom - plot.top),
  };
  const mark = MARKS[chart.type] || MARKS.line;
  return {
    svg: svg("svg", { class: "chart-svg", viewBox: `0 0 ${WIDTH} ${plot.height}`, role: "img" },
      yAxis(ticks, scale, axis.y_label), xAxis(categories, scale, axis.x_label),
      series.map((s, i) => mark(s, i, scale, categories))),
    legend: series.map((s) => s.name),
  };
}

function valueAt(data, category) {
  const point = (Array.isArray(data) ? data : []).find((p) => String(p?.label) === category);
  return typeof point?.value === "number" && Number.isFinite(point.value) ? point.value : null;
}

// About five round steps covering [low, high]: 0, 20, 40… rather than 0, 17.3, 34.6…
function niceTicks(low, high) {
  if (high === low) high = low + 1;
  const raw = (high - low) / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
  const first = Math.floor(low / step) * step;
  const ticks = [];
  for (let k = 0; first + k * step <= high + step * 1e-9; k++) ticks.push(first + k * step);
  if (ticks[ticks.length - 1] < high) ticks.push(first + ticks.length * step);
  return ticks;
}

function number(value) {
  const size = Math.abs(value);
  if (size >= 1e9) return `${+(value / 1e9).toPrecision(3)}G`;
  if (size >= 1e6) return `${+(value / 1e6).toPrecision(3)}M`;
  if (size >= 1e4) return `${+(value / 1e3).toPrecision(3)}k`;
  return String(+value.toPrecision(6));
}

// An axis title of up to 50 characters: squeezed into `room` pixels when it would not fit.
function axisTitle(title, attrs, room) {
  const text = String(title);
  const fit = text.length * 6.5 > room ? { textLength: room, lengthAdjust: "spacingAndGlyphs" } : {};
  return svg("text", { class: "axis-title", "text-anchor": "middle", ...attrs, ...fit }, text);
}

function yAxis(ticks, scale, title) {
  const { plot } = scale;
  const middle = (plot.top + plot.bottom) / 2;
  return svg("g", { class: "y-axis" },
    ticks.map((t) => [
      svg("line", { class: t === 0 ? "axis" : "grid", x1: plot.left, x2: plot.right, y1: scale.y(t), y2: scale.y(t) }),
      svg("text", { x: plot.left - 6, y: scale.y(t) + 4, "text-anchor": "end" }, number(t)),
    ]),
    title ? axisTitle(title, { transform: `translate(12 ${middle}) rotate(-90)` }, plot.bottom - plot.top) : null);
}

function xAxis(categories, scale, title) {
  const { plot } = scale;
  return svg("g", { class: "x-axis" },
    categories.map((c, i) => {
      const [x, y] = [scale.x(i), plot.bottom + 14];
      return svg("text", plot.lean ? { x, y, "text-anchor": "end", transform: `rotate(-45 ${x} ${y})` }
        : { x, y, "text-anchor": "middle" }, c);
    }),
    title ? axisTitle(title, { x: (plot.left + plot.right) / 2, y: plot.height - 6 }, plot.right - plot.left) : null);
}

const hover = (s, categories, i) => svg("title", {}, `${s.name} · ${categories[i]}: ${s.values[i]}`);
const drawnPoints = (s) => s.values.map((v, i) => [i, v]).filter(([, v]) => v !== null);

const MARKS = {
  line: (s, n, scale, categories) => svg("g", { class: "series", "data-series": n },
    svg("polyline", {
      fill: "none", stroke: colour(n), "stroke-width": 2,
      points: drawnPoints(s).map(([i, v]) => `${scale.x(i)},${scale.y(v)}`).join(" "),
    }),
    drawnPoints(s).map(([i, v]) => svg("circle", { cx: scale.x(i), cy: scale.y(v), r: 3, fill: colour(n) }, hover(s, categories, i)))),
  // Layered in the block's order, the first series at the back (Slack's page).
  area: (s, n, scale) => {
    const points = drawnPoints(s);
    if (!points.length) return null;
    const base = scale.y(0);
    const edge = points.map(([i, v]) => `L ${scale.x(i)} ${scale.y(v)}`).join(" ");
    const d = `M ${scale.x(points[0][0])} ${base} ${edge} L ${scale.x(points[points.length - 1][0])} ${base} Z`;
    return svg("g", { class: "series", "data-series": n },
      svg("path", { d, fill: colour(n), "fill-opacity": 0.35, stroke: colour(n), "stroke-width": 2 }, svg("title", {}, s.name)));
  },
  // Grouped by category, one bar per series side by side.
  bar: (s, n, scale, categories) => {
    const width = (scale.band * 0.8) / Math.max(1, scale.count);
    return svg("g", { class: "series", "data-series": n }, drawnPoints(s).map(([i, v]) => {
      const [top, bottom] = [scale.y(Math.max(v, 0)), scale.y(Math.min(v, 0))];
      return svg("rect", {
        x: scale.x(i) - scale.band * 0.4 + n * width, y: top, width, height: Math.max(bottom - top, 0.5), fill: colour(n),
      }, hover(s, categories, i));
    }));
  },
};

function pieChart(segments) {
  const slices = segments.map((s) => ({ label: String(s?.label ?? ""), value: Number(s?.value) }))
    .filter((s) => Number.isFinite(s.value) && s.value > 0);
  const total = slices.reduce((sum, s) => sum + s.value, 0);
  const [cx, cy, r] = [110, 110, 100];
  const at = (angle) => `${cx + r * Math.cos(angle)} ${cy + r * Math.sin(angle)}`;
  let angle = -Math.PI / 2; // the first slice starts at twelve o'clock
  const share = (s) => `${+((100 * s.value) / total).toFixed(1)}%`;
  const marks = slices.map((s, n) => {
    const title = svg("title", {}, `${s.label}: ${s.value} (${share(s)})`);
    const fraction = s.value / total;
    if (fraction > 0.9999) return svg("circle", { class: "slice", cx, cy, r, fill: colour(n) }, title);
    const end = angle + fraction * 2 * Math.PI;
    const d = `M ${cx} ${cy} L ${at(angle)} A ${r} ${r} 0 ${fraction > 0.5 ? 1 : 0} 1 ${at(end)} Z`;
    angle = end;
    return svg("path", { class: "slice", d, fill: colour(n), stroke: "white", "stroke-width": 1 }, title);
  });
  return {
    svg: svg("svg", { class: "chart-svg pie", viewBox: "0 0 220 220", role: "img" }, marks),
    legend: slices.map((s) => `${s.label} · ${share(s)}`),
  };
}

function richText(elements) {
  return (elements || []).map((item) => (item.elements ? richText(item.elements).join("") : item.text || "")).flat();
}

function options(item) {
  const all = [...(item.options || [])];
  for (const group of item.option_groups || []) all.push(...(group.options || []));
  return all;
}

// An interactive element of a message or modal (actions block or section accessory).
function element(item, blockId, ctx) {
  const ids = { "data-action-id": item.action_id, "data-block-id": blockId };
  if (item.type === "button") {
    const style = item.style ? ` button-${item.style}` : "";
    return el("button", {
      type: "button", class: `button${style}`, ...ids,
      onclick: async () => {
        if (item.url) window.open(item.url, "_blank", "noopener");
        if (!item.confirm || await ctx.confirm(item.confirm)) ctx.act(blockId, item, null);
      },
    }, text(item.text, ctx));
  }
  if (item.type === "static_select" || item.type === "overflow") {
    const placeholder = item.placeholder?.text || "Choose…";
    const choice = (option) => el("option", {
      value: option.value, selected: item.initial_option?.value === option.value,
    }, option.text.text);
    // Slack shows each group under its label: two "1 hour" options differ only by theirs.
    const groups = (item.option_groups || []).map((group) =>
      el("optgroup", { label: group.label?.text || "" }, (group.options || []).map(choice)));
    const select = el("select", { class: "select", ...ids, "aria-label": placeholder },
      el("option", { value: "", disabled: true, selected: !item.initial_option }, placeholder),
      (item.options || []).map(choice), groups);
    select.addEventListener("change", async () => {
      const value = select.value;
      if (!item.confirm || await ctx.confirm(item.confirm)) ctx.act(blockId, item, value);
      else select.value = item.initial_option?.value || "";
    });
    return select;
  }
  if (item.type === "image") return el("img", { class: "accessory-image", src: item.image_url, alt: item.alt_text || "" });
  return el("span", { class: "unknown-element" }, `[${escapeHtml(item.type)}]`);
}

// An input block's element, holding its value for collectValues().
function inputElement(item, blockId, ctx) {
  const ids = { "data-action-id": item.action_id, "data-block-id": blockId, "data-type": item.type };
  const initial = item.initial_value ?? item.initial_option?.value ?? "";
  switch (item.type) {
    case "plain_text_input":
      return item.multiline
        ? el("textarea", { class: "text-input", ...ids, placeholder: item.placeholder?.text }, initial)
        : el("input", { class: "text-input", ...ids, value: initial, placeholder: item.placeholder?.text });
    case "number_input":
      return el("input", {
        class: "text-input", type: "number", ...ids, value: initial,
        min: item.min_value, max: item.max_value, step: item.is_decimal_allowed ? "any" : "1",
        placeholder: item.placeholder?.text,
      });
    case "static_select":
      return el("select", { class: "select", ...ids },
        el("option", { value: "", selected: !initial }, item.placeholder?.text || "Choose…"),
        options(item).map((option) => el("option", { value: option.value, selected: option.value === initial }, option.text.text)));
    case "radio_buttons":
    case "checkboxes": {
      const kind = item.type === "radio_buttons" ? "radio" : "checkbox";
      const chosen = new Set([item.initial_option?.value, ...(item.initial_options || []).map((o) => o.value)]);
      return el("div", { class: "choices", ...ids }, options(item).map((option) =>
        el("label", { class: "choice" },
          el("input", { type: kind, name: `${blockId}/${item.action_id}`, value: option.value, checked: chosen.has(option.value) }),
          text(option.text, ctx),
          option.description ? el("span", { class: "choice-description" }, text(option.description, ctx)) : null)));
    }
    default:
      return el("span", { class: "unknown-element" }, `[${escapeHtml(item.type)} input]`);
  }
}

// {block_id: {action_id: value | [values]}} of every input in `root`, for a view submission.
export function collectValues(root) {
  const values = {};
  for (const node of root.querySelectorAll("[data-type]")) {
    let value;
    if (node.dataset.type === "radio_buttons") value = node.querySelector("input:checked")?.value ?? null;
    else if (node.dataset.type === "checkboxes") value = [...node.querySelectorAll("input:checked")].map((i) => i.value);
    else value = node.value;
    (values[node.dataset.blockId] ||= {})[node.dataset.actionId] = value;
  }
  return values;
}
