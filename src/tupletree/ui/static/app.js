// tupletree's page: reads the REST API every second and draws the topology, its
// figures, a chart of the last minutes, errors and workers. No framework, no build
// step; every text from the cluster goes in through textContent, never as HTML.
"use strict";

const API = "/api/v1";
const SVG = "http://www.w3.org/2000/svg";
const REFRESH_MS = 1000;
let current = null;            // the topology shown
const expanded = new Set();    // components whose tasks are shown
const taskRows = {};           // component -> last component answer
let busy = false;

// -- small helpers ---------------------------------------------------------------

function el(ns, tag, attrs, children) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = v;
    else if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v);
  }
  for (const c of children || []) if (c) node.appendChild(c);
  return node;
}
const h = (tag, attrs, ...children) => el(null, tag, attrs, children);
const s = (tag, attrs, ...children) => el(SVG, tag, attrs, children);
const $ = (id) => document.getElementById(id);

function count(n) {
  if (n === null || n === undefined) return "–";
  return Math.round(n).toLocaleString("en-US");
}
function rate(n) {
  if (n === null || n === undefined) return "–";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return n >= 10 ? n.toFixed(0) : n.toFixed(1);
}
function ms(n) {
  if (n === null || n === undefined) return "–";
  if (n >= 100) return n.toFixed(0);
  if (n >= 1) return n.toFixed(2);
  return n.toFixed(3);
}
function bytes(n) {
  if (n === null || n === undefined) return "–";
  return (n / 1048576).toFixed(0) + " MiB";
}
function pct(x) { return Math.round(100 * x) + "%"; }

// Load of a component in 0..1: a bolt's capacity or how full its queue is, a spout's
// pending trees over what max spout pending allows (the spout is held back at 1).
function load(c, maxPending) {
  if (c.spoutId !== undefined) {
    if (!maxPending) return 0;
    return Math.min(1, (c.pending || 0) / (maxPending * c.tasks));
  }
  const q = c.queueCapacity ? (c.queued || 0) / (c.queueCapacity) : 0;
  return Math.min(1, Math.max(c.capacity || 0, q));
}
function loadColour(x) {
  return x >= 0.8 ? "var(--bad)" : x >= 0.5 ? "var(--warn)" : "var(--ok)";
}
function loadFill(x) {
  return x >= 0.8 ? "#fdecec" : x >= 0.5 ? "#fdf6e3" : "#eaf6ef";
}

// The service's token, when it has one: opened as /#token=..., kept for this tab
// only, and sent as a header (never in a URL, so it reaches no log or history).
const TOKEN = (() => {
  const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromUrl) {
    sessionStorage.setItem("tupletree-token", fromUrl);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("tupletree-token");
})();

async function getJSON(path, options) {
  const request = Object.assign({}, options);
  if (TOKEN) request.headers = Object.assign({}, request.headers, { Authorization: "Bearer " + TOKEN });
  const response = await fetch(path, request);
  const body = await response.json();
  if (!response.ok) throw new Error(body.errorMessage || response.statusText);
  return body;
}

function say(text, kind) {
  const box = $("message");
  box.textContent = text;
  box.className = "message " + (kind || "");
  box.hidden = !text;
}

// -- the topology graph ------------------------------------------------------------

function drawGraph(topo) {
  const svg = $("graph");
  svg.replaceChildren();
  const byId = {};
  for (const c of topo.spouts) byId[c.spoutId] = c;
  for (const c of topo.bolts) byId[c.boltId] = c;
  const maxPending = topo.configuration["topology.max.spout.pending"];
  const W = 190, H = 58, GX = 110, GY = 26, PAD = 14;
  const layers = {};
  for (const n of topo.graph.nodes) (layers[n.layer] = layers[n.layer] || []).push(n);
  const depth = Math.max(...Object.values(layers).map((l) => l.length));
  const pos = {};
  const height = depth * H + (depth - 1) * GY + 2 * PAD + 24;
  for (const [layer, nodes] of Object.entries(layers)) {
    const total = nodes.length * H + (nodes.length - 1) * GY;
    nodes.forEach((n, i) => {
      pos[n.id] = { x: PAD + layer * (W + GX), y: (height - total) / 2 + i * (H + GY) };
    });
  }
  const width = PAD * 2 + (Object.keys(layers).length) * (W + GX) - GX;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
  const scale = Math.min(1.25, (svg.clientWidth || width) / width);
  svg.style.height = `${Math.max(200, Math.round(height * scale))}px`;
  svg.appendChild(s("defs", {}, s("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9aa5bb" }))));

  for (const e of topo.graph.edges) {
    const a = pos[e.source], b = pos[e.target];
    if (!a || !b) continue;
    let d, lx, ly;
    if (b.x > a.x) {
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}`;
      lx = mx; ly = (y1 + y2) / 2;
    } else {  // back to an earlier layer (a loop): around the bottom
      const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y + H;
      const low = Math.max(y1, y2) + 22;
      d = `M${x1},${y1} C${x1},${low} ${x2},${low} ${x2},${y2 + 2}`;
      lx = (x1 + x2) / 2; ly = low - 4;
    }
    const stream = e.stream === "default" ? "" : e.stream + ": ";
    const label = `${stream}${e.grouping} · ${rate(e.rate)}/s${e.exact ? "" : "≈"}`;
    const g = s("g", { class: "edge", "data-source": e.source, "data-target": e.target });
    g.appendChild(s("path", { d, "marker-end": "url(#arrow)" }));
    const text = s("text", { x: lx, y: ly - 5, "text-anchor": "middle", text: label });
    const bgw = label.length * 6.1 + 8;
    g.appendChild(s("rect", { class: "bg", x: lx - bgw / 2, y: ly - 17, width: bgw, height: 16, rx: 3 }));
    g.appendChild(text);
    svg.appendChild(g);
  }
  for (const n of topo.graph.nodes) {
    const p = pos[n.id], c = byId[n.id] || {};
    const x = load(c, maxPending);
    const spout = n.type === "spout";
    const g = s("g", { class: "node", "data-id": n.id, transform: `translate(${p.x},${p.y})` });
    g.appendChild(s("rect", {
      width: W, height: H, rx: spout ? 26 : 8, fill: loadFill(x), stroke: loadColour(x),
    }));
    g.appendChild(s("text", { class: "nid", x: 14, y: 22, text: n.id }));
    const detail = spout
      ? `spout ×${n.parallelism} · ${rate(c.rates && c.rates.emitted)}/s · pending ${count(c.pending)}`
      : `×${n.parallelism} · ${rate(c.rates && c.rates.executed)}/s · cap ${pct(c.capacity || 0)}`;
    g.appendChild(s("text", { class: "sub", x: 14, y: 41, text: detail }));
    g.appendChild(s("title", { text: `${n.id}: load ${pct(x)}` }));
    svg.appendChild(g);
  }
}

// -- the chart -----------------------------------------------------------------------

function tick(v) {
  return String(Number(v.toPrecision(3)));
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 4, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function drawChart(history) {
  const svg = $("chart");
  svg.replaceChildren();
  const W = Math.max(320, svg.clientWidth || 640), H = 260, L = 52, R = 52, T = 12, B = 28;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const points = history.timeline;
  const now = points.length ? points[points.length - 1].t : 0;
  const span = Math.max(60, points.length ? now - points[0].t : 60);
  const yMax = niceMax(Math.max(0, ...points.map((p) => Math.max(p.acked, p.failed))));
  const lats = points.map((p) => p.completeLatencyMs).filter((v) => v !== null);
  const lMax = niceMax(Math.max(0, ...lats));
  const X = (t) => L + (W - L - R) * (1 - (now - t) / span);
  const Y = (v) => T + (H - T - B) * (1 - v / yMax);
  const YL = (v) => T + (H - T - B) * (1 - v / lMax);
  const axis = s("g", { class: "axis" });
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * i / 4;
    axis.appendChild(s("line", { class: "grid-line", x1: L, x2: W - R, y1: y, y2: y }));
    const v = yMax * (1 - i / 4);
    axis.appendChild(s("text", { x: L - 6, y: y + 3, "text-anchor": "end", text: v >= 1000 ? rate(v) : tick(v) }));
    axis.appendChild(s("text", { x: W - R + 6, y: y + 3, text: tick(lMax * (1 - i / 4)) }));
  }
  for (let i = 0; i <= 4; i++) {
    const ago = span * i / 4, x = X(now - ago);
    const label = ago === 0 ? "now" : ago >= 120 ? `-${Math.round(ago / 60)}m` : `-${Math.round(ago)}s`;
    axis.appendChild(s("text", { x, y: H - 8, "text-anchor": "middle", text: label }));
  }
  svg.appendChild(axis);
  const line = (key, scale, attrs) => {
    let d = "", pen = "M";
    for (const p of points) {
      const v = p[key];
      if (v === null || v === undefined) { pen = "M"; continue; }
      d += `${pen}${X(p.t).toFixed(1)},${scale(v).toFixed(1)} `;
      pen = "L";
    }
    if (d) svg.appendChild(s("path", Object.assign({ d, fill: "none" }, attrs)));
  };
  if (points.length) {
    const area = `M${X(points[0].t)},${Y(0)} ` +
      points.map((p) => `L${X(p.t).toFixed(1)},${Y(p.acked).toFixed(1)}`).join(" ") +
      ` L${X(now)},${Y(0)} z`;
    svg.appendChild(s("path", { d: area, fill: "var(--ok)", opacity: 0.12 }));
  }
  line("acked", Y, { stroke: "var(--ok)", "stroke-width": 2, id: "acked-line" });
  line("failed", Y, { stroke: "var(--bad)", "stroke-width": 2 });
  line("completeLatencyMs", YL, { stroke: "var(--accent)", "stroke-width": 1.5, "stroke-dasharray": "4 3" });
  if (!points.length) {
    svg.appendChild(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "none", text: "collecting…" }));
  }
}

// -- tables ------------------------------------------------------------------------

function capacityCell(x) {
  const bar = h("span", { class: "bar" }, h("span", { style: `width:${Math.round(100 * x)}%;background:${loadColour(x)}` }));
  return h("td", { class: "capacity" }, bar, document.createTextNode(pct(x)));
}

function componentCells(c, maxPending, isTask) {
  const spout = c.spoutId !== undefined;
  const r = c.rates || {};
  const cells = [
    h("td", { class: "num emitted", text: count(c.emitted) }),
    h("td", { class: "num executed", text: spout ? "" : count(c.executed) }),
    h("td", { class: "num acked", text: count(c.acked) }),
    h("td", { class: "num failed", text: count(c.failed) }),
    h("td", { class: "num", text: count(c.timedOut) }),
    h("td", { class: "num", text: rate(r.emitted) }),
    h("td", { class: "num", text: spout ? "" : rate(r.executed) }),
    spout ? h("td", {}) : capacityCell(c.capacity || 0),
    h("td", { class: "num", text: spout ? "" : ms(c.executeLatency) }),
    h("td", { class: "num", text: spout ? ms(c.completeLatency) : "" }),
    h("td", { class: "num", text: spout ? count(c.pending) : "" }),
    h("td", { text: c.queueCapacity ? `${count(c.queued)} / ${count(c.queueCapacity)}` : count(c.queued) }),
  ];
  if (!isTask) cells.push(h("td", { class: "err", title: c.lastError || "", text: c.lastError || "" }));
  else cells.push(h("td", {}));
  return cells;
}

function drawComponents(topo) {
  const body = $("components").tBodies[0];
  body.replaceChildren();
  const maxPending = topo.configuration["topology.max.spout.pending"];
  const rows = [...topo.spouts, ...topo.bolts];
  for (const c of rows) {
    const id = c.spoutId !== undefined ? c.spoutId : c.boltId;
    const kind = c.spoutId !== undefined ? "spout" : "bolt";
    const open = expanded.has(id);
    const name = h("td", {}, document.createTextNode((open ? "▾ " : "▸ ") + id), h("span", { class: `kind ${kind}`, text: kind }));
    const row = h("tr", { class: "component", "data-id": id, onclick: () => toggle(id) },
      name, h("td", { text: String(c.tasks) }), ...componentCells(c, maxPending, false));
    body.appendChild(row);
    const detail = taskRows[id];
    if (open && detail) {
      for (const t of detail.executorStats) {
        if (kind === "spout") t.spoutId = id;
        body.appendChild(h("tr", { class: "task", "data-task": String(t.taskId) },
          h("td", { text: `task ${t.taskId}` }), h("td", {}), ...componentCells(t, maxPending, true)));
      }
    }
  }
  if (topo.ackers) {
    const a = topo.ackers;
    body.appendChild(h("tr", { class: "acker" },
      h("td", {}, document.createTextNode("__acker"), h("span", { class: "kind", text: "acker" })),
      h("td", { text: String(a.tasks) }), h("td", {}), h("td", { class: "num", text: count(a.executed) }),
      h("td", {}), h("td", {}), h("td", { class: "num", text: count(a.timedOut) }), h("td", {}), h("td", {}),
      capacityCell(a.capacity || 0), h("td", { class: "num", text: ms(a.executeLatency) }), h("td", {}),
      h("td", { class: "num", title: "trees being tracked", text: count(a.pendingTrees) }),
      h("td", { text: `${count(a.queued)} / ${count(a.queueCapacity)}` }), h("td", {})));
  }
}

async function toggle(id) {
  if (expanded.has(id)) expanded.delete(id); else expanded.add(id);
  await refresh();
}

// Which tracebacks are open survives the redraw every second: the newest error's is
// open unless the user closed it, any other only if the user opened it.
const opened = new Set();
const closed = new Set();

function ago(secs) {
  if (secs < 60) return `${secs} s ago`;
  if (secs < 3600) return `${Math.floor(secs / 60)} min ago`;
  return `${Math.floor(secs / 3600)} h ago`;
}

// Each error is a record (component, task, where, error, worker, time...): drawn from
// its fields, never parsed from text.
function drawErrors(topo) {
  const box = $("errors");
  box.replaceChildren();
  $("error-count").textContent = topo.errors.length ? `${topo.errors.length} shown, newest first` : "";
  if (!topo.errors.length) {
    box.appendChild(h("div", { class: "none", text: "no errors reported" }));
    return;
  }
  [...topo.errors].reverse().forEach((e, i) => {
    const worker = e.worker === null ? "" : `worker ${e.worker}: `;
    const where = `${worker}${e.component}[task ${e.task}] ${e.where}: `;
    const key = `${e.errorTime} ${where}${e.error}`;
    const open = opened.has(key) || (i === 0 && !closed.has(key));
    const summary = h("summary", {}, h("span", { class: "muted small", text: ago(e.errorLapsedSecs) + " " }),
      document.createTextNode(where), h("b", { text: e.error }));
    const details = h("details", { open: open ? "" : null }, summary,
      h("pre", { text: e.traceback || "(no traceback)" }));
    summary.addEventListener("click", () => {  // runs before the details toggles
      if (details.open) { opened.delete(key); closed.add(key); }
      else { closed.delete(key); opened.add(key); }
    });
    box.appendChild(details);
  });
}

// The workers' own errors and their restarts, newest first: kept apart from the tasks'
// errors by the cluster, so a bolt's flood of errors cannot hide a restart.
function drawEvents(topo) {
  const events = topo.workerEvents || [];
  $("events-card").hidden = !events.length;
  const box = $("events");
  box.replaceChildren();
  for (const e of [...events].reverse()) {
    box.appendChild(h("div", { class: `event ${e.kind}` },
      h("span", { class: "muted small", text: ago(e.errorLapsedSecs) + " " }),
      h("b", { text: e.kind === "restart" ? "restart " : "" }),
      document.createTextNode(e.text)));
  }
}

function drawWorkers(topo) {
  const card = $("workers-card");
  card.hidden = !topo.workers;
  if (!topo.workers) return;
  const body = $("workers").tBodies[0];
  body.replaceChildren();
  for (const w of topo.workers) {
    body.appendChild(h("tr", {},
      h("td", { text: String(w.index) }), h("td", { text: w.host }),
      h("td", { class: "num", text: String(w.pid) }), h("td", { class: "num", text: String(w.attempt) }),
      h("td", { class: "num", text: String(w.restarts) }), h("td", { class: "num", text: bytes(w.rss_bytes) }),
      h("td", { class: "num", text: w.report_age_secs === null ? "–" : `${w.report_age_secs.toFixed(1)} s ago` })));
  }
}

function cellText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// Where a tree stalled: "count[task 3] executing 1 tuple for 12.0 s", one per holder.
function holderText(holder) {
  const n = holder.tuples === undefined ? "" : ` ${holder.tuples} tuple${holder.tuples === 1 ? "" : "s"}`;
  let extra = "";
  if (holder.held_secs !== null && holder.held_secs !== undefined) extra = ` for ${holder.held_secs.toFixed(1)} s`;
  if (holder.queue_position !== null && holder.queue_position !== undefined) extra = `, ${holder.queue_position} ahead`;
  return `${holder.component}[task ${holder.task}] ${holder.state}${n}${extra}`;
}

function drawStalls(topo) {
  const card = $("stalls-card");
  const trees = topo.timedOutTrees;
  card.hidden = trees === undefined;
  if (trees === undefined) return;
  const table = $("stalls");
  table.tHead.replaceChildren();
  table.tBodies[0].replaceChildren();
  if (!trees.length) {
    table.tBodies[0].appendChild(h("tr", {}, h("td", { class: "none", text: "no tree has timed out" })));
    return;
  }
  if (trees[0] && trees[0].holders !== undefined) {  // cluster.timed_out's trees
    table.tHead.appendChild(h("tr", {}, ...["spout", "message id", "age", "where it stalled"].map((k) => h("th", { text: k }))));
    for (const t of [...trees].reverse()) {
      const where = t.holders.length
        ? h("td", {}, ...t.holders.map((x) => h("div", { class: "holder", text: holderText(x) })))
        : h("td", { class: "none", text: "no task of its worker held it" });
      table.tBodies[0].appendChild(h("tr", {},
        h("td", { text: `${t.spout_component}[task ${t.spout_task}]` }),
        h("td", { text: cellText(t.msg_id) }),
        h("td", { class: "num", text: `${Number(t.age_secs).toFixed(1)} s` }),
        where));
    }
    return;
  }
  const keys = [];
  for (const t of trees) for (const k of Object.keys(typeof t === "object" && t ? t : { tree: t })) if (!keys.includes(k)) keys.push(k);
  table.tHead.appendChild(h("tr", {}, ...keys.map((k) => h("th", { text: k.replace(/_/g, " ") }))));
  for (const t of [...trees].reverse()) {
    const row = typeof t === "object" && t ? t : { tree: t };
    table.tBodies[0].appendChild(h("tr", {}, ...keys.map((k) => h("td", { text: cellText(row[k]) }))));
  }
}

// Trident: each coordinator's txids and active batches, each committer's last txid,
// and spout tasks stuck on a batch they cannot emit (shown first, in red).
function drawTrident(topo) {
  const t = topo.trident;
  const card = $("trident-card");
  card.hidden = !t;
  if (!t) return;
  const coords = $("trident-coordinators").tBodies[0];
  coords.replaceChildren();
  for (const c of t.coordinators) {
    const active = (c.active || []).map((a) => `${a.txid}:${a.attempt} ${a.phase}`).join(", ") || "none";
    const tried = Object.entries(c.attempts || {}).filter(([, a]) => a > 0).map(([t, a]) => `txid ${t}: attempt ${a}`);
    coords.appendChild(h("tr", {},
      h("td", { text: c.component }), h("td", { text: (c.spouts || []).join(", ") }),
      h("td", { class: "num", text: String(c.currentTxid) }),
      h("td", { class: "num", text: c.lastCommittedTxid === null ? "–" : String(c.lastCommittedTxid) }),
      h("td", { class: "num", text: count(c.replayed) }),
      h("td", { text: tried.length ? `${active} (${tried.join(", ")})` : active })));
  }
  const committers = $("trident-committers").tBodies[0];
  committers.replaceChildren();
  for (const c of t.committers) {
    committers.appendChild(h("tr", {},
      h("td", { text: `${c.component}[task ${c.task}]` }), h("td", { text: c.state }),
      h("td", { class: "num", text: c.lastCommittedTxid === null ? "–" : String(c.lastCommittedTxid) })));
  }
  const stuck = $("trident-stuck");
  stuck.replaceChildren();
  for (const s of t.stuck) {
    const where = s.partition === null || s.partition === undefined ? "" : `, partition ${s.partition}`;
    stuck.appendChild(h("div", { class: "stuck",
      text: `STUCK: spout ${s.spout} in ${s.component}[task ${s.task}] cannot emit txid ${s.txid} (attempt ${s.attempt})${where}: ${s.error}` }));
  }
}

// Windowed bolts (tupletree.windowing): one row each, the card hidden when none.
function drawWindows(topo) {
  const bolts = topo.bolts.filter((b) => b.window);
  const card = $("windows-card");
  card.hidden = !bolts.length;
  if (!bolts.length) return;
  const body = $("windows").tBodies[0];
  body.replaceChildren();
  for (const b of bolts) {
    const w = b.window;
    const sessions = w.sessions === null ? "" : ` (${count(w.sessions)} sessions)`;
    body.appendChild(h("tr", { "data-id": b.boltId },
      h("td", { text: b.boltId }), h("td", { text: (w.window || "") + sessions }),
      h("td", { class: "num", text: w.watermark === null ? "–" : count(w.watermark) }),
      h("td", { class: "num", text: `${count(w.held)} / ${count(w.cap * w.tasks)}` }),
      h("td", { class: "num", text: count(w.lateTuples) }),
      h("td", { class: "num", text: count(w.windows) }),
      h("td", { class: "num", text: count(w.lastWindowSize) }),
      h("td", { class: "num", text: count(w.failedWindows) }),
      h("td", { class: "num", text: count(w.refused) })));
  }
}

function drawTiles(topo, history) {
  const last = history.timeline.length ? history.timeline[history.timeline.length - 1] : null;
  $("t-acked").textContent = last ? rate(last.acked) : "–";
  $("t-failed").textContent = last ? rate(last.failed) : "–";
  // Storm's topology complete latency: the mean over every tree, each spout weighted by
  // its trees (views.py, _complete_latency), not the slowest spout's mean.
  const stats = (topo.topologyStats || [])[0];
  const lat = stats ? stats.completeLatency : null;
  $("t-latency").textContent = lat !== null && lat !== undefined ? ms(lat) + " ms" : "–";
  $("t-pending").textContent = count(topo.spouts.reduce((a, sp) => a + (sp.pending || 0), 0));
  $("t-total").textContent = count(topo.acked);
}

// -- the loop ------------------------------------------------------------------------

function drawNav(topologies) {
  const nav = $("topologies");
  nav.replaceChildren(...topologies.map((t) => h("a", {
    class: t.name === current ? "current" : "", "data-name": t.name, text: t.name,
    onclick: () => { current = t.name; location.hash = encodeURIComponent(t.name); expanded.clear(); refresh(); },
  })));
}

// The topology named by the page's #hash. A malformed one (a stray "%", a link cut in
// the middle of an escape) is taken as it is: decodeURIComponent would throw on every
// refresh and the page would stop updating until the hash changed.
function hashName() {
  const raw = location.hash.slice(1);
  try {
    return decodeURIComponent(raw);
  } catch (err) {
    return raw;
  }
}

async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const summary = await getJSON(`${API}/topology/summary`);
    const names = summary.topologies.map((t) => t.name);
    const wanted = hashName();
    if (!names.includes(current)) {
      current = names.includes(wanted) ? wanted : names[0] || null;
      expanded.clear();  // task views belong to the topology they were opened on
    }
    drawNav(summary.topologies);
    $("empty").hidden = current !== null;
    $("topology").hidden = current === null;
    if (current === null) return;
    const base = `${API}/topology/${encodeURIComponent(current)}`;
    const [topo, history] = await Promise.all([getJSON(base), getJSON(`${base}/history`)]);
    for (const id of [...expanded]) {
      try {
        taskRows[id] = await getJSON(`${base}/component/${encodeURIComponent(id)}`);
      } catch (err) {
        expanded.delete(id);  // gone (the topology changed): close its task view
      }
    }
    $("name").textContent = topo.name;
    $("status").textContent = topo.status;
    $("status").className = `badge ${topo.status}`;
    $("uptime").textContent = `up ${topo.uptime} · ${topo.workersTotal} worker(s) · ${topo.tasksTotal} tasks`;
    $("activate").disabled = topo.status === "ACTIVE";
    $("deactivate").disabled = topo.status !== "ACTIVE";
    drawTiles(topo, history);
    drawGraph(topo);
    drawChart(history);
    drawComponents(topo);
    drawTrident(topo);
    drawWindows(topo);
    drawStalls(topo);
    drawWorkers(topo);
    drawEvents(topo);
    drawErrors(topo);
    $("live").className = "live";
    $("live").textContent = "live";
  } catch (err) {
    $("live").className = "live stale";
    $("live").textContent = "not updating: " + err.message;
  } finally {
    busy = false;
  }
}

async function operate(op) {
  if (!current) return;
  const name = current;
  if (op === "kill/0" && !window.confirm(`Kill topology ${name}? Its spouts are closed and its bolts cleaned up.`)) return;
  try {
    await getJSON(`${API}/topology/${encodeURIComponent(name)}/${op}`, { method: "POST" });
    say(`${op.split("/")[0]}: ${name} – done`, "info");
  } catch (err) {
    say(`${op.split("/")[0]} ${name} failed: ${err.message}`);
  }
  await refresh();
}

$("activate").addEventListener("click", () => operate("activate"));
$("deactivate").addEventListener("click", () => operate("deactivate"));
$("kill").addEventListener("click", () => operate("kill/0"));
refresh();
setInterval(refresh, REFRESH_MS);
