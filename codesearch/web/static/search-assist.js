// codesearch: search assist (templates/_search_assist.html, on the pages of a service with a
// language model configured). POST /api/search_assist turns the
// description into a query with the configured language model; the query is put in the search
// box (not run), with what our parser says of it: a query that does not parse says why, so the
// user can fix it first. Text from the server is set as text only.
import {apiFetch, errorMessage} from "./http.js";
import {root, whenComplete} from "./dom.js";

whenComplete(async () => {
  const box = document.getElementById("search-assist");
  const form = document.getElementById("sa-form");
  if (!box || !form) return;
  const prompt = document.getElementById("sa-prompt");
  const go = document.getElementById("sa-go");
  const out = document.getElementById("sa-result");
  box.hidden = false;  // the server renders it only where a language model is configured

  function say(text, isError) {
    out.textContent = text;
    out.classList.toggle("sa-error", Boolean(isError));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    go.disabled = true;
    say("Generating a query…");
    try {
      const r = await apiFetch(root() + "/api/search_assist", {
        method: "POST", headers: {"Content-Type": "application/json", "Accept": "application/json"},
        body: JSON.stringify({prompt: text}),
      });
      if (!r.ok) return say("Could not generate a query: " + await errorMessage(r), true);
      const body = await r.json();
      const q = document.querySelector("form.searchform input[name=q]");
      if (q) {
        q.value = body.query;
        q.dispatchEvent(new Event("input", {bubbles: true}));
        q.focus();
      }
      if (body.isValid) say("Query ready in the search box: edit it if needed, then search.");
      else say(`The generated query does not parse: ${body.error} Fix it in the search box before searching.`, true);
    } catch (err) {
      say("Could not generate a query: " + err.message, true);
    } finally {
      go.disabled = false;
    }
  });
});
