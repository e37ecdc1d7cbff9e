// A checkpoint's details, as Flink's history rows expand: its operators (job vertices, from the
// history entry's "tasks": TaskCheckpointStatistics per vertex id) and, per operator, its
// subtasks (GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid, Flink's
// TaskCheckpointStatisticsWithSubtaskDetails). What is expanded is page state (ctx.state), so it
// survives the page's refreshes; the subtasks of every expanded operator are fetched at each
// render. Timestamps are epoch ms, durations ms, sizes bytes.
import { api } from "../api.js";
import { h, table } from "../dom.js";
import { bytes, duration, time } from "../format.js";

// A checkpoint's duration: centiseconds below a minute ("1.18s", not "1s").
export function checkpointDuration(ms) {
  return typeof ms === "number" && ms >= 1000 && ms < 60_000 ? `${(ms / 1000).toFixed(2)}s`
    : duration(ms);
}

function text(value) {
  return value === null || value === undefined || value === "" ? "-" : String(value);
}

// ctx.state.expanded: a Set of "c<checkpoint id>" and "c<checkpoint id>/<vertex id>" keys.
function expanded(ctx) {
  return ctx.state.expanded || (ctx.state.expanded = new Set());
}

export function isExpanded(ctx, key) {
  return expanded(ctx).has(key);
}

// A button that expands or collapses `key`, then renders the page again.
export function expander(ctx, key, label, testid) {
  const open = isExpanded(ctx, key);
  return h("button", {
    type: "button", class: "expander", "aria-expanded": String(open), "data-testid": testid,
    onclick: () => {
      if (open) expanded(ctx).delete(key); else expanded(ctx).add(key);
      ctx.rerender();
    },
  }, open ? "\u25BE " : "\u25B8 ", label);
}

// The subtask details of every expanded operator of a listed checkpoint: Map key -> details, or
// null when the checkpoint is no longer in the job's statistics (404).
export async function fetchSubtasks(jid, history, ctx) {
  const listed = new Set(history.map((c) => `c${c.id}`));
  const wanted = [...expanded(ctx)].filter((k) => k.includes("/") && listed.has(k.split("/")[0]));
  const found = await Promise.all(wanted.map(async (key) => {
    const [cid, vid] = key.slice(1).split("/");
    try {
      return [key, await api.jobCheckpointSubtasks(jid, cid, vid)];
    } catch (err) {
      if (err && err.status === 404) return [key, null];
      throw err;
    }
  }));
  return new Map(found);
}

const OPERATOR_COLUMNS = ["Operator", "Acknowledged", "Latest acknowledgement",
  "End-to-end duration", "Checkpointed data size", "Full checkpoint data size"];

const SUBTASK_COLUMNS = ["Subtask", "Acknowledged", "Acknowledgement", "End-to-end duration",
  "Checkpointed data size", "Full checkpoint data size", "Sync duration", "Async duration",
  "Alignment duration", "Start delay"];

function subtaskRow(s) {
  const acked = s.status === "completed";
  const cells = acked ? [
    h("td", null, "Yes"), h("td", null, time(s.ack_timestamp)),
    h("td", { class: "num" }, checkpointDuration(s.end_to_end_duration)),
    h("td", { class: "num" }, bytes(s.checkpointed_size)),
    h("td", { class: "num" }, bytes(s.state_size)),
    h("td", { class: "num" }, checkpointDuration((s.checkpoint || {}).sync)),
    h("td", { class: "num" }, checkpointDuration((s.checkpoint || {}).async)),
    h("td", { class: "num" }, checkpointDuration((s.alignment || {}).duration)),
    h("td", { class: "num" }, checkpointDuration(s.start_delay)),
  ] : [h("td", { colspan: SUBTASK_COLUMNS.length - 1, class: "muted" },
    "Not acknowledged (pending, or the checkpoint failed)")];
  return h("tr", { "data-testid": "checkpoint-subtask",
    dataset: { index: text(s.index), status: text(s.status) } },
  h("td", { class: "num" }, text(s.index)), cells);
}

function subtasksView(details) {
  if (!details) {
    return h("p", { class: "muted" }, "No subtask details: the checkpoint is no longer in the "
      + "job's checkpoint statistics.");
  }
  return table(SUBTASK_COLUMNS, (details.subtasks || []).map(subtaskRow),
    { class: "table nested", "data-testid": "checkpoint-subtasks" });
}

// The operators of checkpoint `c` (job order), each expandable to its subtasks.
export function operatorsView(c, job, ctx, subtasks) {
  const tasks = c.tasks || {};
  const names = new Map((job.vertices || []).map((v) => [v.id, v.name]));
  const ids = [...(job.vertices || []).map((v) => v.id).filter((id) => id in tasks),
    ...Object.keys(tasks).filter((id) => !names.has(id))];
  const rows = ids.flatMap((vid) => {
    const t = tasks[vid];
    const key = `c${c.id}/${vid}`;
    const row = h("tr", { "data-testid": "checkpoint-operator", dataset: { vertexId: vid } },
      h("td", { class: "name-cell" }, expander(ctx, key, names.get(vid) || vid,
        "checkpoint-operator-expand")),
      h("td", { class: "num" }, `${text(t.num_acknowledged_subtasks)}/${text(t.num_subtasks)}`),
      h("td", null, time(t.latest_ack_timestamp)),
      h("td", { class: "num" }, checkpointDuration(t.end_to_end_duration)),
      h("td", { class: "num" }, bytes(t.checkpointed_size)),
      h("td", { class: "num" }, bytes(t.state_size)));
    if (!isExpanded(ctx, key)) return [row];
    return [row, h("tr", { class: "nested-row" },
      h("td", { colspan: OPERATOR_COLUMNS.length }, subtasksView(subtasks.get(key))))];
  });
  return table(OPERATOR_COLUMNS, rows, { class: "table nested",
    "data-testid": "checkpoint-operators" });
}
