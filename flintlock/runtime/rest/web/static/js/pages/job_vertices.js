// The job's vertex table (from GET /jobs/:jobid) and the subtask table of one vertex
// (GET /jobs/:jobid/vertices/:vertexid, Flink's JobVertexDetailsInfo).
import { api, seg } from "../api.js";
import { card, h, table } from "../dom.js";
import {
  badge, bytes, count, duration, operatorChain, parallelismText, progressBar, taskCounts, time,
} from "../format.js";
import { attemptLogHref } from "./logs.js";

// "<records> records" over "<bytes>" for one direction ("read" or "write") of IOMetricsInfo.
function ioCell(m, direction) {
  const records = (m || {})[`${direction}-records`];
  const size = (m || {})[`${direction}-bytes`];
  return h("td", { class: "num io" },
    h("span", { "data-metric": `${direction}-records` }, count(records)), " rec",
    h("br"), h("span", { class: "muted small", "data-metric": `${direction}-bytes` }, bytes(size)));
}

export function verticesTable(job, selectedId) {
  const rows = (job.vertices || []).map((v) => {
    const m = v.metrics || {};
    const href = `#/jobs/${seg(job.jid)}/vertices/${seg(v.id)}`;
    return h("tr", { class: v.id === selectedId ? "selected" : "", dataset: { vertexId: v.id } },
      h("td", { class: "name-cell" }, h("a", { href }, operatorChain(v.name))),
      h("td", { class: "num", title: v.parallelism < 0 ? "decided at run time from the data its inputs produce" : null },
        parallelismText(v.parallelism)),
      h("td", null, badge(v.status)),
      h("td", null, progressBar(v.tasks)),
      ioCell(m, "read"),
      ioCell(m, "write"),
      h("td", null, time(v["start-time"])),
      h("td", null, duration(v.duration)),
      h("td", null, taskCounts(v.tasks)));
  });
  return table(["Name", "Parallelism", "Status", "Progress", "In", "Out", "Start Time",
    "Duration", "Tasks"], rows,
  { "data-testid": "vertices" });
}

function subtaskRow(job, vertexId, st, cls) {
  const m = st.metrics || {};
  const tm = st["taskmanager-id"] || st.endpoint;
  const logHref = attemptLogHref({ ...st, vertexId, taskManagerId: tm }, job);
  return h("tr", { class: cls || null, dataset: { subtask: String(st.subtask),
    attempt: String(st.attempt), state: st.status } },
  h("td", { class: "num" }, String(st.subtask)),
  h("td", { class: "num", title: cls === "concurrent" ? "a concurrent (speculative) attempt" : null },
    String(st.attempt), cls === "concurrent" ? h("span", { class: "muted small" }, " speculative") : null),
  h("td", null, badge(st.status)),
  h("td", { class: "mono small" },
    tm && tm !== "(unassigned)" ? h("a", { href: `#/taskmanagers/${seg(tm)}` }, tm) : "-"),
  h("td", null, time(st["start-time"])),
  h("td", null, time(st["end-time"])),
  h("td", null, duration(st.duration)),
  ioCell(m, "read"),
  ioCell(m, "write"),
  h("td", null, logHref ? h("a", { href: logHref, class: "log-link" }, "Log") : "-"));
}

// Earlier attempts of restarted subtasks (GET .../subtasks/:i/attempts/:a), newest first, so each
// failed attempt keeps its row and log link. At most MAX_PRIOR per subtask.
const MAX_PRIOR = 5;

async function priorAttempts(job, vertexId, st) {
  const numbers = [];
  for (let a = st.attempt - 1; a >= 0 && numbers.length < MAX_PRIOR; a -= 1) numbers.push(a);
  const results = await Promise.allSettled(numbers.map((a) =>
    api.attempt(job.jid, vertexId, st.subtask, a)));
  return results.filter((r) => r.status === "fulfilled").map((r) => r.value);
}

export async function subtasksView(job, vertexId, vertex) {
  const details = await api.vertex(job.jid, vertexId);
  const subtasks = details.subtasks || [];
  const prior = await Promise.all(subtasks.map((st) =>
    (st.attempt > 0 ? priorAttempts(job, vertexId, st) : [])));
  const rows = [];
  subtasks.forEach((st, i) => {
    rows.push(subtaskRow(job, vertexId, st));
    // speculative execution: the subtask's other attempts running at the same time
    for (const other of st["other-concurrent-attempts"] || []) {
      rows.push(subtaskRow(job, vertexId, other, "concurrent"));
    }
    for (const old of prior[i]) rows.push(subtaskRow(job, vertexId, old, "prior"));
  });
  return card(`Subtasks of ${vertex ? vertex.name : details.name}`,
    table(["Subtask", "Attempt", "Status", "TaskManager", "Start Time", "End Time", "Duration",
      "In", "Out", "Log"], rows,
    { "data-testid": "subtasks" }));
}
