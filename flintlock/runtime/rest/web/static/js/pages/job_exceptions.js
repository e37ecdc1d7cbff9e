// Exception history (GET /jobs/:jobid/exceptions, Flink's JobExceptionsInfoWithHistory): the
// root cause of each failover, newest first, its concurrent failures, and a one-click link to the
// log of the attempt that failed.
import { api, seg } from "../api.js";
import { card, h } from "../dom.js";
import { time } from "../format.js";
import { attemptLogHref } from "./logs.js";

// One line that says what went wrong: Python tracebacks end with "Type: message".
export function summary(stacktrace, fallback) {
  const lines = String(stacktrace || "").split("\n").map((l) => l.trim()).filter(Boolean);
  if (!lines.length) return fallback || "";
  return lines[0].startsWith("Traceback") ? lines[lines.length - 1] : lines[0];
}

function details(key, stacktrace, state) {
  const open = state.open || (state.open = new Set());
  const el = h("details", { class: "stacktrace", open: open.has(key) },
    h("summary", null, "Stack trace"), h("pre", null, stacktrace || "(none)"));
  el.addEventListener("toggle", () => (el.open ? open.add(key) : open.delete(key)));
  return el;
}

function entryView(job, entry, key, state, concurrent) {
  const tm = entry.taskManagerId;
  const logHref = attemptLogHref({ ...entry, taskManagerId: tm }, job);
  return h("div", { class: concurrent ? "exception concurrent" : "exception",
    "data-testid": "exception-entry" },
  h("div", { class: "exception-head" },
    h("span", { class: "exception-name" }, entry.exceptionName || "Exception"),
    h("span", { class: "muted" }, time(entry.timestamp)),
    h("span", { class: "spacer" }),
    logHref ? h("a", { href: logHref, class: "btn btn-small btn-primary log-link",
      "data-testid": "exception-log" }, "View log") : null),
  h("div", { class: "exception-summary" }, summary(entry.stacktrace, entry.exceptionName)),
  h("div", { class: "exception-meta" },
    entry.taskName ? ["Task: ", h("strong", null, entry.taskName)] : "Task: -",
    " · Location: ",
    tm ? h("a", { href: `#/taskmanagers/${seg(tm)}` }, entry.endpoint || tm)
      : (entry.endpoint || "-")),
  details(key, entry.stacktrace, state));
}

export async function exceptionsView(job, ctx) {
  const info = await api.jobExceptions(job.jid);
  const history = (info.exceptionHistory && info.exceptionHistory.entries) || [];
  const parts = [];
  const newest = history.length ? history[0].stacktrace : null;
  if (info["root-exception"] && info["root-exception"] !== newest) {
    parts.push(card("Root Exception", h("div", { class: "exception root" },
      h("div", { class: "exception-summary" }, summary(info["root-exception"])),
      details("root", info["root-exception"], ctx.state))));
  }
  const entries = history.map((entry, i) => h("div", { class: "exception-group" },
    entryView(job, entry, `e${entry.timestamp}-${i}`, ctx.state, false),
    (entry.concurrentExceptions || []).map((c, j) =>
      entryView(job, c, `c${entry.timestamp}-${i}-${j}`, ctx.state, true))));
  const truncated = info.exceptionHistory && info.exceptionHistory.truncated;
  parts.push(card(`Exception History: root causes, newest first (${history.length}` +
    `${truncated ? ", older ones left out" : ""})`,
  entries.length ? entries : h("p", { class: "muted" }, "No exceptions.")));
  return h("div", { "data-testid": "exceptions" }, parts);
}
