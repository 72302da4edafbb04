// Small page behaviours that are not live updates (live.js owns those).
"use strict";

// Forms with data-confirm ask before they act. Delegated from document, so forms that
// live.js swaps in with a refreshed partial are covered too.
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  if (event.defaultPrevented) return; // refused by the page's own script (a disabled button)
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

// Copy buttons beside a secret shown once (`<button data-copy="<id of the element>">`). They
// are rendered hidden and shown here, so a page without scripts has no dead button. The
// clipboard API needs a secure context (https or localhost); elsewhere the text is selected
// and copied with execCommand, and if even that is refused it stays selected for Ctrl+C.
(function () {
  var buttons = document.querySelectorAll("button[data-copy]");
  var say = function (button, text) {
    var status = button.nextElementSibling;
    if (!status || !status.classList.contains("copy-status")) {
      status = document.createElement("span");
      status.className = "copy-status muted";
      status.setAttribute("role", "status");
      button.insertAdjacentElement("afterend", status);
    }
    status.textContent = text;
  };
  var selectText = function (element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  };
  var fallback = function (button, source) {
    selectText(source);
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (e) {
      copied = false;
    }
    say(button, copied ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy.");
  };
  buttons.forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = source.textContent.trim();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(
          function () { say(button, "Copied."); },
          function () { fallback(button, source); }
        );
      } else {
        fallback(button, source);
      }
    });
  });
})();
