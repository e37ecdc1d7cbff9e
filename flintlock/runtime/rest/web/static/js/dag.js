// The JobGraph as an SVG DAG: a layered layout by topological depth (sources left, sinks right),
// nodes ordered within a layer by the barycentre of their inputs, cubic edges labelled with the
// ship strategy. Input: Flink's plan ("nodes" with "inputs") and the job's "vertices" (status,
// parallelism, metrics, task counts), both from GET /jobs/:jobid.
import { s } from "./dom.js";
import { count, bytes, parallelismText, progress, stateClass } from "./format.js";

const W = 230; // node width
const GAP_X = 110;
const GAP_Y = 28;
const PAD = 16;
const HEADER = 24;
const LINE = 16;
const MAX_OP_LINES = 5;
const MIN_SCALE = 0.75;
const MAX_CHARS = 31;

function depthOf(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const visiting = new Set();
  const visit = (n) => {
    if (depth.has(n.id)) return depth.get(n.id);
    if (visiting.has(n.id)) return 0; // a cycle would be a bug upstream; do not loop
    visiting.add(n.id);
    const inputs = (n.inputs || []).map((i) => byId.get(i.id)).filter(Boolean);
    const d = inputs.length ? 1 + Math.max(...inputs.map(visit)) : 0;
    visiting.delete(n.id);
    depth.set(n.id, d);
    return d;
  };
  nodes.forEach(visit);
  return depth;
}

function orderLayers(nodes, depth) {
  const layers = [];
  for (const n of nodes) {
    const d = depth.get(n.id);
    (layers[d] = layers[d] || []).push(n);
  }
  for (let sweep = 0; sweep < 4; sweep += 1) {
    const index = new Map();
    layers.forEach((layer) => layer.forEach((n, i) => index.set(n.id, i)));
    for (let d = 1; d < layers.length; d += 1) {
      const key = (n) => {
        const ins = (n.inputs || []).filter((i) => index.has(i.id));
        return ins.length ? ins.reduce((a, i) => a + index.get(i.id), 0) / ins.length : 0;
      };
      layers[d] = (layers[d] || []).slice().sort((a, b) => key(a) - key(b));
      layers[d].forEach((n, i) => index.set(n.id, i));
    }
  }
  return layers.filter(Boolean);
}

function clip(text) {
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS - 1)}…` : text;
}

function operatorLines(name) {
  const ops = String(name || "").split(" -> ");
  if (ops.length <= MAX_OP_LINES) return ops.map(clip);
  return [...ops.slice(0, MAX_OP_LINES - 1).map(clip), `+ ${ops.length - MAX_OP_LINES + 1} more`];
}

// A plan node's description is its vertex name HTML-escaped as Flink's JsonPlanGenerator writes
// it ("a -&gt; b"); shown as text, it is unescaped first (never parsed as markup).
function planName(description) {
  return String(description || "").replace(/<br\/>/g, "\n").replace(/&#92;/g, "\\")
    .replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function nodeHeight(lines, strategy) {
  return HEADER + 8 + (lines.length + (strategy ? 1 : 0)) * LINE + 8 + 3 * LINE + 10;
}

// Returns {nodes: [{id, x, y, h, lines, vertex, node}], edges: [...], width, height}.
export function layout(plan, vertices) {
  const planNodes = (plan && plan.nodes) || [];
  const byVertex = new Map((vertices || []).map((v) => [v.id, v]));
  const nodes = planNodes.length ? planNodes
    : (vertices || []).map((v) => ({ id: v.id, description: v.name, inputs: [] }));
  const layers = orderLayers(nodes, depthOf(nodes));
  const placed = new Map();
  const heights = layers.map((layer) => layer.reduce((acc, n) => {
    const vertex = byVertex.get(n.id);
    const name = vertex ? vertex.name : planName(n.description);
    return acc + nodeHeight(operatorLines(name), n.operator_strategy) + GAP_Y;
  }, -GAP_Y));
  const tallest = Math.max(0, ...heights);
  layers.forEach((layer, d) => {
    let y = PAD + (tallest - heights[d]) / 2;
    for (const n of layer) {
      const vertex = byVertex.get(n.id)
        || { id: n.id, name: planName(n.description), status: "CREATED" };
      const lines = operatorLines(vertex.name || planName(n.description));
      // what the AdaptiveBatchScheduler decided for it at run time (adaptive joins), if anything
      const strategy = n.operator_strategy || "";
      const height = nodeHeight(lines, strategy);
      placed.set(n.id, { id: n.id, x: PAD + d * (W + GAP_X), y, h: height, lines, strategy,
        vertex, node: n });
      y += height + GAP_Y;
    }
  });
  const edges = [];
  for (const target of placed.values()) {
    const inputs = (target.node.inputs || []).filter((i) => placed.has(i.id));
    inputs.forEach((input, k) => {
      const source = placed.get(input.id);
      const ty = target.y + (target.h * (k + 1)) / (inputs.length + 1);
      edges.push({ source, target, x1: source.x + W, y1: source.y + source.h / 2, x2: target.x,
        y2: ty, label: input.ship_strategy || "", exchange: input.exchange || "" });
    });
  }
  return {
    nodes: [...placed.values()],
    edges,
    width: PAD * 2 + layers.length * W + Math.max(0, layers.length - 1) * GAP_X,
    height: PAD * 2 + tallest,
  };
}

function edgeSvg(e) {
  const mx = (e.x1 + e.x2) / 2;
  const path = `M${e.x1},${e.y1} C${mx},${e.y1} ${mx},${e.y2} ${e.x2},${e.y2}`;
  const label = e.label + (e.exchange ? ` · ${e.exchange}` : "");
  const ly = (e.y1 + e.y2) / 2;
  return s("g", { class: "dag-edge", "data-ship-strategy": e.label },
    s("path", { d: path, "marker-end": "url(#dag-arrow)" }),
    label ? s("rect", { class: "dag-edge-label-bg", x: mx - label.length * 3.4 - 6, y: ly - 10,
      width: label.length * 6.8 + 12, height: 18, rx: 9 }) : null,
    label ? s("text", { x: mx, y: ly + 3, "text-anchor": "middle", class: "dag-edge-label" },
      label) : null);
}

// The live line of a running streaming vertex: back pressure level and share, busy share and
// output records per second.
function liveLine(n, live, y) {
  const pct = (x) => `${Math.round((x || 0) * 100)}%`;
  const rate = live.rate == null ? "" : ` · ${count(Math.round(live.rate))} rec/s`;
  const level = (live.level || "ok").toUpperCase();
  return s("text", { class: `dag-stat dag-bp dag-bp-${live.level || "ok"}`, x: n.x + 10, y,
    "data-backpressure": live.level || "" },
  `Back pressure: ${level} ${pct(live.ratio)} · busy ${pct(live.busy)}${rate}`);
}

function nodeSvg(n, selected, onSelect, live) {
  const v = n.vertex;
  const m = v.metrics || {};
  const { done, total } = progress(v.tasks);
  const state = v.status || "CREATED";
  const textY = (i) => n.y + HEADER + 8 + 12 + i * LINE;
  const opLines = n.lines.length + (n.strategy ? 1 : 0);
  const statsY = n.y + HEADER + 8 + opLines * LINE + 8 + 12;
  const barY = statsY + 2 * LINE + 2;
  const pct = total ? done / total : 0;
  const g = s("g", {
    class: `dag-node state-${stateClass(state)}${selected ? " selected" : ""}`,
    "data-vertex-id": v.id, "data-state": state, tabindex: 0, role: "button",
    "aria-label": `${v.name} ${state}`,
    onclick: () => onSelect(v.id),
    onkeydown: (ev) => { if (ev.key === "Enter") onSelect(v.id); },
  },
  s("title", null, `${v.name}\n${state} · parallelism ${parallelismText(v.parallelism)}`
    + (n.strategy ? `\n${n.strategy}` : "")),
  s("rect", { class: "dag-box", x: n.x, y: n.y, width: W, height: n.h, rx: 6 }),
  s("rect", { class: "dag-header", x: n.x, y: n.y, width: W, height: HEADER, rx: 6 }),
  s("rect", { class: "dag-header", x: n.x, y: n.y + HEADER - 6, width: W, height: 6 }),
  s("text", { class: "dag-state", x: n.x + 10, y: n.y + 16 }, state),
  s("text", { class: "dag-par", x: n.x + W - 10, y: n.y + 16, "text-anchor": "end" },
    `Parallelism: ${parallelismText(v.parallelism)}`),
  n.lines.map((line, i) => s("text", { class: "dag-op", x: n.x + 10, y: textY(i) }, line)),
  n.strategy ? s("text", { class: "dag-strategy", x: n.x + 10, y: textY(n.lines.length),
    "data-operator-strategy": n.strategy }, clip(n.strategy)) : null,
  s("text", { class: "dag-stat", x: n.x + 10, y: statsY },
    `In: ${count(m["read-records"])} rec · ${bytes(m["read-bytes"])}`),
  s("text", { class: "dag-stat", x: n.x + 10, y: statsY + LINE },
    `Out: ${count(m["write-records"])} rec · ${bytes(m["write-bytes"])}`),
  live ? liveLine(n, live, barY + 6) : [
    s("rect", { class: "dag-progress-track", x: n.x + 10, y: barY, width: W - 70, height: 6,
      rx: 3 }),
    s("rect", { class: "dag-progress-fill", x: n.x + 10, y: barY, width: (W - 70) * pct,
      height: 6, rx: 3 }),
    s("text", { class: "dag-progress-label", x: n.x + W - 10, y: barY + 6, "text-anchor": "end" },
      `${done}/${total}`)]);
  return g;
}

// The SVG element; onSelect(vertexId) is called when a node is clicked; live (optional):
// vertex id -> {level, ratio, busy, rate} of a running streaming job.
export function dagSvg(plan, vertices, selectedId, onSelect, live = {}) {
  const g = layout(plan, vertices);
  // shrinks to the card's width (max-width: 100%), but not below MIN_SCALE: then it scrolls
  return s("svg", {
    class: "dag", width: g.width, height: g.height, viewBox: `0 0 ${g.width} ${g.height}`,
    role: "img", "aria-label": "Job graph",
    style: { minWidth: `${Math.round(g.width * MIN_SCALE)}px` },
  },
  s("defs", null, s("marker", { id: "dag-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  s("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrow" }))),
  g.edges.map(edgeSvg),
  g.nodes.map((n) => nodeSvg(n, n.id === selectedId, onSelect, live[n.id])));
}
