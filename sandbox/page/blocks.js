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

const text = (object, ctx) => el("span", { html: textObject(object, ctx.users) });

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
};

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
    const select = el("select", { class: "select", ...ids, "aria-label": placeholder },
      el("option", { value: "", disabled: true, selected: !item.initial_option }, placeholder),
      options(item).map((option) => el("option", {
        value: option.value, selected: item.initial_option?.value === option.value,
      }, option.text.text)));
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
