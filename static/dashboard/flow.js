// Flow page: lay the DAG out with dagre (once per graph revision, cached in sessionStorage), draw it
// as SVG (nodes coloured by state and linked to their execution, edges by resolution state), then
// refresh states in place every few seconds without laying out again.
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  // A group's label ("+14: 3 done · 11 skipped") changes as its members run: its box is sized for the longest
  // one the server writes (GROUP_LABEL_MAX), so a live update is never cut off.
  const NODE_H = 34, CHAR_W = 7.2, MIN_W = 90, MAX_LABEL = 28, GROUP_LABEL = 40;

  function label(n) {
    const t = n.label || n.id;
    const max = n.state === "group" ? GROUP_LABEL : MAX_LABEL;
    return t.length > max ? t.slice(0, max - 1) + "…" : t;
  }

  function hash(s) {
    let h = 5381;
    for (let i = 0; i < s.length; i++) h = ((h << 5) + h + s.charCodeAt(i)) | 0;
    return (h >>> 0).toString(36);
  }

  function cacheKey(data) {
    const shape = data.nodes.map((n) => n.id).sort().join(",") + "|" + data.edges.map((e) => e.id).sort().join(",");
    return "ff-flow-layout:v2:" + data.flow_id + ":" + data.revision + ":" + hash(shape);
  }

  function layout(data) {
    const key = cacheKey(data);
    try {
      const hit = sessionStorage.getItem(key);
      if (hit) return Object.assign(JSON.parse(hit), { cached: true });
    } catch (e) { /* storage unavailable: lay out every time */ }
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 14, ranksep: 46, marginx: 10, marginy: 10 });
    g.setDefaultEdgeLabel(() => ({}));
    data.nodes.forEach((n) => g.setNode(n.id, { width: Math.max(MIN_W, (n.state === "group" ? GROUP_LABEL : label(n).length) * CHAR_W + 20), height: NODE_H }));
    data.edges.forEach((e) => g.setEdge(e.from, e.to));
    dagre.layout(g);
    const out = { width: g.graph().width, height: g.graph().height, nodes: {}, edges: {} };
    g.nodes().forEach((id) => { const n = g.node(id); out.nodes[id] = [n.x, n.y, n.width, n.height]; });
    data.edges.forEach((e) => { const p = g.edge(e.from, e.to); out.edges[e.id] = p ? p.points.map((q) => [q.x, q.y]) : []; });
    try { sessionStorage.setItem(key, JSON.stringify(out)); } catch (e) { /* full: fine */ }
    return out;
  }

  function el(name, attrs, parent) {
    const x = document.createElementNS(SVG, name);
    Object.entries(attrs).forEach(([k, v]) => x.setAttribute(k, v));
    if (parent) parent.appendChild(x);
    return x;
  }

  function draw(box, data, pos) {
    const svg = el("svg", { width: pos.width, height: pos.height, viewBox: "0 0 " + pos.width + " " + pos.height,
      role: "img", "aria-label": "Flow graph with " + data.nodes.length + " nodes", id: "flow-svg" });
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }, marker);
    const edges = el("g", { class: "edges" }, svg);
    data.edges.forEach((e) => {
      const pts = pos.edges[e.id] || [];
      if (!pts.length) return;
      const d = "M " + pts.map((p) => p[0].toFixed(1) + " " + p[1].toFixed(1)).join(" L ");
      el("path", { d: d, class: "edge e-" + e.state, "data-edge": e.id, "marker-end": "url(#arrow)" }, edges);
    });
    const nodes = el("g", { class: "nodes" }, svg);
    data.nodes.forEach((n) => {
      const p = pos.nodes[n.id];
      if (!p) return;
      const wrap = n.href ? el("a", { href: n.href, class: "node-link" }, nodes) : nodes;
      const g = el("g", { class: "node n-" + n.state, "data-eid": n.id, transform: "translate(" + (p[0] - p[2] / 2) + "," + (p[1] - p[3] / 2) + ")" }, wrap);
      el("rect", { width: p[2], height: p[3], rx: 6 }, g);
      const t = el("text", { x: p[2] / 2, y: p[3] / 2 + 4, "text-anchor": "middle" }, g);
      t.textContent = label(n);
      const title = el("title", {}, g);
      // A group's label may be cut short in the box: its tooltip carries it whole.
      title.textContent = n.state === "group" ? n.label : n.id + " · " + n.state.replace(/_/g, " ");
      if (data.focus && n.id === data.focus) g.classList.add("focus");
    });
    box.replaceChildren(svg);
    box.dataset.layout = pos.cached ? "cached" : "computed";
  }

  function statesUrl(box, data) {
    // A big flow's page shows one focus and its hops: ask for the states of exactly that view.
    if (!data.focus) return box.dataset.statesUrl;
    return box.dataset.statesUrl + "?" + new URLSearchParams({ focus: data.focus, hops: box.dataset.hops || "" });
  }

  function refresh(box, data) {
    if (document.hidden) return;
    fetch(statesUrl(box, data), { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((s) => {
        if (!s) return;
        if (s.revision !== data.revision) { window.location.reload(); return; }
        box.querySelectorAll("g.node[data-eid]").forEach((g) => {
          const grp = s.groups && s.groups[g.dataset.eid];
          if (grp) {  // a collapsed fan-out: its "×N done / M failed" label moves on
            const gt = g.querySelector("text");
            if (gt) gt.textContent = label({ label: grp, state: "group" });
            const gti = g.querySelector("title");
            if (gti) gti.textContent = grp;
            return;
          }
          const st = s.nodes[g.dataset.eid];
          if (!st) return;
          g.setAttribute("class", "node n-" + st + (g.classList.contains("focus") ? " focus" : ""));
          const t = g.querySelector("title");
          if (t) t.textContent = g.dataset.eid + " · " + st.replace(/_/g, " ");
        });
        box.querySelectorAll("path.edge[data-edge]").forEach((p) => {
          const st = s.edges[p.dataset.edge];
          if (st) p.setAttribute("class", "edge e-" + st);
        });
        const fs = document.getElementById("flow-state");
        if (fs) { fs.textContent = s.state; fs.className = "badge f-" + s.state; }
      })
      .catch(() => { /* transient: try again next tick */ });
  }

  function start() {
    const box = document.getElementById("flow-graph");
    const src = document.getElementById("flow-data");
    if (!box || !src || typeof dagre === "undefined") return;
    const data = JSON.parse(src.textContent);
    if (!data.nodes.length) { box.innerHTML = '<p class="muted">This flow has no members yet.</p>'; return; }
    draw(box, data, layout(data));
    // Engine events (member claimed/finished) recolour at once; a slow poll covers missed pushes.
    box.addEventListener("ff:live", () => refresh(box, data));
    setInterval(() => refresh(box, data), 10000);
  }

  document.addEventListener("DOMContentLoaded", start);
})();
