// codesearch: small helpers shared by every page (no build step).
"use strict";

// "/" focuses the search box, unless the user is typing somewhere.
document.addEventListener("keydown", (e) => {
  if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  const box = document.querySelector("input[name=q]");
  if (box) { e.preventDefault(); box.focus(); box.select(); }
});

// The CSRF token of this page, for the page's own API calls that change something.
function csrfToken() {
  const m = document.querySelector("meta[name=csrf-token]");
  return m ? m.content : "";
}

// fetch() with the CSRF header and same-origin credentials.
function apiFetch(url, options = {}) {
  const headers = Object.assign({"X-CSRF-Token": csrfToken()}, options.headers || {});
  return fetch(url, Object.assign({}, options, {headers, credentials: "same-origin"}));
}
