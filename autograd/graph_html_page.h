// graph_html_page.h — the HTML page to_html fills in (graph_html.cpp): a header with the step
// buttons, an SVG drawn from the JSON blob, and a side panel saying what the current backward step
// did. Self-contained: no fonts, scripts or styles fetched from the network.
//
// The JSON blob (written by graph_html.cpp):
//   nodes[i] = {kind: "op"|"leaf"|"const", title, sub, value: [lines], x, y, w, h}   (laid out in C++)
//   edges[j] = {from, to, slot, slots, shape}   (from = the input node, to = the op that consumes it)
//   steps[k] = {entry, ran, received: [lines], adds: [{edge, lines, rule}], totals: [{node, lines}]}
//              (rule: why the entry adds that, "grad × w2 = 0.1807 × 0.4 = 0.07228", graph_rule.h)
//   values_kept, grads_kept: whether the graph was recorded / run under RetainValuesGuard
// A node's gradient at step k is its last `totals` entry among steps 0..k.
// Layout on the page: the drawing is scaled down (to 60 % at most) to fit its box, so a graph of the
// tool's size is seen whole at 1400×1000; each red label goes to the first place near its edge that
// covers no node and no other label. The body's data-overlaps (labels that still cover something) and
// data-clipped (titles of nodes outside the visible box) let tests/html_stepper_check.py check that.
#pragma once

namespace tapegrad::detail {

inline constexpr const char* kGraphHtmlPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
  header { display: flex; align-items: center; gap: 12px; padding: 8px 16px; border-bottom: 1px solid #ccc;
           background: #f7f7f7; }
  header h1 { font-size: 16px; margin: 0 12px 0 0; }
  header button { font-size: 14px; padding: 3px 12px; }
  #step-title { font-size: 15px; margin: 0; font-weight: 600; }
  main { display: flex; height: calc(100vh - 50px); }
  #graph-box { flex: 1; overflow: auto; }
  #panel { width: 420px; overflow: auto; border-left: 1px solid #ccc; padding: 8px 16px; }
  #panel pre { margin: 2px 0 8px 12px; font: 12px "DejaVu Sans Mono", Menlo, Consolas, monospace; }
  #panel .rule { margin: 0 0 8px 12px; font: 12px "DejaVu Sans Mono", Menlo, Consolas, monospace; color: #555; }
  #notice { background: #fff3cd; border: 1px solid #e0c36b; padding: 6px 8px; margin: 8px 0; }
  #steps li { cursor: pointer; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
  #steps li.current { font-weight: bold; background: #ffe08a; }
  #steps li.done { color: #888; }
  .legend span { display: inline-block; padding: 0 6px; margin-right: 4px; border: 1px solid #999; font-size: 12px; }
  svg text { font: 12px "DejaVu Sans Mono", Menlo, Consolas, monospace; white-space: pre; }
  svg .title { font-weight: bold; }
  svg .sub { fill: #555; }
  svg .grad { fill: #a0522d; }
  svg .grad.changed { fill: #d00000; font-weight: bold; }
  .node rect { stroke: #6c8ebf; stroke-width: 1; }
  .node.op rect { fill: #dae8fc; }
  .node.leaf rect { fill: #d5e8d4; stroke: #82b366; }
  .node.const rect { fill: #eeeeee; stroke: #999; }
  .node.done rect { opacity: 0.55; }
  .node.current rect { stroke: #d00000; stroke-width: 3; fill: #ffe08a; opacity: 1; }
  .edge { fill: none; stroke: #888; stroke-width: 1.2; }
  .edge.active { stroke: #d00000; stroke-width: 2.5; }
  .edge-label rect { fill: #fff; stroke: #d00000; opacity: 0.95; }
  .edge-label text { fill: #d00000; }
</style>
</head>
<body data-step="0">
<header>
  <h1>@TITLE@</h1>
  <button id="prev" title="previous step (←)">◀ prev</button>
  <button id="next" title="next step (→)">next ▶</button>
  <p id="step-title"></p>
</header>
<main>
  <div id="graph-box"><svg id="graph" xmlns="http://www.w3.org/2000/svg"></svg></div>
  <div id="panel">
    <div id="notice" hidden></div>
    <div id="step-detail"></div>
    <p class="legend"><span style="background:#d5e8d4">parameter (leaf)</span><span style="background:#dae8fc">tape
      entry</span><span style="background:#eeeeee">constant</span><span style="background:#ffe08a">running now</span></p>
    <p>Backward replays the tape from the newest entry to the oldest. Each entry receives dL/d(its output) and
      adds its share to each input's gradient (red: what this step added); "why" gives the entry's local rule,
      with grad = dL/d(its output). Keys: → next, ← previous.</p>
    <ol id="steps" start="0"></ol>
  </div>
</main>
<script type="application/json" id="tape-data">@DATA@</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("tape-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const M = data.metrics, nodes = data.nodes, edges = data.edges, steps = data.steps;
const svg = document.getElementById("graph");

function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, text, parent, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  if (parent) parent.appendChild(e);
  return e;
}
// One <text> per block of lines; each line a <tspan> (textContent escapes everything).
function textBlock(parent, x, y, lines, cls) {
  const t = el("text", {x: x, y: y, class: cls}, parent);
  lines.forEach((line, i) => {
    const s = el("tspan", {x: x, dy: i === 0 ? 0 : M.line_height}, t);
    s.textContent = line;
  });
  return t;
}

// ---- draw the graph once ----
let width = 0, height = 0;
for (const n of nodes) { width = Math.max(width, n.x + n.w); height = Math.max(height, n.y + n.h); }
svg.setAttribute("viewBox", `0 0 ${width + 24} ${height + 24}`);
const graphBox = document.getElementById("graph-box");
// Scale the drawing down to fit its box (not below 60 %: then it scrolls), so nothing is cut off.
function fit() {
  const s = Math.max(0.6, Math.min(1, (graphBox.clientWidth - 4) / (width + 24),
                                   (graphBox.clientHeight - 4) / (height + 24)));
  svg.setAttribute("width", (width + 24) * s);
  svg.setAttribute("height", (height + 24) * s);
}
fit();
window.addEventListener("resize", fit);
const defs = el("defs", {}, svg);
for (const [id, color] of [["arrow", "#888"], ["arrow-grad", "#d00000"]]) {
  const m = el("marker", {id: id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
                          orient: "auto-start-reverse"}, defs);
  el("path", {d: "M0,0 L10,5 L0,10 z", fill: color}, m);
}
const edgeLayer = el("g", {}, svg), nodeLayer = el("g", {}, svg), labelLayer = el("g", {}, svg);
const edgeEls = edges.map((e, j) => {
  const a = nodes[e.from], b = nodes[e.to];
  const sx = a.x + a.w / 2, sy = a.y + a.h, tx = b.x + b.w * (e.slot + 1) / (e.slots + 1), ty = b.y;
  const dy = Math.max(24, (ty - sy) / 2);
  e.mid = [(sx + tx) / 2, (sy + ty) / 2];
  return el("path", {id: "edge-" + j, class: "edge", "marker-end": "url(#arrow)",
                     d: `M${sx},${sy} C${sx},${sy + dy} ${tx},${ty - dy} ${tx},${ty}`}, edgeLayer);
});
const nodeEls = nodes.map((n, i) => {
  const g = el("g", {id: "node-" + i, class: "node " + n.kind, "data-title": n.title}, nodeLayer);
  el("rect", {x: n.x, y: n.y, width: n.w, height: n.h, rx: 6}, g);
  const x = n.x + M.pad, top = n.y + M.pad + 11;
  const head = el("text", {x: x, y: top}, g);  // "#5 tanh  [4] float32"
  el("tspan", {class: "title"}, head).textContent = n.title;
  el("tspan", {class: "sub"}, head).textContent = "  " + n.sub;
  if (n.value.length) textBlock(g, x, top + M.line_height, n.value, "value");
  const grad = el("text", {id: "grad-" + i, class: "grad", x: x, y: top + (1 + n.value.length) * M.line_height}, g);
  return {g: g, grad: grad};
});

// ---- the steps ----
const stepOf = {};  // op node index → the step that ran it
steps.forEach((s, k) => { if (k > 0) stepOf[s.entry] = k; });
const list = document.getElementById("steps");
steps.forEach((s, k) => {
  const li = html("li", k === 0 ? "before backward (dL/dL = 1)" : nodes[s.entry].title + (s.ran ? "" : " (skipped)"), list);
  li.addEventListener("click", () => show(k));
});
if (!data.values_kept || !data.grads_kept) {
  const notice = document.getElementById("notice");
  notice.hidden = false;
  notice.textContent = (data.values_kept ? "Gradients were not kept" : "Values and gradients were not kept") +
    ": record the graph and run backward under RetainValuesGuard (tapegrad dot --html does). " +
    "The steps still show the order in which backward runs the entries.";
}

function setLines(textEl, lines, x) {
  while (textEl.firstChild) textEl.removeChild(textEl.firstChild);
  lines.forEach((line, i) => {
    const s = el("tspan", {x: x, dy: i === 0 ? 0 : M.line_height}, textEl);
    s.textContent = line;
  });
}

let current = 0;
function show(k) {
  k = Math.max(0, Math.min(steps.length - 1, k | 0));
  current = k;
  document.body.setAttribute("data-step", k);
  const step = steps[k];
  // every node's gradient so far: its last total among steps 0..k
  const grads = {}, changed = {};
  for (let q = 0; q <= k; ++q) for (const t of steps[q].totals) grads[t.node] = t.lines;
  for (const t of step.totals) changed[t.node] = true;
  nodes.forEach((n, i) => {
    const g = nodeEls[i].g;
    g.classList.toggle("current", i === step.entry);
    g.classList.toggle("done", stepOf[i] !== undefined && stepOf[i] < k);
    const lines = grads[i] || (data.grads_kept && n.kind !== "const" ? ["grad (nothing yet)"] : []);
    setLines(nodeEls[i].grad, lines, n.x + M.pad);
    nodeEls[i].grad.classList.toggle("changed", !!changed[i]);
  });
  edgeEls.forEach(p => { p.classList.remove("active"); p.setAttribute("marker-end", "url(#arrow)"); p.removeAttribute("marker-start"); });
  while (labelLayer.firstChild) labelLayer.removeChild(labelLayer.firstChild);
  // Obstacles: every node's box and the labels placed so far (with a 4 px margin).
  const boxes = nodes.map(n => ({x: n.x, y: n.y, width: n.w, height: n.h}));
  const overlap = (r, q) => r.x < q.x + q.width + 4 && q.x < r.x + r.width + 4 && r.y < q.y + q.height + 4 &&
                            q.y < r.y + r.height + 4;
  const placed = [];
  let overlaps = 0;
  for (const a of step.adds) {
    const p = edgeEls[a.edge];
    p.classList.add("active");
    p.removeAttribute("marker-end");
    p.setAttribute("marker-start", "url(#arrow-grad)");  // the gradient flows up, against the edge
    const [mx, my] = edges[a.edge].mid;
    const g = el("g", {class: "edge-label"}, labelLayer);
    const box = el("rect", {rx: 3}, g);
    // named after the input it goes to ("b += [-1.002]"): two labels near one entry stay told apart
    const added = a.lines.join(" ").replace(/\s+/g, " ").replace(/^\+ /, "+= ");
    const t = textBlock(g, mx + 6, my + 4, [nodes[edges[a.edge].from].title + " " + added], "");
    const w = t.getBBox().width;
    const moveTo = (x, y) => {
      t.setAttribute("x", x);
      t.firstChild.setAttribute("x", x);
      t.setAttribute("y", y);
      return t.getBBox();
    };
    const hits = r => boxes.some(q => overlap(r, q)) || placed.some(q => overlap(r, q));
    // Beside a point of the edge (near the input it adds to first, where edges into one entry part),
    // right of it, left of it or centred on it; failing that, beside the middle moved up or down a line
    // at a time: the first place inside the drawing that covers nothing.
    const spots = [];
    const len = p.getTotalLength();
    for (const f of [0.25, 0.4, 0.15, 0.55, 0.7, 0.85]) {
      const q = p.getPointAtLength(f * len);
      for (const x of [q.x + 6, q.x - 6 - w, q.x - w / 2]) spots.push([x, q.y + 4]);
    }
    for (let k = 1; k < 24; ++k) {
      const dy = (k % 2 ? -1 : 1) * Math.ceil(k / 2) * (M.line_height + 4);
      for (const x of [mx + 6, mx - 6 - w]) spots.push([x, my + 4 + dy]);
    }
    let bb = null;
    for (const [x, y] of spots) {
      if (x < 0 || x + w > width + 16) continue;
      const r = moveTo(x, y);
      if (!hits(r)) { bb = r; break; }
    }
    if (!bb) { bb = moveTo(Math.min(mx + 6, width + 16 - w), my + 4); ++overlaps; }
    placed.push(bb);
    box.setAttribute("x", bb.x - 3); box.setAttribute("y", bb.y - 2);
    box.setAttribute("width", bb.width + 6); box.setAttribute("height", bb.height + 4);
  }
  document.body.setAttribute("data-overlaps", overlaps);
  if (nodeEls[step.entry]) nodeEls[step.entry].g.scrollIntoView({block: "nearest", inline: "nearest"});
  // Which nodes the box does not show whole (for the page's test; normally none).
  const view = graphBox.getBoundingClientRect();
  const clipped = nodeEls.filter(ne => {
    const r = ne.g.getBoundingClientRect();
    return r.top < view.top - 1 || r.bottom > view.bottom + 1 || r.left < view.left - 1 || r.right > view.right + 1;
  }).map(ne => ne.g.getAttribute("data-title"));
  document.body.setAttribute("data-clipped", clipped.join(", "));
  // the header and the side panel
  const entry = nodes[step.entry];
  document.getElementById("step-title").textContent = k === 0
    ? `Step 0 of ${steps.length - 1}: before backward`
    : `Step ${k} of ${steps.length - 1}: ${entry ? entry.title : ""} runs its backward`;
  const detail = document.getElementById("step-detail");
  detail.textContent = "";
  if (k === 0) {
    html("p", entry ? `Backward starts at the root ${entry.title}: dL/dL = 1.` : "The root is a leaf: there is no tape.", detail);
    if (step.totals.length) html("pre", step.totals[0].lines.join("\n"), detail);
    html("p", "Press → or “next” to run the newest tape entry.", detail);
  } else if (!step.ran) {
    html("p", `No gradient reached ${entry.title}: backward skips it.`, detail);
  } else {
    html("p", `${entry.title} received dL/d(its output):`, detail);
    html("pre", step.received.join("\n"), detail);
    if (step.adds.length) html("p", "and added to its inputs:", detail);
    for (const a of step.adds) {
      const e = edges[a.edge];
      html("p", `input ${e.slot}: ${nodes[e.from].title}` + (e.shape === "[]" ? "" : ` (${e.shape})`), detail);
      html("pre", a.lines.join("\n"), detail);
      if (a.rule) html("p", "why: " + a.rule, detail, "rule");
    }
    const none = edges.filter((e, j) => e.to === step.entry && !step.adds.some(a => a.edge === j));
    for (const e of none) html("p", `input ${e.slot}: ${nodes[e.from].title}: no gradient (it needs none)`, detail);
  }
  Array.from(list.children).forEach((li, q) => { li.className = q === k ? "current" : q < k ? "done" : ""; });
  document.getElementById("prev").disabled = k === 0;
  document.getElementById("next").disabled = k === steps.length - 1;
  if (location.hash !== "#step=" + k) history.replaceState(null, "", "#step=" + k);
}
function fromHash() {
  const m = /step=(\d+)/.exec(location.hash);
  show(m ? parseInt(m[1], 10) : 0);
}
document.getElementById("prev").addEventListener("click", () => show(current - 1));
document.getElementById("next").addEventListener("click", () => show(current + 1));
document.addEventListener("keydown", ev => {
  if (ev.key === "ArrowRight" || ev.key === "ArrowDown") { show(current + 1); ev.preventDefault(); }
  else if (ev.key === "ArrowLeft" || ev.key === "ArrowUp") { show(current - 1); ev.preventDefault(); }
  else if (ev.key === "Home") show(0);
  else if (ev.key === "End") show(steps.length - 1);
});
window.addEventListener("hashchange", fromHash);
fromHash();
</script>
</body>
</html>
)html";

}  // namespace tapegrad::detail
