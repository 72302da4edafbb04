// The cluster form (templates/console/clusters/form.html): once a kubeconfig is pasted or a
// file chosen, ask the server which contexts it has (nothing is stored) and offer them in
// the context field's list. Without JavaScript the form works the same: a wrong or missing
// context is reported next to the field, with the contexts the kubeconfig has.
(function () {
  "use strict";

  var form = document.getElementById("cluster-form");
  if (!form) return;
  var textarea = document.getElementById("id_kubeconfig");
  var fileInput = document.getElementById("id_kubeconfig_file");
  var datalist = document.getElementById("context-options");
  var offer = document.getElementById("context-offer");
  var token = form.querySelector("input[name=csrfmiddlewaretoken]");
  var url = form.getAttribute("data-contexts-url");

  function show(contexts, error) {
    datalist.textContent = "";
    (contexts || []).forEach(function (name) {
      var option = document.createElement("option");
      option.value = name;
      datalist.appendChild(option);
    });
    // textContent: names come from the pasted file and are never parsed as HTML.
    offer.textContent = error
      ? "Kubeconfig: " + error
      : contexts && contexts.length
        ? "The kubeconfig has: " + contexts.join(", ")
        : "";
  }

  function lookup(text) {
    if (!text.trim()) {
      show([], "");
      return;
    }
    var body = new FormData();
    body.append("kubeconfig", text);
    fetch(url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "", "X-Requested-With": "XMLHttpRequest" },
    })
      .then(function (response) {
        return response.json();
      })
      .then(function (answer) {
        show(answer.contexts, answer.error || "");
      })
      .catch(function () {});
  }

  textarea.addEventListener("change", function () {
    lookup(textarea.value);
  });
  fileInput.addEventListener("change", function () {
    var file = fileInput.files && fileInput.files[0];
    if (!file) return;
    var reader = new FileReader();
    reader.onload = function () {
      lookup(String(reader.result || ""));
    };
    reader.readAsText(file);
  });
})();
