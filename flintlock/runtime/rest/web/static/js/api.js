// Calls of Flink's REST API v1, relative and unversioned as Flink's own dashboard makes them
// (so the dashboard also works behind a reverse proxy with a path prefix).
// Every failure becomes an ApiError carrying Flink's {"errors": [...]} messages.

export class ApiError extends Error {
  constructor(status, path, messages) {
    const detail = messages.length ? messages.join("; ") : "no error message";
    super(status ? `${path}: HTTP ${status}: ${detail}` : `${path}: ${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.path = path;
    this.messages = messages;
  }
}

// Encode one path segment (ids come from the API; never trust them to be URL-safe).
export function seg(value) {
  return encodeURIComponent(String(value));
}

async function errorMessages(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && Array.isArray(body.errors)) return body.errors.map(String);
  } catch (_) {
    // not JSON: fall through to the raw text
  }
  return text ? [text.slice(0, 500)] : [response.statusText || "request failed"];
}

async function request(path, init = {}) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, path, [`cannot reach the JobManager (${err.message})`]);
  }
  if (!response.ok) {
    throw new ApiError(response.status, path, await errorMessages(response));
  }
  return response;
}

async function json(response) {
  const text = await response.text();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(response.status, response.url, [`invalid JSON: ${err.message}`]);
  }
}

export async function getJSON(path) {
  return json(await request(path, { headers: { Accept: "application/json" } }));
}

// A byte range of a log file: GET <path>?start=<byte>&count=<bytes> (start < 0 counts from the
// end). Returns {bytes: Uint8Array, size, start, end} from the X-Log-Size/-Start/-End headers;
// a server that ignores the range gives the whole file.
export async function getLogChunk(path, start, count) {
  const sep = path.includes("?") ? "&" : "?";
  const response = await request(`${path}${sep}start=${start}&count=${count}`,
    { headers: { Accept: "text/plain, */*" } });
  const bytes = new Uint8Array(await response.arrayBuffer());
  const header = (name, fallback) => {
    const value = parseInt(response.headers.get(name), 10);
    return Number.isFinite(value) ? value : fallback;
  };
  const size = header("X-Log-Size", bytes.length);
  const first = header("X-Log-Start", 0);
  return { bytes, size, start: first, end: header("X-Log-End", first + bytes.length) };
}

function authHeaders(secret) {
  return secret ? { Authorization: `Bearer ${secret}` } : {};
}

export async function sendJSON(method, path, body, secret) {
  const headers = { Accept: "application/json", ...authHeaders(secret) };
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return json(await request(path, init));
}

export async function postForm(path, form, secret) {
  return json(await request(path, {
    method: "POST",
    headers: { Accept: "application/json", ...authHeaders(secret) },
    body: form,
  }));
}

// The endpoints the pages read, by name (one place to see what the dashboard depends on).
export const api = {
  config: () => getJSON("config"),
  overview: () => getJSON("overview"),
  jobsOverview: () => getJSON("jobs/overview"),
  job: (jid) => getJSON(`jobs/${seg(jid)}`),
  jobConfig: (jid) => getJSON(`jobs/${seg(jid)}/config`),
  jobExceptions: (jid) => getJSON(`jobs/${seg(jid)}/exceptions?maxExceptions=20`),
  jobCheckpoints: (jid) => getJSON(`jobs/${seg(jid)}/checkpoints`),
  jobCheckpointConfig: (jid) => getJSON(`jobs/${seg(jid)}/checkpoints/config`),
  jobCheckpointSubtasks: (jid, cid, vid) =>
    getJSON(`jobs/${seg(jid)}/checkpoints/details/${seg(cid)}/subtasks/${seg(vid)}`),
  vertex: (jid, vid) => getJSON(`jobs/${seg(jid)}/vertices/${seg(vid)}`),
  backpressure: (jid, vid) => getJSON(`jobs/${seg(jid)}/vertices/${seg(vid)}/backpressure`),
  subtaskTimes: (jid, vid) => getJSON(`jobs/${seg(jid)}/vertices/${seg(vid)}/subtasktimes`),
  attempt: (jid, vid, i, a) =>
    getJSON(`jobs/${seg(jid)}/vertices/${seg(vid)}/subtasks/${seg(i)}/attempts/${seg(a)}`),
  cancelJob: (jid) => sendJSON("PATCH", `jobs/${seg(jid)}?mode=cancel`),
  taskManagers: () => getJSON("taskmanagers"),
  taskManager: (tmid) => getJSON(`taskmanagers/${seg(tmid)}`),
  taskManagerLogs: (tmid) => getJSON(`taskmanagers/${seg(tmid)}/logs`),
  jobManagerConfig: () => getJSON("jobmanager/config"),
  jobManagerLogs: () => getJSON("jobmanager/logs"),
  highAvailability: () => getJSON("jobmanager/high-availability"),
  jars: () => getJSON("jars"),
  uploadJar: (form, secret) => postForm("jars/upload", form, secret),
  runJar: (jarId, body, secret) => sendJSON("POST", `jars/${seg(jarId)}/run`, body, secret),
  deleteJar: (jarId, secret) => sendJSON("DELETE", `jars/${seg(jarId)}`, undefined, secret),
};
