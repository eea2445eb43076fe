// Live refresh of the dashboard pages: every data-refresh milliseconds the
// page is fetched again and its <main> replaced, unless a form field in it
// has the focus (someone is choosing). Charts are inline SVG drawn by the
// server, so nothing else is needed.
(function () {
  "use strict";
  var period = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!period) {
    return;
  }
  var busy = false;
  function editing() {
    var a = document.activeElement;
    return a && a.closest && a.closest("#live") && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(a.tagName);
  }
  function tick() {
    if (busy || editing() || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", redirect: "manual", headers: { "X-Poolfs-Refresh": "1" } })
      .then(function (r) {
        if (r.type === "opaqueredirect" || r.status === 401 || r.status === 403) {
          window.location.reload(); // the session ended: go to the login page
          return null;
        }
        return r.ok ? r.text() : null;
      })
      .then(function (text) {
        if (!text) {
          return;
        }
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("live");
        var cur = document.getElementById("live");
        if (fresh && cur && !editing()) {
          var flash = cur.querySelector("#flash");
          cur.innerHTML = fresh.innerHTML;
          if (flash && !cur.querySelector("#flash")) {
            cur.insertBefore(flash, cur.firstChild); // keep an action's result in view
          }
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
      });
  }
  window.setInterval(tick, period);
})();
