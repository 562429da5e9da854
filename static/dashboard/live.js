// Pushed refreshes for any page: elements opt in with data-live="<topic> <topic>..." and data-live-url, a URL
// whose htmx request (HX-Request header) renders the element's own partial, e.g.
//   <div id="x-live" data-live="overview" data-live-url="{% url 'home' %}">   (swap: outerHTML, or data-live-swap)
// One socket per page (/ws/live/?topics=...) receives coalesced {"type":"refresh","topics":[...]} pushes; each
// matching element re-fetches its partial (one request in flight per element, a second push while it runs
// re-fetches once more afterwards). data-live-mode="banner" elements count new executions instead
// (data-filter-lane / data-filter-kind narrow the count) and are shown with that number; data-live-mode="event"
// elements get an "ff:live" DOM event instead (for script-drawn views such as the flow DAG).
// data-live-mode="rows" elements (the executions list's tbody) re-render only their rows (tr[data-eid]) whose
// execution a push names (its "ids"; "more" means all of them): data-live-url + "ids=..." answers those rows,
// each swapped in place (issue #25).
// A background tab pauses (no socket after 5 s); returning, or reconnecting, refreshes everything once.
// A slow safety refresh covers changes made by writers that publish no events.
(function () {
  "use strict";
  const SAFETY_MS = 30000;
  let socket = null, retry = 500, hideTimer = null, opened = false;
  const inFlight = new Set(), again = new Set();

  function elements() { return Array.from(document.querySelectorAll("[data-live]")); }
  function topicsOf(el) { return (el.dataset.live || "").split(/\s+/).filter(Boolean); }
  function allTopics() {
    const t = new Set();
    elements().forEach((el) => topicsOf(el).forEach((x) => t.add(x)));
    return Array.from(t);
  }

  function refresh(el) {
    const url = el.dataset.liveUrl;
    if (!window.htmx || !el.id || !url) return;
    // Never swap away a form the user is typing into: try again once they have left it.
    const a = document.activeElement;
    if (a && el.contains(a) && a.matches("input, textarea, select")) {
      setTimeout(() => { const fresh = document.getElementById(el.id); if (fresh) refresh(fresh); }, 2000);
      return;
    }
    if (inFlight.has(el.id)) { again.add(el.id); return; }
    const id = el.id;
    inFlight.add(id);
    window.htmx.ajax("GET", url, { source: el, target: el, swap: el.dataset.liveSwap || "outerHTML" })
      .catch(() => {})
      .finally(() => {
        inFlight.delete(id);
        // A push that arrived meanwhile: fetch once more (the element may have been replaced by the swap).
        if (again.delete(id)) { const fresh = document.getElementById(id); if (fresh) refresh(fresh); }
      });
  }
  function refreshAll() { elements().forEach((el) => (el.dataset.liveMode === "rows" ? refreshRows(el, null) : refresh(el))); }

  // ---- rows mode: one request in flight per list; ids arriving meanwhile wait for the next one.
  const ROWS_PER_REQUEST = 100;
  const rowsWanted = new Map();  // element id -> {ids: Set, running: bool}
  function shownRows(el) { return Array.from(el.querySelectorAll("tr[data-eid]")); }
  function refreshRows(el, ids) {
    if (!el.id || !el.dataset.liveUrl) return;
    const want = shownRows(el).map((r) => r.dataset.eid).filter((e) => !ids || ids.has(e));
    if (!want.length) return;
    let w = rowsWanted.get(el.id);
    if (!w) { w = { ids: new Set(), running: false }; rowsWanted.set(el.id, w); }
    want.forEach((e) => w.ids.add(e));
    if (!w.running) fetchRows(el.id, w);
  }
  function fetchRows(id, w) {
    const el = document.getElementById(id);
    if (!el || !w.ids.size) { w.running = false; return; }
    const batch = Array.from(w.ids).slice(0, ROWS_PER_REQUEST);
    batch.forEach((e) => w.ids.delete(e));
    w.running = true;
    const url = el.dataset.liveUrl;
    fetch(url + (url.indexOf("?") < 0 ? "?" : "&") + new URLSearchParams({ ids: batch.join(",") }),
          { headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : ""))
      .then((html) => {
        const box = document.getElementById(id);
        if (!html || !box) return;
        const t = document.createElement("template");
        t.innerHTML = html;
        const byEid = new Map(shownRows(box).map((r) => [r.dataset.eid, r]));
        t.content.querySelectorAll("tr[data-eid]").forEach((fresh) => {
          const old = byEid.get(fresh.dataset.eid);
          if (!old) return;
          if (old.classList.contains("selected")) fresh.classList.add("selected");  // keep the j/k selection
          old.replaceWith(fresh);
        });
      })
      .catch(() => {})
      .finally(() => fetchRows(id, w));
  }

  function bannerCount(el, created) {
    const lane = el.dataset.filterLane || "", kind = el.dataset.filterKind || "";
    let n = 0;
    Object.keys(created || {}).forEach((l) => {
      if (lane && l !== lane) return;
      Object.keys(created[l]).forEach((k) => { if (!kind || k === kind) n += created[l][k]; });
    });
    return n;
  }

  function onPush(m) {
    if (m.type !== "refresh") return;
    const hit = new Set(m.topics);
    elements().forEach((el) => {
      if (!topicsOf(el).some((t) => hit.has(t))) return;
      if (el.dataset.liveMode === "event") {
        // Script-drawn views (the flow DAG) refresh themselves on this event.
        el.dispatchEvent(new CustomEvent("ff:live", { detail: m }));
      } else if (el.dataset.liveMode === "rows") {
        if (m.ids || m.more) refreshRows(el, m.more ? null : new Set(m.ids));
      } else if (el.dataset.liveMode === "banner") {
        const n = bannerCount(el, m.created);
        if (!n) return;
        const total = Number(el.dataset.count || 0) + n;
        el.dataset.count = String(total);
        const c = el.querySelector("[data-live-count]");
        if (c) c.textContent = String(total);
        el.hidden = false;
      } else {
        refresh(el);
      }
    });
  }

  // "show them" on a banner loads the new rows in place; the banner starts counting again from zero.
  document.addEventListener("click", (ev) => {
    const a = ev.target instanceof Element && ev.target.closest("[data-live-reset]");
    const banner = a && a.closest("[data-live-mode=banner]");
    if (!banner) return;
    banner.hidden = true;
    banner.dataset.count = "0";
  });

  function connect() {
    const topics = allTopics();
    if (socket || !topics.length || document.hidden) return;
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(proto + location.host + (document.body.dataset.wsRoot || "/ws/") + "live/?topics=" + encodeURIComponent(topics.join(",")));
    socket.onopen = () => {
      retry = 500;
      document.body.dataset.live = "on";
      if (opened) refreshAll();  // catch up on what changed while disconnected
      opened = true;
    };
    socket.onmessage = (ev) => onPush(JSON.parse(ev.data));
    socket.onclose = () => {
      socket = null;
      document.body.dataset.live = "off";
      if (!document.hidden) setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    };
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      hideTimer = setTimeout(() => { if (socket) socket.close(); }, 5000);
    } else {
      clearTimeout(hideTimer);
      if (!socket) { connect(); } else { socket.send(JSON.stringify({ pause: false })); }
    }
  });
  document.addEventListener("visibilitychange", () => {
    if (socket && socket.readyState === WebSocket.OPEN && document.hidden) socket.send(JSON.stringify({ pause: true }));
  });

  // Polled partials (hx-trigger="every Ns" data-poll-visible) skip their request while the tab is hidden. An
  // htmx trigger filter ("[document.visibilityState...]") would do it too, but filters are evaluated with
  // Function(), which the Content-Security-Policy forbids.
  document.addEventListener("htmx:beforeRequest", (ev) => {
    if (document.hidden && ev.target instanceof Element && ev.target.hasAttribute("data-poll-visible")) ev.preventDefault();
  });

  setInterval(() => { if (!document.hidden) refreshAll(); }, SAFETY_MS);
  document.addEventListener("DOMContentLoaded", connect);
})();
