// Formatting of Flink's REST values: epoch-ms timestamps (-1 / 0 = not yet), durations in ms,
// byte and record counts, and coloured state badges.
import { h } from "./dom.js";

const pad = (n) => String(n).padStart(2, "0");

export function time(ms) {
  if (typeof ms !== "number" || ms <= 0) return "-";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(ms) {
  if (typeof ms !== "number" || ms < 0) return "-";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s %= 86400;
  const hh = Math.floor(s / 3600); s %= 3600;
  const mm = Math.floor(s / 60); s %= 60;
  if (d) return `${d}d ${hh}h ${mm}m`;
  if (hh) return `${hh}h ${mm}m ${s}s`;
  if (mm) return `${mm}m ${s}s`;
  return `${s}s`;
}

export function ago(ms, now = Date.now()) {
  if (typeof ms !== "number" || ms <= 0) return "-";
  return `${duration(Math.max(0, now - ms))} ago`;
}

export function bytes(n) {
  if (typeof n !== "number" || n < 0) return "-";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

// A vertex's parallelism; -1 while the AdaptiveBatchScheduler has not decided it yet.
export function parallelismText(p) {
  if (typeof p !== "number") return "-";
  return p < 0 ? "auto" : String(p);
}

export function count(n) {
  if (typeof n !== "number" || n < 0) return "-";
  return n.toLocaleString("en-US");
}

// Flink's dashboard colours (job and execution states share names).
const STATE_CLASS = {
  CREATED: "created", SCHEDULED: "scheduled", DEPLOYING: "deploying",
  INITIALIZING: "initializing", RUNNING: "running", FINISHED: "finished",
  CANCELING: "canceling", CANCELLING: "canceling", CANCELED: "canceled", CANCELLED: "canceled",
  FAILED: "failed", FAILING: "failing", RESTARTING: "restarting", RECONCILING: "reconciling",
  SUSPENDED: "suspended", INITIALIZING_JOB: "initializing",
};

export function stateClass(state) {
  return STATE_CLASS[String(state || "").toUpperCase()] || "unknown";
}

export function badge(state) {
  const text = String(state || "UNKNOWN");
  return h("span", { class: `badge state-${stateClass(text)}`, "data-state": text }, text);
}

// Task counts per state as small badges (only the non-zero ones), Flink's "Tasks" column.
const TASK_ORDER = ["CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED",
  "CANCELING", "CANCELED", "FAILED", "RECONCILING"];

export function taskCounts(tasks) {
  const upper = {};
  for (const [k, v] of Object.entries(tasks || {})) {
    if (k.toLowerCase() !== "total") upper[k.toUpperCase()] = v;
  }
  const shown = TASK_ORDER.filter((s) => upper[s] > 0);
  if (!shown.length) return h("span", { class: "muted" }, "-");
  return h("span", { class: "task-counts" }, shown.map((s) =>
    h("span", { class: `count state-${stateClass(s)}`, title: s }, String(upper[s]))));
}

// finished / total for a vertex's {STATE: n} map
export function progress(tasks) {
  const values = Object.entries(tasks || {}).filter(([k]) => k.toLowerCase() !== "total");
  const total = values.reduce((acc, [, v]) => acc + v, 0);
  const done = values.filter(([k]) => k.toUpperCase() === "FINISHED")
    .reduce((acc, [, v]) => acc + v, 0);
  return { done, total };
}

export function progressBar(tasks) {
  const { done, total } = progress(tasks);
  const pct = total ? Math.round((100 * done) / total) : 0;
  return h("span", { class: "progress", title: `${done} of ${total} subtasks finished` },
    h("span", { class: "progress-track" },
      h("span", { class: "progress-fill", style: { width: `${pct}%` } })),
    h("span", { class: "progress-label" }, `${done}/${total}`));
}

// A chained vertex name "A -> B -> C" that wraps only between operators.
export function operatorChain(name) {
  const ops = String(name || "").split(" -> ");
  return h("span", { class: "chain" }, ops.map((op, i) =>
    [i ? " " : null, h("span", { class: op.length > 32 ? "op long" : "op" }, i ? `-> ${op}` : op)]));
}

export function isTerminal(state) {
  return ["FINISHED", "FAILED", "CANCELED", "SUSPENDED"].includes(String(state).toUpperCase());
}
