// codesearch: the pages' calls to the HTTP API (native ES module, no build step).

// The CSRF token of this page, for the page's own API calls that change something.
export function csrfToken() {
  const m = document.querySelector("meta[name=csrf-token]");
  return m ? m.content : "";
}

// fetch() with the CSRF header and same-origin credentials.
export function apiFetch(url, options = {}) {
  const headers = Object.assign({"X-CSRF-Token": csrfToken()}, options.headers || {});
  return fetch(url, Object.assign({}, options, {headers, credentials: "same-origin"}));
}

// The message of an API error: the body's `message` (the API's JSON errors), else the status.
export async function errorMessage(resp) {
  try {
    const body = await resp.json();
    if (body && body.message) return String(body.message);
  } catch (_) { /* not JSON */ }
  return `${resp.status} ${resp.statusText}`;
}

// GET `url` as JSON: {body, total} (total: the X-Total-Count header); an Error with the API's
// message and `status` when the answer is not 2xx.
export async function getJSON(url) {
  const resp = await apiFetch(url, {headers: {"Accept": "application/json"}});
  if (!resp.ok) {
    const err = new Error(await errorMessage(resp));
    err.status = resp.status;
    throw err;
  }
  return {body: await resp.json(), total: parseInt(resp.headers.get("X-Total-Count") || "0", 10)};
}
