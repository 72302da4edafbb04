// The issuer form (console-issuers): show the parts of the chosen kind, CA preset and DNS
// provider, and read the CA's directory (profiles, terms) without reloading the page.
// Without JavaScript every part is shown and "Load profiles and terms" submits the form.
"use strict";

(function () {
  var form = document.getElementById("issuer-form");
  if (!form) return;

  function show(el, visible) {
    el.hidden = !visible;
  }

  function syncKind() {
    var kind = form.elements.kind.value;
    form.querySelectorAll("[data-kind]").forEach(function (el) {
      show(el, el.getAttribute("data-kind").split(" ").indexOf(kind) >= 0);
    });
  }

  function syncPreset() {
    var option = form.elements.preset.selectedOptions[0];
    var custom = form.elements.preset.value === "custom";
    if (!custom && option) form.elements.server.value = option.getAttribute("data-url");
    form.elements.server.readOnly = !custom;
    form.querySelectorAll("[data-custom-only]").forEach(function (el) { show(el, custom); });
  }

  function syncSolver(solver) {
    var type = solver.querySelector("[data-solver-type]").value;
    var provider = solver.querySelector("[data-solver-provider]").value;
    show(solver.querySelector(".dns01-only"), type === "dns01");
    solver.querySelectorAll(".provider-fields").forEach(function (el) {
      show(el, el.getAttribute("data-provider") === provider);
    });
  }

  // Only the answer to the latest read is shown: an earlier one (a preset picked and left
  // at once, a CA that is slow to answer) may arrive after it.
  var latest = 0;

  function loadDirectory() {
    var seq = ++latest;
    var target = document.getElementById("acme-directory");
    var data = new FormData();
    ["csrfmiddlewaretoken", "preset", "server", "ca_bundle", "profile"].forEach(function (name) {
      var el = form.elements[name];
      if (el) data.append(name, el.value);
    });
    target.setAttribute("aria-busy", "true");
    fetch(form.getAttribute("data-directory-url"), {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-Requested-With": "fetch" },
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        if (seq !== latest) return;
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#acme-directory");
        if (fresh) document.getElementById("acme-directory").replaceWith(fresh);
      })
      .catch(function (error) {
        if (seq !== latest) return;
        target = document.getElementById("acme-directory");
        target.removeAttribute("aria-busy");
        var p = document.createElement("p");
        p.className = "message message-error";
        p.setAttribute("role", "alert");
        p.textContent = "Could not read the directory: " + error.message;
        target.prepend(p);
      });
  }

  form.elements.kind.addEventListener("change", syncKind);
  form.elements.preset.addEventListener("change", function () {
    syncPreset();
    if (form.elements.preset.value !== "custom") loadDirectory();
  });
  form.elements.server.addEventListener("change", loadDirectory);
  document.getElementById("load-directory").addEventListener("click", function (event) {
    event.preventDefault();
    loadDirectory();
  });
  form.querySelectorAll(".solver").forEach(function (solver) {
    solver.addEventListener("change", function () { syncSolver(solver); });
    syncSolver(solver);
  });
  syncKind();
  syncPreset();
})();
