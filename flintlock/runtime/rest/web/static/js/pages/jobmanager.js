// The JobManager: its configuration (GET /jobmanager/config, [{key, value}]), its log files
// (GET /jobmanager/logs), metrics (GET /jobmanager/metrics) and high availability (GET
// /jobmanager/high-availability: the leader and the standby JobManagers).
// Routes: #/jobmanager (= config), #/jobmanager/logs, #/jobmanager/metrics, #/jobmanager/ha
import { api } from "../api.js";
import { card, h, keyValues, table, tabs } from "../dom.js";
import { time } from "../format.js";
import { logHref, logRestPath } from "./logs.js";
import { logFilesTable, metricsTable } from "./taskmanager.js";

export default {
  title: () => "Job Manager",
  refresh: true,
  async render(ctx) {
    const tab = ctx.params.tab || "config";
    let body;
    if (tab === "logs") {
      const { logs } = await api.jobManagerLogs();
      body = card("Logs", h("p", null, h("a", { href: logHref("jobmanager") }, "Main log"), " · ",
        h("a", { href: `${logRestPath("jobmanager")}?download=1`, download: "jobmanager.log" },
          "download")),
      logFilesTable(logs, "jobmanager"));
    } else if (tab === "ha") {
      body = highAvailability(await api.highAvailability());
    } else if (tab === "metrics") {
      body = card("Metrics", await metricsTable("jobmanager/metrics", "jm-metrics"));
    } else {
      const entries = await api.jobManagerConfig();
      const rows = [...(entries || [])].sort((a, b) => String(a.key).localeCompare(b.key))
        .map((e) => h("tr", null, h("td", { class: "mono" }, e.key),
          h("td", { class: "mono" }, String(e.value))));
      body = card("Configuration", table(["Key", "Value"], rows, { "data-testid": "jm-config" }));
    }
    return h("div", null, tabs([["config", "Configuration", "#/jobmanager"],
      ["logs", "Logs", "#/jobmanager/logs"], ["metrics", "Metrics", "#/jobmanager/metrics"],
      ["ha", "High Availability", "#/jobmanager/ha"]], tab),
    body);
  },
};

function highAvailability(ha) {
  if (ha.type === "NONE") {
    return card("High Availability", h("p", { "data-testid": "ha-none" },
      "High availability is off (high-availability.type: NONE): this JobManager is the only one."));
  }
  const leader = ha.leader;
  const summary = keyValues([
    ["Type", ha.type], ["Cluster ID", ha["cluster-id"]], ["Storage directory", ha["storage-dir"]],
    ["Leader session", leader ? leader["session-id"] : "none (an election is under way)"],
    ["Leader REST", leader && leader.rest ? leader.rest : "-"],
  ]);
  const rows = (ha.jobmanagers || []).map((jm) => h("tr", { "data-role": jm.role },
    h("td", null, jm.role === "leader" ? h("strong", null, "leader") : "standby"),
    h("td", { class: "mono" }, jm["rpc-address"]), h("td", null, jm.host),
    h("td", { class: "mono" }, String(jm.pid)), h("td", null, time(jm.started)),
    h("td", { class: "mono" }, jm.id)));
  return h("div", null, card("High Availability", summary),
    card("JobManagers", table(["Role", "RPC", "Host", "PID", "Started", "ID"], rows,
      { "data-testid": "ha-jobmanagers" })));
}
