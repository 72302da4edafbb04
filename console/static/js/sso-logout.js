// After signing out of the console (templates/registration/oidc_logout.html): go on to the
// sign-in provider's logout page at once, so its session ends too. The link works alone
// without scripts; a script's navigation is not held to CSP's form-action, which stops a
// redirect to the provider after the sign-out form's POST.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const link = document.getElementById("provider-logout");
  if (link instanceof HTMLAnchorElement) {
    window.location.assign(link.href);
  }
});
