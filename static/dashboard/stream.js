// Live tail of an attempt stream: frames arrive over a websocket as server-rendered (escaped) HTML.
// Follows only while scrolled to the bottom; reconnects after its last frame id, so nothing is lost or
// repeated; a tab in the background disconnects and catches up when shown again.
(function () {
  "use strict";
  const box = document.getElementById("stream");
  if (!box) return;
  const list = document.getElementById("frames");
  const followBtn = document.getElementById("follow");
  let cursor = box.dataset.cursor || "0-0";
  let closed = box.dataset.closed === "1";
  let following = true;
  let socket = null;
  let retry = 500;
  let hideTimer = null;

  function atBottom() { return box.scrollHeight - box.scrollTop - box.clientHeight < 8; }
  function toBottom() { box.scrollTop = box.scrollHeight; }

  box.addEventListener("scroll", () => {
    following = atBottom();
    if (following) followBtn.hidden = true;
  });
  followBtn.addEventListener("click", () => { following = true; followBtn.hidden = true; toBottom(); });

  function append(html) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const nodes = Array.from(tpl.content.children);
    list.append(tpl.content);
    count(nodes);
    if (window.htmx) nodes.forEach((n) => window.htmx.process(n));  // "show all" buttons
    if (following) toBottom(); else followBtn.hidden = false;
  }

  // The "N frames written" line follows the frames that arrive (sizes as the server's filesizeformat shows them).
  const counter = document.getElementById("stream-count");
  function size(b) {
    if (b < 1024) return b + "\u00a0byte" + (b === 1 ? "" : "s");
    const u = ["KB", "MB", "GB"];
    let i = -1;
    do { b /= 1024; i++; } while (b >= 1024 && i < u.length - 1);
    return b.toFixed(1) + "\u00a0" + u[i];
  }
  function count(nodes) {
    if (!counter) return;
    const fresh = nodes.filter((n) => n.matches && n.matches("li.frame"));
    if (!fresh.length) return;
    const n = Number(counter.dataset.n || 0) + fresh.length;
    const bytes = fresh.reduce((t, f) => t + Number(f.dataset.size || 0), Number(counter.dataset.bytes || 0));
    counter.dataset.n = String(n);
    counter.dataset.bytes = String(bytes);
    counter.textContent = n + " frame" + (n === 1 ? "" : "s") + " written · " + size(bytes);
  }

  function onMessage(ev) {
    const m = JSON.parse(ev.data);
    if (m.type === "frames") {
      append(m.html);
      cursor = m.last;
      box.dataset.cursor = cursor;
    } else if (m.type === "closed") {
      closed = true;
      if (!document.getElementById("stream-closed")) box.insertAdjacentHTML("beforeend", m.html);
      const st = document.getElementById("stream-state");
      if (st) { st.textContent = "closed"; st.className = "muted"; }
      if (following) toBottom();
      socket.close();
    } else if (m.type === "notice") {
      const n = document.getElementById("stream-notice");
      if (n) { n.textContent = m.text; n.hidden = false; }
    }
  }

  function connect() {
    if (closed || socket || document.hidden) return;
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(proto + location.host + box.dataset.ws + "?after=" + encodeURIComponent(cursor));
    socket.onopen = () => { retry = 500; box.dataset.connected = "1"; };
    socket.onmessage = onMessage;
    socket.onclose = () => {
      socket = null;
      box.dataset.connected = "";
      if (!closed && !document.hidden) setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      // Pause: a background tab holds no socket; on return it resumes after its last frame.
      hideTimer = setTimeout(() => { if (socket) socket.close(); }, 5000);
    } else {
      clearTimeout(hideTimer);
      connect();
    }
  });

  toBottom();
  connect();
})();
