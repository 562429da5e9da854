// Keyboard shortcuts shared by every page: "/" jump to id, j/k move through table rows, Enter opens, "?" help.
(function () {
  "use strict";
  let current = -1;
  function rows() { return Array.from(document.querySelectorAll("table.rows tbody tr[data-href], table.rows tbody tr[id]")); }
  function select(i) {
    const list = rows();
    if (!list.length) return;
    current = Math.max(0, Math.min(i, list.length - 1));
    list.forEach((r, j) => r.classList.toggle("selected", j === current));
    list[current].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") { ev.preventDefault(); const j = document.getElementById("jump"); if (j) j.focus(); }
    else if (ev.key === "j") { select(current + 1); }
    else if (ev.key === "k") { select(current - 1); }
    else if (ev.key === "Enter" && current >= 0) {
      const r = rows()[current]; const href = r && (r.dataset.href || (r.querySelector("a") || {}).href);
      if (href) window.location.href = href;
    }
    else if (ev.key === "?") { const h = document.getElementById("help"); if (h && !h.open) h.showModal(); }
  });
})();
