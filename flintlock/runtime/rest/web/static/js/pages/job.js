// One job: header (state, times, Cancel), tabs Overview (DAG, vertices, subtasks of the selected
// vertex) / Exceptions / Timeline / Checkpoints / Configuration. Routes:
//   #/jobs/<jid>, #/jobs/<jid>/vertices/<vid>, #/jobs/<jid>/exceptions, /timeline, /checkpoints,
//   /configuration
import { api, seg } from "../api.js";
import { dagSvg } from "../dag.js";
import { card, errorBox, h, keyValues, table, tabs } from "../dom.js";
import { badge, duration, isTerminal, taskCounts, time } from "../format.js";
import { checkpointsView } from "./job_checkpoints.js";
import { exceptionsView } from "./job_exceptions.js";
import { timelineView } from "./job_timeline.js";
import { subtasksView, verticesTable } from "./job_vertices.js";

function cancelControl(job, ctx) {
  const features = ctx.config.features || {};
  if (isTerminal(job.state) || features["web-cancel"] === false) return null;
  const state = ctx.state;
  if (state.cancelRequested) {
    return h("span", { class: "muted", "data-testid": "cancel-requested" }, "Cancel requested…");
  }
  if (!state.confirmCancel) {
    return h("button", { class: "btn btn-danger", "data-testid": "cancel-job",
      onclick: () => { state.confirmCancel = true; ctx.rerender(); } }, "Cancel Job");
  }
  return h("span", { class: "confirm" }, "Cancel this job? ",
    h("button", { class: "btn btn-danger", "data-testid": "confirm-cancel", onclick: async () => {
      state.confirmCancel = false;
      try {
        await api.cancelJob(job.jid);
        state.cancelRequested = true;
        state.cancelError = null;
      } catch (err) {
        state.cancelError = err;
      }
      ctx.rerender();
    } }, "Yes, cancel"),
    " ",
    h("button", { class: "btn", "data-testid": "keep-job",
      onclick: () => { state.confirmCancel = false; ctx.rerender(); } }, "No"));
}

function header(job, ctx) {
  if (isTerminal(job.state)) ctx.state.cancelRequested = false;
  return h("section", { class: "card job-header" },
    h("div", { class: "job-title" },
      h("h2", { "data-testid": "job-name" }, job.name || "(unnamed)"),
      h("span", { "data-testid": "job-state" }, badge(job.state)),
      h("span", { class: "spacer" }),
      cancelControl(job, ctx)),
    ctx.state.cancelError ? errorBox(ctx.state.cancelError) : null,
    keyValues([
      ["Job ID", h("span", { class: "mono" }, job.jid)],
      ["Job type", job["job-type"] || "-"],
      ["Start time", time(job["start-time"])],
      ["End time", job["end-time"] > 0 ? time(job["end-time"]) : "-"],
      ["Duration", duration(job.duration)],
      ["Tasks", taskCounts(job["status-counts"])],
      job["pending-slot-requests"] ? ["Waiting for slots", String(job["pending-slot-requests"])]
        : null,
      job.recoveries ? ["Recovered by a new leader",
        h("span", { "data-testid": "job-recoveries" }, `${job.recoveries}x`)] : null,
    ].filter(Boolean)));
}

// A running streaming job's vertices: back pressure (GET .../backpressure) and output records
// per second (from write-records between two refreshes of the page).
async function liveVertices(job, ctx) {
  if (job["job-type"] !== "STREAMING" || job.state !== "RUNNING") return {};
  const now = Date.now();
  const previous = ctx.state.recordCounts || {};
  const counts = {};
  const live = {};
  await Promise.all((job.vertices || []).map(async (v) => {
    const written = (v.metrics || {})["write-records"] || 0;
    counts[v.id] = [now, written];
    const before = previous[v.id];
    const rate = before && now > before[0] ? (written - before[1]) * 1000 / (now - before[0]) : null;
    try {
      const bp = await api.backpressure(job.jid, v.id);
      const subtasks = bp.subtasks || [];
      const avg = (key) => subtasks.length
        ? subtasks.reduce((sum, t) => sum + (t[key] || 0), 0) / subtasks.length : 0;
      live[v.id] = { level: bp.backpressureLevel, ratio: avg("ratio"), busy: avg("busyRatio"), rate };
    } catch (_) {
      live[v.id] = { level: null, ratio: 0, busy: 0, rate };
    }
  }));
  ctx.state.recordCounts = counts;
  return live;
}

async function overviewTab(job, ctx) {
  const vid = ctx.params.vid;
  const select = (id) => ctx.navigate(`#/jobs/${seg(job.jid)}/vertices/${seg(id)}`);
  const live = await liveVertices(job, ctx);
  const parts = [
    card("Job Graph", h("div", { class: "dag-scroll", "data-testid": "job-graph" },
      dagSvg(job.plan, job.vertices, vid, select, live))),
    card("Vertices", verticesTable(job, vid)),
  ];
  if (vid) {
    const vertex = (job.vertices || []).find((v) => v.id === vid);
    parts.push(await subtasksView(job, vid, vertex));
  } else {
    parts.push(h("p", { class: "muted hint" },
      "Select a vertex in the graph or the table to see its subtasks."));
  }
  return h("div", null, parts);
}

async function configurationTab(job) {
  const info = await api.jobConfig(job.jid);
  const exec = info["execution-config"] || info.executionConfigInfo || {};
  const rows = [];
  for (const [k, v] of Object.entries(exec)) {
    if (k !== "user-config" && typeof v !== "object") rows.push([k, String(v)]);
  }
  const user = exec["user-config"] || {};
  return h("div", null,
    card("Execution Configuration", keyValues(rows.length ? rows : [["-", "-"]])),
    card("Job Configuration", table(["Key", "Value"], Object.keys(user).sort().map((k) =>
      h("tr", null, h("td", { class: "mono" }, k), h("td", { class: "mono wrap" },
        String(user[k])))), { "data-testid": "job-config" })));
}

export default {
  title: () => "Job",
  refresh: true,
  async render(ctx) {
    const { jid } = ctx.params;
    const tab = ctx.params.tab === "vertices" || !ctx.params.tab ? "overview" : ctx.params.tab;
    const job = await api.job(jid);
    ctx.setTitle(`Job: ${job.name || jid}`);
    const base = `#/jobs/${seg(jid)}`;
    let body;
    if (tab === "exceptions") body = await exceptionsView(job, ctx);
    else if (tab === "timeline") body = await timelineView(job);
    else if (tab === "checkpoints") body = await checkpointsView(job, ctx);
    else if (tab === "configuration") body = await configurationTab(job);
    else body = await overviewTab(job, ctx);
    return h("div", { "data-testid": "job-page", dataset: { jid: job.jid, state: job.state } },
      header(job, ctx),
      tabs([["overview", "Overview", base], ["exceptions", "Exceptions", `${base}/exceptions`],
        ["timeline", "Timeline", `${base}/timeline`],
        ["checkpoints", "Checkpoints", `${base}/checkpoints`],
        ["configuration", "Configuration", `${base}/configuration`]], tab),
      body);
  },
};
