// Flow page: lay the DAG out with dagre (once per graph revision, cached in sessionStorage), draw it
// as SVG (nodes named, coloured by state, with their duration, linked to their execution; edges by
// resolution state), open it on the member that matters (data.start), pan (drag) and zoom (wheel, buttons),
// then refresh states in place without laying out again.
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  // A group's label ("+14: 3 done · 11 skipped") changes as its members run: its box is sized for the longest
  // one the server writes (GROUP_LABEL_MAX), so a live update is never cut off.
  const NODE_H = 44, GROUP_H = 34, CHAR_W = 7.2, MIN_W = 110, MAX_LABEL = 32, GROUP_LABEL = 40;
  // The second line of a node, "completed · 1.2 s": sized for the longest state plus a duration.
  const STATE_LINE = 30;
  const MIN_SCALE = 0.1, MAX_SCALE = 3;

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
    return "ff-flow-layout:v3:" + data.flow_id + ":" + data.revision + ":" + hash(shape);
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
    data.nodes.forEach((n) => g.setNode(n.id, n.state === "group"
      ? { width: Math.max(MIN_W, GROUP_LABEL * CHAR_W + 20), height: GROUP_H }
      : { width: Math.max(MIN_W, Math.max(label(n).length, STATE_LINE) * CHAR_W + 20), height: NODE_H }));
    data.edges.forEach((e) => g.setEdge(e.from, e.to));
    dagre.layout(g);
    const out = { width: g.graph().width, height: g.graph().height, nodes: {}, edges: {} };
    g.nodes().forEach((id) => { const n = g.node(id); out.nodes[id] = [n.x, n.y, n.width, n.height]; });
    data.edges.forEach((e) => { const p = g.edge(e.from, e.to); out.edges[e.id] = p ? p.points.map((q) => [q.x, q.y]) : []; });
    try { sessionStorage.setItem(key, JSON.stringify(out)); } catch (e) { /* full: fine */ }
    return out;
  }

  function duration(ms) {
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 3600000) return Math.floor(ms / 60000) + " min " + Math.floor((ms % 60000) / 1000) + " s";
    return Math.floor(ms / 3600000) + " h " + Math.floor((ms % 3600000) / 60000) + " min";
  }

  // "running · 12.0 s" / "completed · 1.2 s" / "waiting": the state, and how long it ran when it has started.
  function stateLine(state, started, ended) {
    const words = state.replace(/_/g, " ");
    if (!started) return words;
    const end = ended || (state === "active" ? Date.now() : 0);
    return end ? words + " · " + duration(Math.max(0, end - started)) : words;
  }

  function tooltip(n, state, started, ended) {
    const group = n.group ? "\ninbound edges: " + n.group : "";
    return n.name + "\n" + n.id + "\n" + stateLine(state, started, ended) + group;
  }

  function el(name, attrs, parent) {
    const x = document.createElementNS(SVG, name);
    Object.entries(attrs).forEach(([k, v]) => x.setAttribute(k, v));
    if (parent) parent.appendChild(x);
    return x;
  }

  function draw(box, data, pos) {
    // The svg fills its box; the drawing moves inside it (pan and zoom transform the "viewport" group).
    const svg = el("svg", { width: "100%", height: Math.max(220, Math.min(pos.height + 20, window.innerHeight * 0.7)),
      role: "img", "aria-label": "Flow graph with " + data.nodes.length + " nodes", id: "flow-svg" });
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }, marker);
    const view = el("g", { class: "viewport" }, svg);
    const edges = el("g", { class: "edges" }, view);
    data.edges.forEach((e) => {
      const pts = pos.edges[e.id] || [];
      if (!pts.length) return;
      const d = "M " + pts.map((p) => p[0].toFixed(1) + " " + p[1].toFixed(1)).join(" L ");
      el("path", { d: d, class: "edge e-" + e.state, "data-edge": e.id, "marker-end": "url(#arrow)" }, edges);
    });
    const nodes = el("g", { class: "nodes" }, view);
    data.nodes.forEach((n) => {
      const p = pos.nodes[n.id];
      if (!p) return;
      const wrap = n.href ? el("a", { href: n.href, class: "node-link" }, nodes) : nodes;
      const g = el("g", { class: "node n-" + n.state, "data-eid": n.id, transform: "translate(" + (p[0] - p[2] / 2) + "," + (p[1] - p[3] / 2) + ")" }, wrap);
      el("rect", { width: p[2], height: p[3], rx: 6 }, g);
      const title = el("title", {}, g);
      if (n.state === "group") {
        const t = el("text", { x: p[2] / 2, y: p[3] / 2 + 4, "text-anchor": "middle" }, g);
        t.textContent = label(n);
        title.textContent = n.label;  // a group's label may be cut short in the box: its tooltip carries it whole
      } else {
        n.name = n.label;
        const t = el("text", { x: p[2] / 2, y: 18, "text-anchor": "middle", class: "node-name" }, g);
        t.textContent = label(n);
        const st = el("text", { x: p[2] / 2, y: 34, "text-anchor": "middle", class: "node-state" }, g);
        st.textContent = stateLine(n.state, n.started, n.ended);
        g.dataset.state = n.state;
        g.dataset.started = n.started || 0;
        g.dataset.ended = n.ended || 0;
        g.dataset.name = n.label;
        if (n.group) g.dataset.group = n.group;  // any_of / quorum: the policy deciding this member
        title.textContent = tooltip(n, n.state, n.started, n.ended);
      }
      if (data.focus && n.id === data.focus) g.classList.add("focus");
      // An attribute, not a class: the class stays "node n-<state>" for styling and for whoever reads it.
      if (data.start && n.id === data.start && data.start !== data.focus) g.dataset.start = "1";
    });
    box.replaceChildren(svg);
    box.dataset.layout = pos.cached ? "cached" : "computed";
    return { svg: svg, view: view };
  }

  // Pan and zoom: one transform on the drawing, kept in `state`; the svg fills the box.
  function panZoom(box, drawn, pos, data) {
    const svg = drawn.svg, view = drawn.view;
    const st = { k: 1, x: 0, y: 0 };
    function apply() {
      view.setAttribute("transform", "translate(" + st.x.toFixed(1) + "," + st.y.toFixed(1) + ") scale(" + st.k.toFixed(3) + ")");
      box.dataset.scale = st.k.toFixed(3);
    }
    function size() { const r = svg.getBoundingClientRect(); return [r.width || 1, r.height || 1]; }
    function zoomAt(k, cx, cy) {
      k = Math.min(MAX_SCALE, Math.max(MIN_SCALE, k));
      st.x = cx - (cx - st.x) * (k / st.k);
      st.y = cy - (cy - st.y) * (k / st.k);
      st.k = k;
      apply();
    }
    function fit() {
      const [w, h] = size();
      st.k = Math.min(1, Math.max(MIN_SCALE, Math.min(w / pos.width, h / pos.height)));
      st.x = (w - pos.width * st.k) / 2;
      st.y = (h - pos.height * st.k) / 2;
      apply();
    }
    function centreOn(id) {
      const p = pos.nodes[id];
      if (!p) { fit(); return; }
      const [w, h] = size();
      st.k = Math.max(st.k, 0.8);
      st.x = w / 2 - p[0] * st.k;
      st.y = h / 2 - p[1] * st.k;
      apply();
    }
    // Open on the whole graph when it fits at a readable size, else on the member that matters at full size.
    function home() {
      const [w, h] = size();
      if (Math.min(w / pos.width, h / pos.height) >= 0.6 || !data.start) fit();
      else { st.k = 1; centreOn(data.start); }
    }
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = svg.getBoundingClientRect();
      zoomAt(st.k * Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
    }, { passive: false });
    let drag = null;
    svg.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      drag = { x: ev.clientX, y: ev.clientY, sx: st.x, sy: st.y, moved: false };
    });
    window.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      box.classList.add("panning");
      st.x = drag.sx + dx;
      st.y = drag.sy + dy;
      apply();
    });
    window.addEventListener("pointerup", () => {
      if (drag && drag.moved) {
        // A drag that ends on a node is not a click on its link.
        svg.addEventListener("click", (e) => { e.preventDefault(); e.stopPropagation(); }, { capture: true, once: true });
        setTimeout(() => box.classList.remove("panning"), 0);
      }
      drag = null;
    });
    const tools = document.getElementById("flow-tools");
    if (tools) {
      tools.hidden = false;
      tools.addEventListener("click", (ev) => {
        const b = ev.target instanceof Element && ev.target.closest("button[data-view]");
        if (!b) return;
        const [w, h] = size();
        const act = b.dataset.view;
        if (act === "in") zoomAt(st.k * 1.25, w / 2, h / 2);
        else if (act === "out") zoomAt(st.k / 1.25, w / 2, h / 2);
        else if (act === "fit") fit();
        else if (act === "start") { st.k = 1; centreOn(data.start); }
      });
    }
    home();
  }

  // A node's second line and tooltip from its data-* (state, started, ended): after a refresh, and each
  // second for running members so their duration moves.
  function paint(g) {
    const st = g.dataset.state, started = Number(g.dataset.started), ended = Number(g.dataset.ended);
    const line = g.querySelector("text.node-state");
    if (line) line.textContent = stateLine(st, started, ended);
    const t = g.querySelector("title");
    if (t) t.textContent = tooltip({ name: g.dataset.name, id: g.dataset.eid, group: g.dataset.group }, st, started, ended);
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
          const times = (s.times && s.times[g.dataset.eid]) || [Number(g.dataset.started), Number(g.dataset.ended)];
          g.dataset.state = st;
          g.dataset.started = times[0] || 0;
          g.dataset.ended = times[1] || 0;
          g.setAttribute("class", "node n-" + st + (g.classList.contains("focus") ? " focus" : ""));
          paint(g);
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
    const pos = layout(data);
    panZoom(box, draw(box, data, pos), pos, data);
    setInterval(() => {
      if (!document.hidden) box.querySelectorAll('g.node[data-state="active"]').forEach(paint);
    }, 1000);
    // Engine events (member claimed/finished) recolour at once; a slow poll covers missed pushes.
    box.addEventListener("ff:live", () => refresh(box, data));
    setInterval(() => refresh(box, data), 10000);
  }

  document.addEventListener("DOMContentLoaded", start);
})();
