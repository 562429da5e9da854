// Live sections of any page, rendered on the server and pushed (dashboard/live_views.py). An element opts in with
// data-live="<topic> <topic>..." and data-live-url, the URL whose htmx GET renders the element's own partial:
//   <div id="x-live" data-live="overview" data-live-url="{% url 'home' %}">   (swap: outerHTML, or data-live-swap)
// One socket per page (/ws/live/) registers these sections as views; the server renders each once per change for
// every tab showing it and pushes {"type":"view","id","html"} — the page makes no request of its own.
// data-live-every="2" asks for a server-side re-render every 2 s (pushed only when the HTML changed).
// A push never replaces what the operator is working in: open <details>, a form holding focus or edited values,
// and ticked checkboxes are carried over into the new HTML (matched by id, or by position under the nearest id).
// data-live-mode="rows" elements (the executions list's tbody) get only the rows of executions a change touched.
// data-live-mode="banner" elements count new executions instead (data-filter-lane / data-filter-kind narrow the
// count) from {"type":"refresh"} hints; data-live-mode="event" elements get an "ff:live" DOM event (the flow DAG).
// A background tab pauses (no socket after 5 s); returning, or reconnecting, catches up once.
(function () {
  "use strict";
  let socket = null, retry = 500, hideTimer = null, opened = false;

  function elements() { return Array.from(document.querySelectorAll("[data-live]")); }
  function topicsOf(el) { return (el.dataset.live || "").split(/\s+/).filter(Boolean); }
  function isHint(el) { return el.dataset.liveMode === "banner" || el.dataset.liveMode === "event"; }
  function hintTopics() {
    const t = new Set();
    elements().filter(isHint).forEach((el) => topicsOf(el).forEach((x) => t.add(x)));
    return Array.from(t);
  }
  function views() {
    return elements().filter((el) => !isHint(el) && el.id && el.dataset.liveUrl).map((el) => {
      const u = new URL(el.dataset.liveUrl, location.href);
      const mode = el.dataset.liveMode === "rows" ? "rows" : (el.dataset.liveSwap === "innerHTML" ? "inner" : "swap");
      const v = { id: el.id, url: u.pathname + u.search, topics: topicsOf(el), mode: mode };
      if (el.dataset.liveEvery) v.every = Number(el.dataset.liveEvery);
      return v;
    });
  }

  // ---- carrying what the operator works in over into pushed HTML
  function edited(form) {
    return Array.from(form.elements || []).some((f) => {
      if (f.type === "checkbox" || f.type === "radio") return f.checked !== f.defaultChecked;
      if (f.tagName === "SELECT") return Array.from(f.options).some((o) => o.selected !== o.defaultSelected);
      return "defaultValue" in f && f.type !== "hidden" && f.value !== f.defaultValue;
    });
  }
  function keepers(root) {
    const a = document.activeElement;
    const all = Array.from(root.querySelectorAll("details[open], form")).filter((el) =>
      el.tagName === "DETAILS" || (a && a !== document.body && el.contains(a)) || edited(el));
    return all.filter((el) => !all.some((o) => o !== el && o.contains(el)));  // outermost only
  }
  // Where an element sits: the nearest element with an id (below root), and its index among that one's same tags.
  function keyOf(el, root) {
    let anc = el;
    while (anc !== root && !anc.id) anc = anc.parentElement;
    if (anc === el && anc !== root) return { scope: anc.id, tag: "", index: -1 };
    const scope = anc === root ? null : anc.id;
    return { scope: scope, tag: el.tagName, index: Array.from(anc.querySelectorAll(el.tagName)).indexOf(el) };
  }
  function findKey(k, box) {
    const scope = k.scope ? box.querySelector("#" + CSS.escape(k.scope)) : box;
    if (!scope) return null;
    return k.index < 0 ? scope : scope.querySelectorAll(k.tag)[k.index] || null;
  }
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["x-csrftoken"] || ""; } catch (e) { return ""; }
  }

  // box: the new element (swap) or a detached copy holding the new children (inner); old: the element on the page.
  function carryOver(old, box) {
    // Rendered for the whole room, so its forms carry a token of no one's session: use this page's.
    const token = csrfToken();
    box.querySelectorAll("input[name=csrfmiddlewaretoken]").forEach((i) => { i.value = token; });
    const ticked = new Set(Array.from(old.querySelectorAll("input[type=checkbox]:checked, input[type=radio]:checked"))
      .filter((i) => !i.closest("form") || !keepers(old).includes(i.closest("form")))
      .map((i) => i.name + "=" + i.value));
    box.querySelectorAll("input[type=checkbox], input[type=radio]").forEach((i) => {
      if (ticked.has(i.name + "=" + i.value)) i.checked = true;
    });
    keepers(old).forEach((k) => {
      const spot = findKey(keyOf(k, old), box);
      if (spot) { spot.replaceWith(k); return; }
      // Its place is gone from the new HTML (the row left the view): keep its row where it was, dimmed.
      let top = k;
      while (top.parentElement && top.parentElement !== old) top = top.parentElement;
      const at = Array.from(old.children).indexOf(top);
      top.classList.add("live-stale");
      box.insertBefore(top, box.children[at] || null);
    });
  }

  function afterSwap(node) {
    if (window.htmx) window.htmx.process(node);
    node.dispatchEvent(new CustomEvent("htmx:load", { bubbles: true }));  // local times etc. (ui.js)
  }

  function swapView(el, mode, html) {
    const a = document.activeElement, sel = a && "selectionStart" in a ? [a.selectionStart, a.selectionEnd] : null;
    const tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    if (mode === "inner") {
      const box = el.cloneNode(false);
      box.append(tpl.content);
      carryOver(el, box);
      el.replaceChildren(...Array.from(box.childNodes));
      afterSwap(el);
    } else {
      const fresh = tpl.content.firstElementChild;
      if (!fresh) return;
      carryOver(el, fresh);
      el.replaceWith(fresh);
      afterSwap(fresh);
    }
    if (a && a !== document.activeElement && a.isConnected) {
      a.focus({ preventScroll: true });
      if (sel) { try { a.setSelectionRange(sel[0], sel[1]); } catch (e) { /* not a text field */ } }
    }
  }

  function swapRows(el, html) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const byEid = new Map(Array.from(el.querySelectorAll("tr[data-eid]")).map((r) => [r.dataset.eid, r]));
    tpl.content.querySelectorAll("tr[data-eid]").forEach((fresh) => {
      const old = byEid.get(fresh.dataset.eid);
      if (!old) return;
      if (old.classList.contains("selected")) fresh.classList.add("selected");  // keep the j/k selection
      carryOver(old, fresh);
      old.replaceWith(fresh);
      afterSwap(fresh);
    });
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

  function onHint(m) {
    const hit = new Set(m.topics);
    elements().filter(isHint).forEach((el) => {
      if (!topicsOf(el).some((t) => hit.has(t))) return;
      if (el.dataset.liveMode === "event") {
        el.dispatchEvent(new CustomEvent("ff:live", { detail: m }));  // script-drawn views refresh themselves
        return;
      }
      const n = bannerCount(el, m.created);
      if (!n) return;
      const total = Number(el.dataset.count || 0) + n;
      el.dataset.count = String(total);
      const c = el.querySelector("[data-live-count]");
      if (c) c.textContent = String(total);
      el.hidden = false;
    });
  }

  function onPush(m) {
    if (m.type === "view") {
      const el = document.getElementById(m.id);
      if (!el) return;
      if (m.mode === "rows") swapRows(el, m.html); else swapView(el, m.mode, m.html);
      document.body.dataset.livePushes = String(Number(document.body.dataset.livePushes || 0) + 1);
    } else if (m.type === "refresh") {
      onHint(m);
    }
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
    const vs = views(), topics = hintTopics();
    if (socket || (!vs.length && !topics.length) || document.hidden) return;
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(proto + location.host + (document.body.dataset.wsRoot || "/ws/") + "live/?topics=" + encodeURIComponent(topics.join(",")));
    socket.onopen = () => {
      retry = 500;
      document.body.dataset.live = "on";
      // After a reconnect the server sends each view once even if unchanged (what changed while we were away).
      socket.send(JSON.stringify({ views: views(), fresh: opened }));
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
  // A section replaced by the page itself (a form's htmx swap, "show them") may change its URL: re-register.
  document.addEventListener("htmx:afterSettle", () => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ views: views(), fresh: false }));
  });

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      hideTimer = setTimeout(() => { if (socket) socket.close(); }, 5000);
      if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ pause: true }));
    } else {
      clearTimeout(hideTimer);
      if (!socket) { connect(); } else if (socket.readyState === WebSocket.OPEN) { socket.send(JSON.stringify({ pause: false })); }
    }
  });

  // Polled partials (hx-trigger="every Ns" data-poll-visible) skip their request while the tab is hidden. An
  // htmx trigger filter ("[document.visibilityState...]") would do it too, but filters are evaluated with
  // Function(), which the Content-Security-Policy forbids.
  document.addEventListener("htmx:beforeRequest", (ev) => {
    if (document.hidden && ev.target instanceof Element && ev.target.hasAttribute("data-poll-visible")) ev.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", connect);
})();
