// console-certs: the certificate list's checkboxes and bulk bar, and the bulk action page,
// which carries the action out chunk by chunk and shows its progress.
"use strict";

(function () {
  // -- the list: select-all, the count, the bulk buttons -------------------------------------
  var bulkForm = document.getElementById("bulk-form");
  if (bulkForm) {
    var table = document.getElementById("certificate-table");
    var count = document.getElementById("bulk-count");
    // What is checked survives the live refresh of the table (live.js replaces it).
    var selected = new Set();

    var rows = function () {
      return Array.prototype.slice.call(table.querySelectorAll("input[data-select-row]"));
    };

    var allMatching = bulkForm.querySelector("input[data-all-matching]");
    var hint = document.getElementById("bulk-hint");

    // A button that says aria-disabled does nothing (a click, Enter or Space submits it).
    bulkForm.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (button && button.getAttribute("aria-disabled") === "true") {
        event.preventDefault();
        hint.hidden = false;
      }
    });

    var update = function () {
      var boxes = rows();
      var checked = boxes.filter(function (b) { return b.checked; }).length;
      var everything = allMatching && allMatching.checked;
      count.textContent = everything ? "all matching selected" : checked + " selected";
      // aria-disabled, not disabled: the buttons stay focusable and keep their hint
      // (aria-describedby, title), so keyboard users learn why nothing happens.
      var none = checked === 0 && !everything;
      bulkForm.querySelectorAll("[data-bulk-button]").forEach(function (b) {
        b.setAttribute("aria-disabled", none ? "true" : "false");
        if (none) {
          b.setAttribute("title", hint.textContent);
          b.setAttribute("aria-describedby", hint.id);
        } else {
          b.removeAttribute("title");
          b.removeAttribute("aria-describedby");
        }
      });
      hint.hidden = !none;
      var all = table.querySelector("input[data-select-all]");
      if (all) {
        all.checked = boxes.length > 0 && checked === boxes.length;
        all.indeterminate = checked > 0 && checked < boxes.length;
      }
    };

    table.addEventListener("change", function (event) {
      var box = event.target;
      if (!(box instanceof HTMLInputElement)) return;
      if (box.hasAttribute("data-select-all")) {
        rows().forEach(function (b) {
          b.checked = box.checked;
          if (box.checked) selected.add(b.value); else selected.delete(b.value);
        });
      } else if (box.hasAttribute("data-select-row")) {
        if (box.checked) selected.add(box.value); else selected.delete(box.value);
      }
      update();
    });

    if (allMatching) allMatching.addEventListener("change", update);

    table.addEventListener("live:refreshed", function () {
      rows().forEach(function (b) { b.checked = selected.has(b.value); });
      update();
    });
    update();
  }

  // -- the bulk action page ----------------------------------------------------------------------
  var section = document.getElementById("bulk-action");
  if (!section) return;
  var stepUrl = section.getAttribute("data-bulk-step");
  var actionId = section.getAttribute("data-bulk-id");
  var tokenInput = document.querySelector("input[name=csrfmiddlewaretoken]");
  var RETRY_MS = 2000;
  var START_WITHOUT_LIVE_MS = 3000;

  var show = function (message) {
    // From a step's answer or a live bulk.progress message: the counters at once; the
    // results table comes with the partial live.js re-fetches.
    var bar = document.getElementById("bulk-bar");
    var text = document.getElementById("bulk-count");
    if (!bar || !text) return;
    if (Number(text.getAttribute("data-done")) > message.done) return; // an older message
    var percent = message.total ? Math.floor((message.done * 100) / message.total) : 100;
    bar.value = message.done;
    text.setAttribute("data-done", message.done);
    text.textContent = message.done + "/" + message.total + " done (" + percent + " %)";
  };

  document.addEventListener("live:message", function (event) {
    var message = event.detail || {};
    if (message.type === "bulk.progress" && message.id === actionId) show(message);
  });

  var refreshResults = function () {
    if (window.IssuanceLive) window.IssuanceLive.refresh(section);
  };

  var step = function () {
    fetch(stepUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "X-Requested-With": "XMLHttpRequest",
        "X-CSRFToken": tokenInput ? tokenInput.value : "",
        Accept: "application/json",
      },
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (message) {
        show(message);
        if (message.finished) refreshResults();
        else step();
      })
      .catch(function () {
        // The server is restarting or the database is away: nothing is lost (every chunk
        // is stored); try the next chunk again shortly.
        setTimeout(step, RETRY_MS);
      });
  };

  if (stepUrl) {
    section.querySelectorAll(".bulk-continue").forEach(function (f) { f.hidden = true; });
    section.addEventListener("live:refreshed", function () {
      section.querySelectorAll(".bulk-continue").forEach(function (f) { f.hidden = true; });
    });
    // Start once the page listens for its progress (the subscription is confirmed), so the
    // first chunk's message is not missed; without live updates, after a short wait (the
    // step answers carry the progress too).
    var started = false;
    var start = function () {
      if (started) return;
      started = true;
      step();
    };
    document.addEventListener("live:message", function (event) {
      if ((event.detail || {}).type === "subscribed") start();
    });
    setTimeout(start, START_WITHOUT_LIVE_MS);
  }
})();
