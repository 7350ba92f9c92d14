// deadletter console: live regions fed by server-sent events. An element
// with data-sse="URL" has its content replaced by each "progress" event
// of that stream; the stream closes on "done". With data-sse-controls="ID"
// the element of that id is replaced by each "controls" event (sent only
// when the controls change, so a reason being typed stays). Without
// JavaScript the page shows the state at load and a Refresh link.
(function () {
  "use strict";
  function attach(root) {
    var els = (root || document).querySelectorAll("[data-sse]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (el.sseSource || !window.EventSource) { continue; }
      var es = new EventSource(el.getAttribute("data-sse"));
      el.sseSource = es;
      es.addEventListener("progress", (function (target) {
        return function (e) {
          target.innerHTML = e.data;
          target.setAttribute("data-sse-events", String(Number(target.getAttribute("data-sse-events") || "0") + 1));
          if (window.htmx) { window.htmx.process(target); }
        };
      })(el));
      es.addEventListener("controls", (function (id) {
        return function (e) {
          var target = id && document.getElementById(id);
          if (!target) { return; }
          target.innerHTML = e.data;
          if (window.htmx) { window.htmx.process(target); }
        };
      })(el.getAttribute("data-sse-controls")));
      es.addEventListener("done", (function (source) { return function () { source.close(); }; })(es));
    }
  }
  function closeAll() {
    var els = document.querySelectorAll("[data-sse]");
    for (var i = 0; i < els.length; i++) { if (els[i].sseSource) { els[i].sseSource.close(); } }
  }
  document.addEventListener("DOMContentLoaded", function () { attach(document); });
  document.addEventListener("htmx:beforeSwap", closeAll);
  document.addEventListener("htmx:afterSettle", function () { attach(document); });
})();
// A form marked data-busy disables its submit buttons once sent and shows
// a button's data-busy-label (e.g. "Signing…" while the password is
// checked again), so a slow signature is not sent twice.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form || !form.hasAttribute || !form.hasAttribute("data-busy")) { return; }
    var buttons = form.querySelectorAll("button[type=submit]");
    for (var i = 0; i < buttons.length; i++) {
      var b = buttons[i];
      if (b.hasAttribute("data-busy-label")) { b.textContent = b.getAttribute("data-busy-label"); }
      b.disabled = true;
      b.setAttribute("aria-busy", "true");
    }
    form.setAttribute("aria-busy", "true");
  });
})();
// Copy buttons: a button.copy copies its data-copy (the full identifier
// an ellipsis hides). Without JavaScript the buttons stay hidden and the
// full value is in the element's title.
(function () {
  "use strict";
  function show(root) {
    var bs = (root || document).querySelectorAll("button.copy[hidden]");
    for (var i = 0; i < bs.length; i++) { bs[i].hidden = false; }
  }
  document.addEventListener("DOMContentLoaded", function () { show(document); });
  document.addEventListener("htmx:afterSettle", function () { show(document); });
  document.addEventListener("click", function (e) {
    var b = e.target && e.target.closest ? e.target.closest("button.copy") : null;
    if (!b) { return; }
    e.preventDefault();
    var v = b.getAttribute("data-copy") || "";
    var done = function () { b.classList.add("copied"); setTimeout(function () { b.classList.remove("copied"); }, 1200); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(v).then(done, function () {});
    }
  });
})();
