// Execution detail: lease expiry countdown, ticking locally from the server's clock at render time.
(function () {
  "use strict";
  const skew = {};
  function tick() {
    document.querySelectorAll(".countdown[data-expires]").forEach((el) => {
      const expires = Number(el.dataset.expires), now = Number(el.dataset.now);
      if (!expires || !now) return;
      if (!(el.dataset.expires in skew)) skew[el.dataset.expires] = Date.now() - now;
      const left = Math.round((expires - (Date.now() - skew[el.dataset.expires])) / 1000);
      el.textContent = left >= 0 ? "in " + left + "s" : "expired " + (-left) + "s ago";
      el.classList.toggle("bad", left < 5);
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
})();
