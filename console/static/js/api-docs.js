// The API reference (/api/docs/): what Swagger UI's markup needs to be one accessible page
// inside the console. Swagger UI itself is started by drf-spectacular's script (?script).
"use strict";

(function () {
  var root = document.getElementById("swagger-ui");
  if (!root) return;

  // Swagger UI's layout wraps the operations in a <main>, inside the console's own <main>:
  // two main landmarks, one nested (axe: landmark-no-duplicate-main). Named as the region it
  // is; kept so while Swagger UI re-renders (it re-creates the layout when the schema is
  // loaded again).
  function demoteNestedMain() {
    root.querySelectorAll("main:not([role])").forEach(function (el) {
      el.setAttribute("role", "region");
      el.setAttribute("aria-label", "Operations");
    });
  }

  new MutationObserver(demoteNestedMain).observe(root, { childList: true, subtree: true });
  demoteNestedMain();
})();
