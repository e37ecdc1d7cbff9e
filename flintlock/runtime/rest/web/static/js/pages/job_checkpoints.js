// Checkpoints of one job, the four parts of Flink's Checkpoints tab on one page: Overview (counts
// and the latest completed / savepoint / failed / restored checkpoint), History (newest first),
// Summary (of the completed checkpoints) and Configuration. Reads GET /jobs/:jobid/checkpoints
// (Flink's CheckpointingStatistics) and GET /jobs/:jobid/checkpoints/config (CheckpointConfigInfo,
// interval Long.MAX_VALUE for a job that does not checkpoint, such as a BATCH job). Timestamps are epoch ms, durations
// ms, sizes bytes; -1 is "none yet". A history row expands to the checkpoint's operators, and an
// operator to its subtasks (job_checkpoint_details.js).
import { api } from "../api.js";
import { card, h, keyValues, table } from "../dom.js";
import { bytes, duration, time } from "../format.js";
import {
  checkpointDuration, expander, fetchSubtasks, isExpanded, operatorsView,
} from "./job_checkpoint_details.js";

// Flink's "no periodic checkpoints" interval is Long.MAX_VALUE, which JSON.parse rounds.
const NO_INTERVAL = Number.MAX_SAFE_INTEGER;

const STATUS_CLASS = { IN_PROGRESS: "running", COMPLETED: "finished", FAILED: "failed" };

function statusBadge(status) {
  const text = String(status || "UNKNOWN");
  return h("span", { class: `badge state-${STATUS_CLASS[text] || "unknown"}`,
    "data-state": text }, text);
}

function kind(isSavepoint) {
  return isSavepoint ? "Savepoint" : "Checkpoint";
}

function text(value) {
  return value === null || value === undefined || value === "" ? "-" : String(value);
}

function path(value) {
  return value ? h("span", { class: "mono checkpoint-path" }, String(value)) : "-";
}

function failureMessage(message) {
  return h("span", { class: "checkpoint-failure-message" }, message || "(no message)");
}

function stat(label, value, cls) {
  return h("div", { class: `stat ${cls}`, "data-stat": label },
    h("div", { class: "stat-value" }, text(value)),
    h("div", { class: "stat-label" }, label));
}

function countsView(counts) {
  return h("div", { class: "stats", "data-testid": "checkpoint-counts" },
    stat("Triggered", counts.total, ""),
    stat("In Progress", counts.in_progress, "state-running"),
    stat("Completed", counts.completed, "state-finished"),
    stat("Failed", counts.failed, "state-failed"),
    stat("Restored", counts.restored, "state-restarting"));
}

// One "latest" block: a title and its key/values, or "None" before there is one.
function latestBlock(testid, title, pairs) {
  return h("div", { class: "checkpoint-latest", "data-testid": testid },
    h("h3", { class: "subtitle" }, title),
    pairs ? keyValues(pairs) : h("p", { class: "muted" }, "None"));
}

function latestView(latest) {
  const { completed, savepoint, failed, restored } = latest || {};
  const done = (c) => c && [
    ["ID", text(c.id)],
    ["Completion time", time(c.latest_ack_timestamp)],
    ["End-to-end duration", checkpointDuration(c.end_to_end_duration)],
    ["State size", bytes(c.state_size)],
    ["Path", path(c.external_path)],
  ];
  return h("div", { class: "checkpoint-latest-grid" },
    latestBlock("latest-completed", "Latest Completed Checkpoint", done(completed)),
    latestBlock("latest-savepoint", "Latest Savepoint", done(savepoint)),
    latestBlock("latest-failed", "Latest Failed Checkpoint", failed && [
      ["ID", text(failed.id)],
      ["Failure time", time(failed.failure_timestamp)],
      ["Cause", failureMessage(failed.failure_message)],
    ]),
    latestBlock("latest-restored", "Latest Restore", restored && [
      ["ID", text(restored.id)],
      ["Restore time", time(restored.restore_timestamp)],
      ["Type", kind(restored.is_savepoint)],
      ["Path", path(restored.external_path)],
    ]));
}

const HISTORY_COLUMNS = ["ID", "Status", "Type", "Acknowledged", "Trigger time",
  "Latest acknowledgement", "End-to-end duration", "State size", "Path"];

// A checkpoint's row; a failed one is followed by a row with its failure message, an expanded one
// by its operators.
function historyRows(c, job, ctx, subtasks) {
  const savepoint = c.is_savepoint || c.checkpoint_type === "SAVEPOINT";
  const row = h("tr", { "data-testid": "checkpoint-row",
    dataset: { checkpointId: text(c.id), status: text(c.status) } },
  h("td", { class: "num" }, expander(ctx, `c${c.id}`, text(c.id), "checkpoint-expand")),
  h("td", null, statusBadge(c.status)),
  h("td", null, kind(savepoint)),
  h("td", { class: "num" }, `${text(c.num_acknowledged_subtasks)}/${text(c.num_subtasks)}`),
  h("td", null, time(c.trigger_timestamp)),
  h("td", null, time(c.latest_ack_timestamp)),
  h("td", { class: "num" }, checkpointDuration(c.end_to_end_duration)),
  h("td", { class: "num" }, bytes(c.state_size)),
  h("td", { class: "wrap" }, path(c.external_path)));
  const rows = [row];
  if (c.status === "FAILED") {
    rows.push(h("tr", { class: "checkpoint-failure", "data-testid": "checkpoint-failure",
      dataset: { checkpointId: text(c.id) } },
    h("td", { colspan: HISTORY_COLUMNS.length },
      h("span", { class: "muted" }, `Failed ${time(c.failure_timestamp)}: `),
      failureMessage(c.failure_message))));
  }
  if (isExpanded(ctx, `c${c.id}`)) {
    rows.push(h("tr", { class: "nested-row", "data-testid": "checkpoint-details",
      dataset: { checkpointId: text(c.id) } },
    h("td", { colspan: HISTORY_COLUMNS.length }, operatorsView(c, job, ctx, subtasks))));
  }
  return rows;
}

const SUMMARY_ROWS = [
  ["end_to_end_duration", "End-to-end duration", checkpointDuration],
  ["checkpointed_size", "Checkpointed data size", bytes],
  ["state_size", "Full checkpoint data size", bytes],
];
const SUMMARY_COLUMNS = [["min", "Minimum"], ["avg", "Average"], ["max", "Maximum"],
  ["p50", "50th percentile"], ["p90", "90th percentile"], ["p99", "99th percentile"],
  ["p999", "99.9th percentile"]];

function summaryView(summary, completed) {
  if (!completed) return h("p", { class: "muted" }, "No completed checkpoints yet.");
  const rows = SUMMARY_ROWS.map(([key, label, format]) => {
    const values = (summary || {})[key] || {};
    return h("tr", { dataset: { metric: key } }, h("td", null, label),
      SUMMARY_COLUMNS.map(([p]) => h("td", { class: "num", dataset: { stat: p } },
        typeof values[p] === "number" ? format(Math.round(values[p])) : "-")));
  });
  return table(["", ...SUMMARY_COLUMNS.map(([, label]) => label)], rows,
    { "data-testid": "checkpoint-summary" });
}

function enabled(flag) {
  return flag ? "Enabled" : "Disabled";
}

function configView(config) {
  const ext = config.externalization || {};
  const interval = config.interval;
  const value = (key, shown) => h("span", { "data-config": key }, shown);
  const rows = [
    ["Checkpointing mode", value("mode",
      config.mode === "at_least_once" ? "At Least Once" : "Exactly Once")],
    ["Interval", value("interval", typeof interval === "number" && interval >= NO_INTERVAL
      ? "Periodic checkpoints disabled" : duration(interval))],
    ["Timeout", value("timeout", duration(config.timeout))],
    ["Minimum pause between checkpoints", value("min_pause", duration(config.min_pause))],
    ["Maximum concurrent checkpoints", value("max_concurrent", text(config.max_concurrent))],
    ["Tolerable failed checkpoints", value("tolerable_failed_checkpoints",
      text(config.tolerable_failed_checkpoints))],
    ["Persist checkpoints externally", value("externalization", !ext.enabled ? "Disabled"
      : `Enabled (${ext.delete_on_cancellation ? "delete" : "retain"} on cancellation)`)],
    ["State backend", value("state_backend", text(config.state_backend))],
    ["Checkpoint storage", value("checkpoint_storage", text(config.checkpoint_storage))],
    ["Unaligned checkpoints", value("unaligned_checkpoints",
      enabled(config.unaligned_checkpoints))],
    ["Checkpoints with finished tasks", value("checkpoints_after_tasks_finish",
      enabled(config.checkpoints_after_tasks_finish))],
    ["State changelog", value("state_changelog_enabled", enabled(config.state_changelog_enabled))],
  ];
  return h("div", { "data-testid": "checkpoint-config" }, keyValues(rows));
}

function disabledNotice() {
  return h("p", { class: "muted", "data-testid": "checkpointing-disabled" },
    "Checkpointing is not enabled for this job.");
}

// The configuration (interval Long.MAX_VALUE: no periodic checkpoints), or null when an older
// server answers 404 for a job that does not checkpoint.
async function checkpointConfig(jid) {
  try {
    return await api.jobCheckpointConfig(jid);
  } catch (err) {
    if (err && err.status === 404) return null;
    throw err;
  }
}

export async function checkpointsView(job, ctx) {
  const [stats, config] = await Promise.all([api.jobCheckpoints(job.jid),
    checkpointConfig(job.jid)]);
  const counts = stats.counts || {};
  const history = stats.history || [];
  const subtasks = await fetchSubtasks(job.jid, history, ctx);
  const periodic = config && !(typeof config.interval === "number" && config.interval >= NO_INTERVAL);
  if (!periodic && !history.length) {
    return h("div", { "data-testid": "checkpoints" }, card("Checkpoints", disabledNotice()));
  }
  return h("div", { "data-testid": "checkpoints" },
    card("Overview", countsView(counts), latestView(stats.latest)),
    card(`History (${history.length} of ${text(counts.total)}, newest first)`,
      table(HISTORY_COLUMNS, history.flatMap((c) => historyRows(c, job, ctx, subtasks)),
        { "data-testid": "checkpoint-history" })),
    card("Summary of the completed checkpoints", summaryView(stats.summary, counts.completed)),
    card("Configuration", config ? configView(config) : disabledNotice()));
}
