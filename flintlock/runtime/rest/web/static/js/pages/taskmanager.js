// One TaskManager: details (GET /taskmanagers/:id), its log files (GET /taskmanagers/:id/logs,
// Flink's LogListInfo) and its metrics (GET /taskmanagers/:id/metrics[?get=...]).
// Routes: #/taskmanagers/<id>, #/taskmanagers/<id>/logs, #/taskmanagers/<id>/metrics
import { api, getJSON, seg } from "../api.js";
import { card, h, keyValues, table, tabs } from "../dom.js";
import { ago, bytes, duration, time } from "../format.js";
import { logHref, logRestPath } from "./logs.js";
import { sparkSummary } from "./taskmanagers.js";

// A table of log files with view and download links.
export function logFilesTable(logs, owner, tmid) {
  const rows = [...(logs || [])].sort((a, b) => (b.mtime || 0) - (a.mtime || 0)).map((log) =>
    h("tr", { dataset: { logName: log.name } },
      h("td", { class: "mono small" }, h("a", { href: logHref(owner, tmid, log.name) }, log.name)),
      h("td", { class: "num" }, bytes(log.size)),
      h("td", null, time(log.mtime)),
      h("td", null, h("a", { href: `${logRestPath(owner, tmid, log.name)}?download=1`,
        download: log.name }, "Download"))));
  return table(["Name", "Size", "Last Modified", ""], rows, { "data-testid": "log-files" });
}

// Metric values are strings (Flink's MetricCollectionResponseBody); memory in bytes, time in ms.
function metricValue(name, value) {
  const n = Number(value);
  if (value === undefined || value === null || !Number.isFinite(n)) return String(value ?? "-");
  if (/Memory|Bytes/.test(name)) return `${bytes(n)} (${value})`;
  if (/Time(Ms)?$/.test(name) && !/PerSecond/.test(name)) return `${duration(n)} (${value})`;
  return String(value);
}

// All metrics of `base` ("taskmanagers/<id>/metrics", "jobmanager/metrics") with their values.
export async function metricsTable(base, testId) {
  const names = (await getJSON(base)).map((m) => m.id).filter(Boolean).sort();
  const values = names.length ? await getJSON(`${base}?get=${names.map(encodeURIComponent)
    .join(",")}`) : [];
  const byId = new Map(values.map((m) => [m.id, m.value]));
  return table(["Metric", "Value"], names.map((n) =>
    h("tr", null, h("td", { class: "mono" }, n), h("td", { class: "num" },
      metricValue(n, byId.get(n))))), { "data-testid": testId });
}

async function processMemory(tmid) {
  try {
    const [rss] = await getJSON(`taskmanagers/${seg(tmid)}/metrics?get=Status.Python.Memory.RSS`);
    return rss ? bytes(Number(rss.value)) : "-";
  } catch (_) {
    return "-"; // the metrics endpoint is optional for this page
  }
}

function detailsView(tm, rss) {
  const hw = tm.hardware || {};
  const spark = tm.spark && typeof tm.spark === "object" ? tm.spark : {};
  const parts = [card("Task Manager", keyValues([
    ["ID", h("span", { class: "mono" }, tm.id)],
    ["Address", tm.path || "-"],
    ["Data port", String(tm.dataPort ?? "-")],
    ["Last heartbeat", `${time(tm.timeSinceLastHeartbeat)} (${ago(tm.timeSinceLastHeartbeat)})`],
    ["Slots", `${tm.freeSlots ?? "-"} free of ${tm.slotsNumber ?? "-"}`],
    ["CPU cores", String(hw.cpuCores ?? "-")],
    ["Physical memory", bytes(hw.physicalMemory)],
    ["Max heap", bytes(hw.freeMemory)],
    ["Process memory (RSS)", rss],
    ["Spark", sparkSummary(tm)],
  ]))];
  if (Object.keys(spark).length) {
    parts.push(card("Spark Session", keyValues(Object.keys(spark).sort().map((k) =>
      [k, String(spark[k])]))));
  }
  const slots = tm.allocatedSlots || [];
  if (slots.length) {
    parts.push(card("Allocated Slots", table(["Job", "Resource"], slots.map((s) =>
      h("tr", null, h("td", { class: "mono small" }, s.jobId ? h("a", {
        href: `#/jobs/${seg(s.jobId)}` }, s.jobId) : "-"),
      h("td", { class: "small" }, JSON.stringify(s.resource || {})))))));
  }
  return h("div", null, parts);
}

export default {
  title: () => "Task Manager",
  refresh: true,
  async render(ctx) {
    const { tmid } = ctx.params;
    const tab = ctx.params.tab || "details";
    const base = `#/taskmanagers/${seg(tmid)}`;
    let body;
    if (tab === "logs") {
      const { logs } = await api.taskManagerLogs(tmid);
      body = card("Logs", h("p", null, h("a", { href: logHref("taskmanager", tmid) },
        "Main log"), " · ", h("a", { href: `${logRestPath("taskmanager", tmid)}?download=1`,
        download: `taskmanager-${tmid}.log` }, "download")), logFilesTable(logs, "taskmanager", tmid));
    } else if (tab === "metrics") {
      body = card("Metrics", await metricsTable(`taskmanagers/${seg(tmid)}/metrics`,
        "tm-metrics"));
    } else {
      const [tm, rss] = await Promise.all([api.taskManager(tmid), processMemory(tmid)]);
      body = detailsView(tm, rss);
    }
    return h("div", { "data-testid": "taskmanager-page" },
      h("h2", { class: "subtitle mono" }, tmid),
      tabs([["details", "Details", base], ["logs", "Logs", `${base}/logs`],
        ["metrics", "Metrics", `${base}/metrics`]], tab), body);
  },
};
