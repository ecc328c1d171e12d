// codesearch: the repositories page's Re-index buttons (native ES module, no build step).

import {badge, el, root} from "./dom.js";
import {apiFetch, errorMessage} from "./http.js";

function initRepos() {
  for (const form of document.querySelectorAll("form.reindex")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      const row = form.closest("tr");
      const resp = await apiFetch(`${root()}/api/repos/${encodeURIComponent(form.dataset.repoId)}/reindex`, {method: "POST"});
      if (resp.status === 202) {
        row.querySelector(".status-cell").replaceChildren(badge("queued", "PENDING"));
        button.textContent = "Queued";
      } else {
        row.querySelector(".errtext").replaceChildren(el("span", {class: "error small"}, await errorMessage(resp)));
        button.disabled = false;
      }
    });
  }
}

initRepos();
