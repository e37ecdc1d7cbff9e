// The dashboard shell: hash routing, the refresh loop (GET /config "refresh-interval"), the
// navigation highlight and the error banner. Pages live in pages/*.js; each exports
//   { title(params) -> string, refresh: boolean, render(ctx) -> Promise<Node> }
// and builds its DOM from API data with dom.js (no innerHTML).
import { api } from "./api.js";
import { errorBox, h } from "./dom.js";
import jobPage from "./pages/job.js";
import jobManagerPage from "./pages/jobmanager.js";
import { completedJobsPage, runningJobsPage } from "./pages/jobs.js";
import logsPage from "./pages/logs.js";
import overviewPage from "./pages/overview.js";
import submitPage from "./pages/submit.js";
import taskManagerPage from "./pages/taskmanager.js";
import taskManagersPage from "./pages/taskmanagers.js";

const DEFAULT_REFRESH_MS = 3000;
const MIN_REFRESH_MS = 200;

// [pattern, page, nav key]; named groups become ctx.params
const ROUTES = [
  [/^\/?$/, overviewPage, "overview"],
  [/^\/overview$/, overviewPage, "overview"],
  [/^\/jobs\/running$/, runningJobsPage, "jobs/running"],
  [/^\/jobs\/completed$/, completedJobsPage, "jobs/completed"],
  [/^\/jobs\/(?<jid>[0-9a-fA-F]{32})(?:\/(?<tab>vertices|exceptions|timeline|checkpoints|configuration))?(?:\/(?<vid>[0-9a-fA-F]{32}))?$/,
    jobPage, null],
  [/^\/taskmanagers$/, taskManagersPage, "taskmanagers"],
  [/^\/taskmanagers\/(?<tmid>[^/]+)(?:\/(?<tab>logs|metrics))?$/, taskManagerPage, "taskmanagers"],
  [/^\/jobmanager(?:\/(?<tab>config|logs|metrics|ha))?$/, jobManagerPage, "jobmanager"],
  [/^\/logs\/(?<owner>jobmanager)(?:\/(?<name>[^/]+))?$/, logsPage, "jobmanager"],
  [/^\/logs\/(?<owner>taskmanager)\/(?<tmid>[^/]+)(?:\/(?<name>[^/]+))?$/, logsPage,
    "taskmanagers"],
  [/^\/submit$/, submitPage, "submit"],
];

const app = {
  config: { "refresh-interval": DEFAULT_REFRESH_MS, features: { "web-submit": true } },
  route: null, // {key, page, params, query, nav}
  states: new Map(), // page-local state per route key, kept across refreshes
  renderToken: 0,
  busy: false,
  timer: null,
};

function parseHash() {
  // match on the encoded path, then decode each parameter (a name may hold an encoded "/")
  const raw = location.hash.replace(/^#/, "") || "/overview";
  const [path, queryText = ""] = raw.split("?");
  const query = Object.fromEntries(new URLSearchParams(queryText));
  for (const [pattern, page, nav] of ROUTES) {
    const match = path.match(pattern);
    if (match) {
      const params = {};
      for (const [k, v] of Object.entries(match.groups || {})) {
        if (v !== undefined) params[k] = decodeURIComponent(v);
      }
      return { key: path, page, params, query, nav };
    }
  }
  return { key: path, page: null, params: {}, query, nav: null };
}

export function navigate(hash) {
  if (location.hash === hash) render(false);
  else location.hash = hash;
}

function showBanner(err) {
  const banner = document.getElementById("error-banner");
  if (!err) {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  banner.hidden = false;
  banner.replaceChildren(h("strong", null, "Refresh failed: "), String(err.message || err));
}

function highlightNav(nav) {
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.nav === nav);
  }
}

function pageState(key) {
  if (!app.states.has(key)) app.states.set(key, {});
  return app.states.get(key);
}

async function render(isRefresh) {
  const route = app.route;
  const content = document.getElementById("content");
  if (!route.page) {
    content.replaceChildren(h("div", { class: "error-box" }, `No page at #${route.key}.`));
    return;
  }
  const token = ++app.renderToken;
  app.busy = true;
  const ctx = {
    params: route.params,
    query: route.query,
    config: app.config,
    state: pageState(route.key),
    navigate,
    rerender: () => render(true),
    setTitle: (title) => {
      if (token !== app.renderToken) return;
      document.getElementById("page-title").textContent = title;
      document.title = `${title} · flintlock`;
    },
  };
  try {
    const node = await route.page.render(ctx);
    if (token !== app.renderToken) return; // the route changed meanwhile
    // an unchanged page keeps its DOM (text selection, focus, scroll position survive a refresh)
    const current = content.firstElementChild;
    if (!(isRefresh && current && content.childElementCount === 1 &&
          current.outerHTML === node.outerHTML)) {
      content.replaceChildren(node);
    }
    showBanner(null);
    document.getElementById("refresh-state").textContent =
      route.page.refresh ? `Updated ${new Date().toLocaleTimeString()}` : "";
  } catch (err) {
    if (token !== app.renderToken) return;
    if (isRefresh && content.dataset.route === route.key) {
      showBanner(err); // keep the last good content; say why it is stale
    } else {
      content.replaceChildren(errorBox(err));
    }
    console.error(err);
  } finally {
    if (token === app.renderToken) { // this is still the route's latest render
      app.busy = false;
      content.dataset.route = route.key;
    }
  }
}

function onRouteChange() {
  app.route = parseHash();
  document.getElementById("page-title").textContent =
    app.route.page ? app.route.page.title(app.route.params) : "Not found";
  document.title = `${document.getElementById("page-title").textContent} · flintlock`;
  highlightNav(app.route.nav);
  showBanner(null);
  document.getElementById("content").dataset.route = "";
  render(false);
}

function schedule() {
  clearInterval(app.timer);
  const interval = Math.max(MIN_REFRESH_MS, Number(app.config["refresh-interval"]) ||
    DEFAULT_REFRESH_MS);
  app.timer = setInterval(() => {
    if (document.hidden || app.busy || !app.route || !app.route.page) return;
    if (app.route.page.refresh) render(true);
  }, interval);
}

async function boot() {
  try {
    app.config = await api.config();
  } catch (err) {
    showBanner(err);
  }
  const features = app.config.features || {};
  document.getElementById("nav-submit").hidden = features["web-submit"] === false;
  const version = app.config["flink-version"];
  document.getElementById("version").textContent = version ? `Version ${version}` : "";
  window.addEventListener("hashchange", onRouteChange);
  onRouteChange();
  schedule();
}

boot();
