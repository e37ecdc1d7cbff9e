// Submit a program as Flink's web submission does: POST /jars/upload (multipart field "jarfile",
// here a .py program), GET /jars, POST /jars/:jarid/run {"programArgsList", "parallelism"} ->
// {"jobid"}, DELETE /jars/:jarid. Hidden when GET /config says features."web-submit" is false.
import { api } from "../api.js";
import { card, errorBox, h, table } from "../dom.js";
import { time } from "../format.js";

const SECRET_KEY = "flintlock.cluster-secret";

// Shell-like splitting: whitespace separates, '...' and "..." group, backslash escapes.
export function splitArgs(text) {
  const args = [];
  let current = "";
  let quote = null;
  let any = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) current += text[++i];
      else current += c;
    } else if (c === "'" || c === '"') {
      quote = c; any = true;
    } else if (c === "\\" && i + 1 < text.length) {
      current += text[++i]; any = true;
    } else if (/\s/.test(c)) {
      if (any) args.push(current);
      current = ""; any = false;
    } else {
      current += c; any = true;
    }
  }
  if (quote) throw new Error(`unclosed ${quote} quote in the program arguments`);
  if (any) args.push(current);
  return args;
}

function secret() {
  return sessionStorage.getItem(SECRET_KEY) || "";
}

function field(label, input, hint) {
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), input,
    hint ? h("span", { class: "field-hint" }, hint) : null);
}

function bound(state, key, attrs) {
  return h("input", { ...attrs, value: state[key] ?? "",
    oninput: (ev) => { state[key] = ev.target.value; } });
}

function uploadCard(ctx) {
  const state = ctx.state;
  const file = h("input", { type: "file", accept: ".py,text/x-python", "data-testid": "upload-file",
    required: true });
  const secretInput = h("input", { type: "password", autocomplete: "off", value: secret(),
    placeholder: "security.cluster.secret", "data-testid": "cluster-secret",
    oninput: (ev) => sessionStorage.setItem(SECRET_KEY, ev.target.value) });
  const form = h("form", { class: "form-row", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!file.files.length) return;
    const data = new FormData();
    data.append("jarfile", file.files[0], file.files[0].name);
    state.uploading = true; state.error = null; ctx.rerender();
    try {
      const reply = await api.uploadJar(data, secret());
      state.selected = String(reply.filename || "").split("/").pop() || null;
      state.message = `Uploaded ${file.files[0].name}.`;
    } catch (err) {
      state.error = err;
    }
    state.uploading = false;
    ctx.rerender();
  } },
  field("Program (.py)", file),
  field("Cluster secret", secretInput, "Only if the cluster requires it; kept in this tab."),
  h("button", { class: "btn btn-primary", type: "submit", disabled: state.uploading,
    "data-testid": "upload" }, state.uploading ? "Uploading…" : "Upload"));
  return card("Upload a Program", form);
}

function runForm(jar, ctx) {
  const state = ctx.state;
  const form = h("form", { class: "form-row run-form", "data-testid": "run-form",
    onsubmit: async (ev) => {
      ev.preventDefault();
      state.error = null;
      try {
        const body = { programArgsList: splitArgs(state.args || "") };
        const parallelism = parseInt(state.parallelism, 10);
        if (state.parallelism && !(parallelism > 0)) {
          throw new Error(`parallelism must be a positive integer, not "${state.parallelism}"`);
        }
        if (parallelism > 0) body.parallelism = parallelism;
        state.running = true; ctx.rerender();
        const reply = await api.runJar(jar.id, body, secret());
        state.running = false;
        ctx.navigate(`#/jobs/${reply.jobid}`);
        return;
      } catch (err) {
        state.error = err;
      }
      state.running = false;
      ctx.rerender();
    } },
  field("Program arguments", bound(state, "args", { type: "text", "data-testid": "program-args",
    placeholder: "--input data/test --output /tmp/out", size: 48 })),
  field("Parallelism", bound(state, "parallelism", { type: "number", min: 1,
    "data-testid": "parallelism", placeholder: "default" })),
  h("button", { class: "btn btn-primary", type: "submit", disabled: state.running,
    "data-testid": "run" }, state.running ? "Submitting…" : "Submit"));
  return h("tr", { class: "run-row" }, h("td", { colspan: 3 }, form));
}

function jarsCard(jars, ctx) {
  const state = ctx.state;
  const rows = [];
  for (const jar of [...(jars.files || [])].sort((a, b) => b.uploaded - a.uploaded)) {
    const selected = jar.id === state.selected;
    rows.push(h("tr", { class: selected ? "selected clickable" : "clickable",
      dataset: { jarId: jar.id } },
    h("td", null, h("a", { href: "#/submit", onclick: (ev) => {
      ev.preventDefault(); state.selected = jar.id; ctx.rerender();
    } }, jar.name)),
    h("td", null, time(jar.uploaded)),
    h("td", { class: "actions" }, h("button", { class: "btn btn-small btn-primary",
      "data-testid": "select-program", onclick: () => { state.selected = jar.id; ctx.rerender(); } },
    "Run…"), " ", h("button", { class: "btn btn-small", onclick: async () => {
      try {
        await api.deleteJar(jar.id, secret());
        if (state.selected === jar.id) state.selected = null;
      } catch (err) {
        state.error = err;
      }
      ctx.rerender();
    } }, "Delete"))));
    if (selected) rows.push(runForm(jar, ctx));
  }
  return card("Uploaded Programs", table(["Name", "Uploaded", ""], rows,
    { "data-testid": "jars" }));
}

export default {
  title: () => "Submit New Job",
  refresh: false,
  async render(ctx) {
    if ((ctx.config.features || {})["web-submit"] === false) {
      return card("Submit New Job", h("p", { class: "muted" },
        "Submission from the web UI is disabled on this cluster (web.submit.enable: false)."));
    }
    const jars = await api.jars();
    return h("div", { "data-testid": "submit-page" },
      ctx.state.error ? errorBox(ctx.state.error) : null,
      ctx.state.message ? h("p", { class: "notice" }, ctx.state.message) : null,
      uploadCard(ctx), jarsCard(jars, ctx));
  },
};
