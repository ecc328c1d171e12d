// codesearch: the search form's regex and case toggles (native ES module, no build step).

// Flipping regex or case re-runs the search (when there is one): the URL holds both.
export function rerunOnToggle() {
  for (const form of document.querySelectorAll("form.searchform")) {
    for (const box of form.querySelectorAll(".toggle input[type=checkbox]")) {
      box.addEventListener("change", () => {
        const q = form.querySelector("input[name=q]");
        if (q && q.value.trim()) form.requestSubmit();
      });
    }
  }
}
