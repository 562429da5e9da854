// Every page: times in the viewer's own zone (the server renders UTC; the raw ms stay in the tooltip), the
// system/dark/light toggle (remembered per user by the server), and the time zone offset the audit filter needs.
(function () {
  "use strict";
  const pad = (n) => String(n).padStart(2, "0");
  const zone = (() => {
    try { return new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(new Date())
      .find((p) => p.type === "timeZoneName").value; } catch (e) { return ""; }
  })();

  function clock(d) {
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." +
      String(d.getMilliseconds()).padStart(3, "0");
  }

  function stamp(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + (zone ? " " + zone : "");
  }

  function localize(root) {
    // Stream frames: a time of day with milliseconds, in the viewer's zone (the server wrote UTC).
    (root || document).querySelectorAll("[data-fmt=clock][data-ms]:not([data-local])").forEach((t) => {
      const d = new Date(Number(t.dataset.ms));
      if (!t.dataset.ms || isNaN(d)) return;
      t.title = t.dataset.ms + " ms · " + t.textContent.trim() + " UTC";
      t.textContent = clock(d);
      t.dataset.local = "1";
    });
    // Chart axes and bar tooltips: hours and minutes in the viewer's zone, like the tables.
    (root || document).querySelectorAll("[data-fmt=hm][data-ms]:not([data-local])").forEach((t) => {
      const d = new Date(Number(t.dataset.ms));
      if (!t.dataset.ms || isNaN(d)) return;
      t.textContent = pad(d.getHours()) + ":" + pad(d.getMinutes()) + (zone ? " " + zone : "") + (t.dataset.rest || "");
      t.dataset.local = "1";
    });
    // Tooltips of bars that may be days apart (a schedule's fires): the whole date and time, like the tables.
    (root || document).querySelectorAll("[data-fmt=title][data-ms]:not([data-local])").forEach((t) => {
      const d = new Date(Number(t.dataset.ms));
      if (!t.dataset.ms || isNaN(d)) return;
      t.title = stamp(d) + (t.dataset.rest || "");
      t.dataset.local = "1";
    });
    (root || document).querySelectorAll("time.ts[data-ms]:not([data-local])").forEach((t) => {
      const d = new Date(Number(t.dataset.ms));
      if (isNaN(d)) return;
      t.textContent = stamp(d);
      t.dataset.local = "1";
    });
    (root || document).querySelectorAll("input[data-tz-offset]").forEach((i) => {
      i.value = String(new Date().getTimezoneOffset());
    });
  }

  // The theme button cycles system → dark → light → system, so "follow the system" is always one click away.
  const NEXT_THEME = { auto: "dark", dark: "light", light: "auto" };
  const THEME_LABEL = { auto: "follows the system", dark: "dark", light: "light" };
  const THEME_ICON = { auto: "◐", dark: "☾", light: "☀" };

  function labelTheme() {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    const pref = NEXT_THEME[document.documentElement.dataset.themePref] ? document.documentElement.dataset.themePref : "auto";
    const next = NEXT_THEME[pref];
    btn.value = next;
    btn.textContent = THEME_ICON[pref];
    btn.title = "Theme: " + THEME_LABEL[pref] + " — click for " + THEME_LABEL[next] + " (remembered)";
    btn.setAttribute("aria-label", btn.title);
  }

  function toggle(ev) {
    const btn = ev.target instanceof Element && ev.target.closest("#theme-toggle");
    if (!btn) return;
    ev.preventDefault();
    const root = document.documentElement;
    const next = NEXT_THEME[root.dataset.themePref] || "dark";
    const os = window.matchMedia && window.matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark";
    root.dataset.theme = next === "auto" ? os : next;
    root.dataset.themePref = next;
    labelTheme();
    const form = btn.closest("form");
    const body = new URLSearchParams({ theme: next });
    fetch(form.action, { method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value, "HX-Request": "true" } });
  }

  // Ticked rows (data-keep-checked, e.g. the inbox's bulk selection) survive a live re-render of their rows.
  const kept = new Map();
  document.addEventListener("htmx:beforeSwap", (ev) => {
    const t = ev.detail && ev.detail.target;
    if (!(t instanceof Element)) return;
    const on = Array.from(t.querySelectorAll("input[data-keep-checked]:checked")).map((i) => i.name + "=" + i.value);
    if (on.length) kept.set(t, new Set(on));
  });
  document.addEventListener("htmx:afterSwap", (ev) => {
    const t = ev.detail && ev.detail.target;
    const on = t && kept.get(t);
    if (!on) return;
    kept.delete(t);
    const root = t.isConnected ? t : document;
    root.querySelectorAll("input[data-keep-checked]").forEach((i) => { if (on.has(i.name + "=" + i.value)) i.checked = true; });
  });

  document.addEventListener("click", toggle);
  document.addEventListener("DOMContentLoaded", () => {
    localize(document);
    labelTheme();
    // Content added by page scripts outside htmx (a stream's live frames) is localized as it arrives.
    new MutationObserver((records) => {
      if (records.some((r) => r.addedNodes.length)) localize(document);
    }).observe(document.body, { childList: true, subtree: true });
  });
  document.addEventListener("htmx:load", (ev) => localize(ev.target instanceof Element ? ev.target : document));
})();
