// The JobManager: its configuration (GET /jobmanager/config, [{key, value}]) and its log files
// (GET /jobmanager/logs) and metrics (GET /jobmanager/metrics).
// Routes: #/jobmanager (= config), #/jobmanager/logs, #/jobmanager/metrics
import { api } from "../api.js";
import { card, h, table, tabs } from "../dom.js";
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
      ["logs", "Logs", "#/jobmanager/logs"], ["metrics", "Metrics", "#/jobmanager/metrics"]], tab),
    body);
  },
};
