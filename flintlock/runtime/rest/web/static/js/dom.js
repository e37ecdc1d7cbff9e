// Building DOM without innerHTML: every string from the API becomes a text node or an attribute
// value, never markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(node.dataset, value);
    } else if (key === "style") {
      Object.assign(node.style, value); // CSSOM, allowed by the page's CSP (no inline styles)
    } else if (key === "href" && !safeHref(String(value))) {
      throw new Error(`refusing unsafe link ${value}`);
    } else {
      node.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

// Links are either in-page routes (#/...) or relative REST paths; never javascript: or data:.
function safeHref(href) {
  return href.startsWith("#") || /^[a-z0-9_./?=&%-]+$/i.test(href);
}

// h("a", {href: "#/x", class: "link"}, "text", child, [more])
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  return append(node, children);
}

export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  return append(node, children);
}

export function table(headers, rows, attrs = {}) {
  return h("table", { class: "table", ...attrs },
    h("thead", null, h("tr", null, headers.map((name) => h("th", null, name)))),
    h("tbody", null, rows.length ? rows
      : h("tr", { class: "empty" }, h("td", { colspan: headers.length }, "No data"))));
}

export function card(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", null, title) : null, ...children);
}

export function errorBox(err) {
  const messages = err && err.messages ? err.messages : [String(err && err.message || err)];
  return h("div", { class: "error-box", role: "alert" },
    h("strong", null, err && err.path ? `Request ${err.path} failed` : "Error"),
    err && err.status ? ` (HTTP ${err.status})` : "",
    h("ul", null, messages.map((m) => h("li", null, h("pre", null, m)))));
}

export function tabs(items, active) {
  return h("nav", { class: "tabs" }, items.map(([key, label, href]) =>
    h("a", { href, class: key === active ? "tab active" : "tab" }, label)));
}

export function keyValues(pairs) {
  return h("dl", { class: "kv" }, pairs.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}
