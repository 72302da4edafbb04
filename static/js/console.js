// Small page behaviours that are not live updates (live.js owns those).
"use strict";

// Forms with data-confirm ask before they act. Delegated from document, so forms that
// live.js swaps in with a refreshed partial are covered too.
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  // One click, one action: a second submit while the first is in flight is dropped.
  if (form.dataset.submitting === "1") {
    event.preventDefault();
    return;
  }
  form.dataset.submitting = "1";
});

// A page restored from the back/forward cache must accept submits again.
window.addEventListener("pageshow", function () {
  document.querySelectorAll("form[data-submitting]").forEach(function (form) {
    delete form.dataset.submitting;
  });
});

// Changes committed between rendering this page and the socket's subscription were never
// pushed to this page: fetch every live section once when the subscription is confirmed.
document.addEventListener("live:message", function (event) {
  var message = event.detail || {};
  if (message.type !== "subscribed" || !window.IssuanceLive) return;
  document.querySelectorAll("[data-live-refresh]").forEach(function (el) {
    window.IssuanceLive.refresh(el);
  });
});
