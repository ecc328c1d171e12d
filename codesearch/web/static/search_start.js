// codesearch: the search page's results stream, asked for while the page is still being parsed.
//
// search.html inlines this script (a classic script, allowed by its hash in the page's CSP) at the
// top of <head>, after the page's search config and above the stylesheet (a script below a
// stylesheet waits for it): the request leaves before the page's files are even asked for (it used
// to leave after DOMContentLoaded and every deferred script, 100-400 ms later on this machine).
// The pending response is left on the config element, where search-page.js takes it:
// `document.getElementById("search-config").started`.
(function () {
  const node = document.getElementById("search-config");
  const meta = document.querySelector("meta[name=csrf-token]");
  const cfg = JSON.parse(node.textContent);
  const body = {query: cfg.query, matches: cfg.matches, contextLines: cfg.contextLines,
                isRegexEnabled: !!cfg.regex, isCaseSensitivityEnabled: !!cfg.case, source: "codesearch-web"};
  node.started = fetch(`${cfg.root}/api/stream_search`, {
    method: "POST", credentials: "same-origin", body: JSON.stringify(body),
    headers: {"Content-Type": "application/json", "Accept": "text/event-stream",
              "X-CSRF-Token": meta ? meta.content : ""}});
  node.started.catch(() => {}); // reported by search.js when it reads the response
})();
