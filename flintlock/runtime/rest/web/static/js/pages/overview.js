// Cluster overview (GET /overview, GET /jobs/overview): TaskManagers, slots, job counts, recent
// jobs — Flink's dashboard landing page.
import { api } from "../api.js";
import { card, h } from "../dom.js";
import { jobsTable, splitJobs } from "./jobs.js";

const RECENT = 10;

function stat(label, value, cls, href) {
  const body = [h("div", { class: "stat-value" }, String(value ?? "-")),
    h("div", { class: "stat-label" }, label)];
  const attrs = { class: `stat ${cls || ""}`, "data-stat": label };
  return href ? h("a", { ...attrs, href }, body) : h("div", attrs, body);
}

export default {
  title: () => "Overview",
  refresh: true,
  async render() {
    const [overview, { jobs }] = await Promise.all([api.overview(), api.jobsOverview()]);
    const { running, completed } = splitJobs(jobs || []);
    return h("div", null,
      h("div", { class: "stats" },
        stat("Task Managers", overview["taskmanagers-pending"]
          ? `${overview.taskmanagers} (+${overview["taskmanagers-pending"]} starting)`
          : overview.taskmanagers, "", "#/taskmanagers"),
        stat("Total Task Slots", overview["slots-total"]),
        stat("Available Task Slots", overview["slots-available"]),
        stat("Running Jobs", overview["jobs-running"], "state-running", "#/jobs/running"),
        stat("Finished Jobs", overview["jobs-finished"], "state-finished", "#/jobs/completed"),
        stat("Failed Jobs", overview["jobs-failed"], "state-failed", "#/jobs/completed"),
        stat("Cancelled Jobs", overview["jobs-cancelled"], "state-canceled", "#/jobs/completed")),
      card(`Running Jobs (${running.length})`, jobsTable(running, "running-jobs")),
      card(`Recent Completed Jobs (${Math.min(RECENT, completed.length)} of ${completed.length})`,
        jobsTable(completed.sort((a, b) => b["end-time"] - a["end-time"]).slice(0, RECENT),
          "completed-jobs")));
  },
};
