// The console's few lines of script, on top of htmx (static/htmx-*.min.js).
//
// Polling with ETags: each polled panel has an id; the ETag of the last copy received is
// sent back as If-None-Match, and a 304 (nothing changed) leaves the page untouched, so
// focus, selection and scroll position survive. Every htmx request carries the session's
// CSRF token. Errors are rendered by the server as fragments and shown where they land.
(function () {
  "use strict";
  var etags = {};
  htmx.config.responseHandling = [
    { code: "204", swap: false },
    { code: "304", swap: false },
    { code: "[23]..", swap: true },
    { code: "[45]..", swap: true, error: false },
  ];
  document.addEventListener("htmx:configRequest", function (e) {
    var token = document.querySelector('meta[name="csrf-token"]');
    if (token) e.detail.headers["X-CSRF-Token"] = token.content;
    var id = e.detail.elt.id;
    if (e.detail.verb === "get" && id && etags[id] && e.detail.path === e.detail.elt.getAttribute("hx-get")) {
      e.detail.headers["If-None-Match"] = etags[id];
    }
  });
  // Confirmations in the page's own <dialog> (modal: focus stays in it, Esc cancels),
  // instead of window.confirm.
  document.addEventListener("htmx:confirm", function (e) {
    var question = e.detail.question;
    var dialog = document.getElementById("confirm");
    if (!question || !dialog) return;
    e.preventDefault();
    dialog.querySelector("[data-question]").textContent = question;
    dialog.returnValue = "";
    dialog.addEventListener("close", function once() {
      dialog.removeEventListener("close", once);
      if (dialog.returnValue === "ok") e.detail.issueRequest(true);
    });
    dialog.showModal();
  });
  // A log box opens at its end, where a failed run's exception is (pre.log[data-end]);
  // a poll that brings new lines keeps it there.
  function toEnd(root) {
    root.querySelectorAll("pre.log[data-end]").forEach(function (pre) { pre.scrollTop = pre.scrollHeight; });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { toEnd(document); });
  else toEnd(document);
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail.target && e.detail.target.id === "logs") toEnd(document);
  });
  // A form that opened under its button (details.run-args) closes once it succeeded.
  document.addEventListener("htmx:afterRequest", function (e) {
    var menu = e.detail.elt.closest && e.detail.elt.closest("details.run-args");
    if (menu && e.detail.successful && e.detail.xhr && e.detail.xhr.status < 300) menu.open = false;
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var id = e.detail.elt.id, xhr = e.detail.xhr;
    if (!id || !xhr) return;
    if (xhr.status === 200 && xhr.getResponseHeader("ETag")) etags[id] = xhr.getResponseHeader("ETag");
  });
})();
