// TaskManager list (GET /taskmanagers, Flink's TaskManagerInfo).
import { api, seg } from "../api.js";
import { card, h, table } from "../dom.js";
import { ago, bytes } from "../format.js";

// "master · version" of the TaskManager's Spark session, when the API reports it.
export function sparkSummary(tm) {
  const spark = tm.spark || tm.sparkSession || null;
  if (!spark || typeof spark !== "object" || !Object.keys(spark).length) return "-";
  const main = spark.master || spark.remote || spark["spark.master"] || "";
  const version = spark.version || spark["spark.version"] || "";
  const text = [main, version].filter(Boolean).join(" · ");
  return h("span", { title: JSON.stringify(spark) }, text || Object.values(spark).join(" · "));
}

export default {
  title: () => "Task Managers",
  refresh: true,
  async render() {
    const body = await api.taskManagers();
    const taskmanagers = body.taskmanagers;
    const now = Date.now();
    const rows = (taskmanagers || []).map((tm) => {
      const hw = tm.hardware || {};
      return h("tr", { dataset: { tmid: tm.id } },
        h("td", { class: "mono small" }, h("a", { href: `#/taskmanagers/${seg(tm.id)}` }, tm.id)),
        h("td", { class: "mono small wrap" }, tm.path || "-"),
        h("td", null, ago(tm.timeSinceLastHeartbeat, now)),
        h("td", { class: "num" }, String(tm.slotsNumber ?? "-")),
        h("td", { class: "num" }, String(tm.freeSlots ?? "-")),
        h("td", { class: "num" }, String(hw.cpuCores ?? "-")),
        h("td", { class: "num" }, bytes(hw.physicalMemory)),
        h("td", { class: "num" }, bytes(hw.freeMemory)),
        h("td", null, sparkSummary(tm)),
        h("td", null, h("a", { href: `#/taskmanagers/${seg(tm.id)}/logs` }, "Logs")));
    });
    const registered = card(`Task Managers (${rows.length})`, table(["ID", "Address",
      "Last Heartbeat", "Slots", "Free Slots", "CPU Cores", "Memory", "Max Heap", "Spark",
      "Logs"], rows, { "data-testid": "taskmanagers" }));
    const pending = pendingCard(body.pendingTaskManagers || [], body.heldBack, now);
    return pending ? h("div", null, registered, pending) : registered;
  },
};

// TaskManagers an active ResourceManager is starting or stopping (flintlock's
// pendingTaskManagers), and why it holds more back; nothing when there are none.
function pendingCard(pending, heldBack, now) {
  if (!pending.length && !heldBack) return null;
  const rows = pending.map((p) => h("tr", { dataset: { tmid: p.id, state: p.state } },
    h("td", { class: "mono small" }, p.id),
    h("td", null, p.state === "STARTING" ? "starting" : "stopping"),
    h("td", null, ago(p.since, now)),
    h("td", { class: "num" }, String(p.slotsNumber)),
    h("td", { class: "num" }, String(p.cpuCores)),
    h("td", { class: "num" }, p.taskHeapMemory ? bytes(p.taskHeapMemory * 1048576) : "default")));
  return card(`Starting and stopping Task Managers (${rows.length})`, h("div", null,
    heldBack ? h("p", { class: "notice", "data-testid": "held-back" }, heldBack) : null,
    table(["ID", "State", "Since", "Slots", "CPU Cores", "Task Heap"], rows,
      { "data-testid": "pending-taskmanagers" })));
}
