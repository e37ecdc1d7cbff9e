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
    const { taskmanagers } = await api.taskManagers();
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
    return card(`Task Managers (${rows.length})`, table(["ID", "Address", "Last Heartbeat",
      "Slots", "Free Slots", "CPU Cores", "Memory", "Max Heap", "Spark", "Logs"], rows,
    { "data-testid": "taskmanagers" }));
  },
};
