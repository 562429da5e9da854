// Loaded synchronously in <head> so the page paints in its theme at once: the user's remembered choice
// (<html data-theme-pref="light|dark">, a cookie per user) or, for "auto", the OS preference.
(function () {
  "use strict";
  const root = document.documentElement;
  const pref = root.dataset.themePref || "auto";
  const os = window.matchMedia && window.matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark";
  root.dataset.theme = pref === "light" || pref === "dark" ? pref : os;
})();
