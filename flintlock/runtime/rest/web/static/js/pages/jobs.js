// Running / completed job lists (GET /jobs/overview, Flink's MultipleJobsDetails).
import { api, seg } from "../api.js";
import { card, h, table } from "../dom.js";
import { badge, duration, isTerminal, taskCounts, time } from "../format.js";

export function jobRow(job) {
  const href = `#/jobs/${seg(job.jid)}`;
  return h("tr", { class: "clickable", dataset: { jid: job.jid, state: job.state } },
    h("td", null, h("a", { href, class: "job-link" }, job.name || "(unnamed)")),
    h("td", { class: "mono small" }, job.jid),
    h("td", null, time(job["start-time"])),
    h("td", null, duration(job.duration)),
    h("td", null, isTerminal(job.state) ? time(job["end-time"]) : "-"),
    h("td", null, taskCounts(job.tasks)),
    h("td", null, badge(job.state)));
}

export function jobsTable(jobs, testId) {
  const sorted = [...jobs].sort((a, b) => (b["start-time"] || 0) - (a["start-time"] || 0));
  return table(["Job Name", "Job ID", "Start Time", "Duration", "End Time", "Tasks", "Status"],
    sorted.map(jobRow), { "data-testid": testId });
}

export function splitJobs(jobs) {
  return {
    running: jobs.filter((j) => !isTerminal(j.state)),
    completed: jobs.filter((j) => isTerminal(j.state)),
  };
}

function listPage(which, title) {
  return {
    title: () => title,
    refresh: true,
    async render() {
      const { jobs } = await api.jobsOverview();
      const chosen = splitJobs(jobs || [])[which];
      return card(`${title} (${chosen.length})`, jobsTable(chosen, `${which}-jobs`));
    },
  };
}

export const runningJobsPage = listPage("running", "Running Jobs");
export const completedJobsPage = listPage("completed", "Completed Jobs");
