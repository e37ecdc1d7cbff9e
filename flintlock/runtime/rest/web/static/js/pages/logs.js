// Log viewer: one log file of the JobManager or a TaskManager, paged by byte ranges (the end of
// the file first: errors are at the end), with a download link. Routes and the REST paths they read:
//   #/logs/jobmanager              -> GET jobmanager/log
//   #/logs/jobmanager/<name>       -> GET jobmanager/logs/<name>
//   #/logs/taskmanager/<id>        -> GET taskmanagers/<id>/log
//   #/logs/taskmanager/<id>/<name> -> GET taskmanagers/<id>/logs/<name>
// Query: ?start=<byte offset> (default: the last PAGE_BYTES, where errors are).
import { getLogChunk, seg } from "../api.js";
import { card, h } from "../dom.js";

export const PAGE_BYTES = 128 * 1024;

export function logRestPath(owner, tmid, name) {
  if (owner === "jobmanager") return name ? `jobmanager/logs/${seg(name)}` : "jobmanager/log";
  return name ? `taskmanagers/${seg(tmid)}/logs/${seg(name)}` : `taskmanagers/${seg(tmid)}/log`;
}

export function logHref(owner, tmid, name) {
  if (owner === "jobmanager") return name ? `#/logs/jobmanager/${seg(name)}` : "#/logs/jobmanager";
  return name ? `#/logs/taskmanager/${seg(tmid)}/${seg(name)}` : `#/logs/taskmanager/${seg(tmid)}`;
}

// Log file of one execution attempt on its TaskManager (the REST API's naming rule).
export function taskLogName(jid, vertexId, subtask, attempt) {
  return `task-${jid}-${vertexId}-${subtask}-${attempt}.log`;
}

// Flink's task name with subtask: "<vertex name> (<index+1>/<parallelism>)#<attempt>".
export function parseTaskName(taskName) {
  const m = String(taskName || "").match(/^([\s\S]*) \((\d+)\/(\d+)\)(?:#(\d+))?$/);
  if (!m) return null;
  return { name: m[1], subtask: Number(m[2]) - 1, parallelism: Number(m[3]),
    attempt: m[4] === undefined ? null : Number(m[4]) };
}

function nameFromUrl(url) {
  const match = String(url || "").match(/taskmanagers\/[^/]+\/logs\/([^/?]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

// The viewer page of an attempt's log, from a subtask row ({subtask, attempt, vertexId}) or an
// exception entry ({taskName}); `job` is GET /jobs/:jobid. Prefers the name the API gives
// ("log-file", "log-url"); else applies the naming rule; else the TaskManager's log list.
export function attemptLogHref(info, job) {
  const tm = info.taskManagerId || info["taskmanager-id"];
  if (!tm || tm === "(unassigned)") return null;
  let name = info["log-file"] || info.logFile || nameFromUrl(info["log-url"] || info.logUrl);
  if (!name && info.vertexId && Number.isInteger(info.subtask) && Number.isInteger(info.attempt)) {
    name = taskLogName(job.jid, info.vertexId, info.subtask, info.attempt);
  }
  const parsed = !name && parseTaskName(info.taskName);
  if (parsed && parsed.attempt !== null) {
    let candidates = (job.vertices || []).filter((v) => v.name === parsed.name);
    if (candidates.length > 1) {
      candidates = candidates.filter((v) => v.parallelism === parsed.parallelism);
    }
    if (candidates.length === 1) {
      name = taskLogName(job.jid, candidates[0].id, parsed.subtask, parsed.attempt);
    }
  }
  return name ? logHref("taskmanager", tm, name) : `#/taskmanagers/${seg(tm)}/logs`;
}

// Whole lines of a chunk: a partial first line (the chunk starts mid-line) and a partial last
// line (the file goes on) are left to the neighbouring pages. Works on bytes, so offsets stay exact.
export function wholeLines(chunk) {
  let { bytes, start, end } = chunk;
  if (start > 0) {
    const nl = bytes.indexOf(10);
    if (nl >= 0 && nl + 1 < bytes.length) { bytes = bytes.subarray(nl + 1); start += nl + 1; }
  }
  if (end < chunk.size) {
    const nl = bytes.lastIndexOf(10);
    if (nl >= 0) { end -= bytes.length - (nl + 1); bytes = bytes.subarray(0, nl + 1); }
  }
  return { text: new TextDecoder().decode(bytes), start, end, size: chunk.size };
}

function pager(view, base) {
  const link = (start, label, enabled) => (enabled
    ? h("a", { class: "btn btn-small", href: start === null ? base : `${base}?start=${start}` },
      label)
    : h("span", { class: "btn btn-small disabled" }, label));
  const atStart = view.start <= 0;
  const atEnd = view.end >= view.size;
  return h("span", { class: "pager" },
    link(0, "« First", !atStart), link(Math.max(0, view.start - PAGE_BYTES), "‹ Prev", !atStart),
    h("span", { class: "muted", "data-testid": "log-range" },
      ` bytes ${view.start}–${view.end} of ${view.size} `),
    link(view.end, "Next ›", !atEnd), link(null, "Last »", !atEnd));
}

export default {
  title: (p) => (p.owner === "jobmanager" ? "Job Manager Log" : "Task Manager Log"),
  refresh: false,
  async render(ctx) {
    const { owner, tmid, name } = ctx.params;
    const path = logRestPath(owner, tmid, name);
    const requested = parseInt(ctx.query.start, 10);
    const from = Number.isFinite(requested) && requested >= 0 ? requested : -PAGE_BYTES;
    const view = wholeLines(await getLogChunk(path, from, PAGE_BYTES));
    const lines = view.text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    const base = logHref(owner, tmid, name);
    const back = owner === "jobmanager" ? h("a", { href: "#/jobmanager/logs" }, "Job Manager logs")
      : h("a", { href: `#/taskmanagers/${seg(tmid)}/logs` }, `Task Manager ${tmid}`);
    const download = `${path}?download=1`;
    const logView = h("pre", { class: "log-view", "data-testid": "log-content" },
      lines.length ? lines.join("\n") : "(empty)");
    if (from < 0) { // the tail: show its last line, where errors are
      requestAnimationFrame(() => { logView.scrollTop = logView.scrollHeight; });
    }
    return card(null,
      h("div", { class: "log-toolbar" },
        h("span", null, back, " / ", h("strong", { "data-testid": "log-name" },
          name || `${owner} log`)),
        h("span", { class: "spacer" }),
        pager(view, base),
        h("button", { class: "btn btn-small", onclick: () => ctx.rerender() }, "Reload"),
        h("a", { class: "btn btn-small", href: download, download: name || `${owner}.log`,
          "data-testid": "log-download" }, "Download")),
      logView);
  },
};
