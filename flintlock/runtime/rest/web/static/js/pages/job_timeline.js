// Timeline of subtask attempts: one bar per attempt of every subtask of every vertex, split into
// the states it went through. Current attempts come from GET /jobs/:jobid/vertices/:vertexid/
// subtasktimes (Flink's SubtasksTimesInfo: "timestamps" = {STATE: epoch ms entered, 0 = never});
// earlier attempts of restarted subtasks from .../subtasks/:i/attempts/:a ("status-duration" per
// state, laid out backwards from "end-time").
import { api } from "../api.js";
import { card, h } from "../dom.js";
import { duration, stateClass, time } from "../format.js";

const ORDER = ["CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED",
  "CANCELING", "CANCELED", "FAILED"];
const TERMINAL = ["FINISHED", "CANCELED", "FAILED"];
const MAX_PRIOR = 5;

// [{state, start, end, marker?}] from {STATE: ts}; the last state lasts until `now` unless it is
// terminal, which becomes a marker at its timestamp.
export function segments(timestamps, now) {
  const entered = Object.entries(timestamps || {})
    .filter(([, ts]) => typeof ts === "number" && ts > 0)
    .sort((a, b) => a[1] - b[1] || ORDER.indexOf(a[0]) - ORDER.indexOf(b[0]));
  return entered.map(([state, ts], i) => {
    if (TERMINAL.includes(state)) return { state, start: ts, end: ts, marker: true };
    const end = i + 1 < entered.length ? entered[i + 1][1] : now;
    return { state, start: ts, end };
  }).filter((seg) => seg.marker || seg.end > seg.start);
}

// Segments of a finished earlier attempt from its per-state durations, ending at "end-time".
export function attemptSegments(attempt) {
  const end = attempt["end-time"];
  if (!(end > 0)) return [];
  const durations = attempt["status-duration"] || {};
  const out = [{ state: attempt.status, start: end, end, marker: true }];
  let t = end;
  for (const state of ORDER.slice(0, 5).reverse()) {
    const d = durations[state] || 0;
    if (d > 0) { out.unshift({ state, start: t - d, end: t }); t -= d; }
  }
  return out;
}

async function priorAttempts(jid, vid, st) {
  const numbers = [];
  for (let a = (st.attempt || 0) - 1; a >= 0 && numbers.length < MAX_PRIOR; a -= 1) numbers.push(a);
  const results = await Promise.allSettled(numbers.map((a) =>
    api.attempt(jid, vid, st.subtask, a)));
  return results.filter((r) => r.status === "fulfilled").map((r) => r.value).reverse();
}

function tick(ms) {
  return ms > 0 && ms < 10_000 ? `+${(ms / 1000).toFixed(1)}s` : `+${duration(ms)}`;
}

function axis(span) {
  const ticks = [0, 0.25, 0.5, 0.75, 1];
  return h("div", { class: "tl-row tl-axis-row" }, h("div", { class: "tl-label" }),
    h("div", { class: "tl-axis" }, ticks.map((f) => h("span", {
      class: "tl-tick", style: { left: `${100 * f}%` } }, tick(f * span)))));
}

function row(label, segs, t0, span) {
  return h("div", { class: "tl-row" },
    h("div", { class: "tl-label", title: label }, label),
    h("div", { class: "tl-track" }, segs.map((seg) => h("span", {
      class: `tl-seg state-${stateClass(seg.state)}${seg.marker ? " marker" : ""}`,
      title: seg.marker ? `${seg.state} at ${time(seg.start)}`
        : `${seg.state}: ${time(seg.start)} (+${duration(seg.end - seg.start)})`,
      style: { left: `${(100 * (seg.start - t0)) / span}%`,
        width: seg.marker ? null : `${Math.max(0.3, (100 * (seg.end - seg.start)) / span)}%` },
    }))));
}

export async function timelineView(job) {
  const vertices = job.vertices || [];
  const now = job.now || Date.now();
  const perVertex = await Promise.all(vertices.map(async (v) => {
    const info = await api.subtaskTimes(job.jid, v.id);
    const rows = [];
    for (const st of info.subtasks || []) {
      for (const old of await priorAttempts(job.jid, v.id, st)) {
        rows.push({ label: `#${st.subtask} attempt ${old.attempt} · ${old.endpoint || "-"}`,
          segs: attemptSegments(old) });
      }
      rows.push({ label: `#${st.subtask}${st.attempt ? ` attempt ${st.attempt}` : ""} · ` +
        `${st.endpoint || "-"}`, segs: segments(st.timestamps, info.now || now) });
    }
    return rows;
  }));
  const all = perVertex.flat().flatMap((r) => r.segs);
  if (!all.length) {
    return card("Timeline", h("p", { class: "muted" }, "No subtask has been created yet."));
  }
  const t0 = Math.min(...all.map((seg) => seg.start));
  const span = Math.max(1, Math.max(...all.map((seg) => seg.end)) - t0);
  const groups = vertices.map((v, i) => h("div", { class: "tl-group" },
    h("div", { class: "tl-vertex" }, v.name),
    perVertex[i].map((r) => row(r.label, r.segs, t0, span))));
  const legend = h("div", { class: "tl-legend" }, ORDER.map((s) =>
    h("span", { class: "tl-legend-item" }, h("span", { class: `tl-swatch state-${stateClass(s)}` }),
      s)));
  return card(`Timeline (${time(t0)} + ${duration(span)})`,
    h("div", { class: "timeline", "data-testid": "timeline" }, legend, axis(span), groups));
}
