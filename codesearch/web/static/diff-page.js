// codesearch: the commit and compare pages' diffs (native ES module, no build step). Each file is
// a <details> that folds without this script; the script adds "Expand all / Collapse all" and
// opens a folded file when a link (the list of files, or the address's #diff-N) points at it.

function openTarget() {
  const id = decodeURIComponent(location.hash.slice(1));
  const section = id ? document.getElementById(id) : null;
  const box = section && section.classList.contains("dfile") ? section.querySelector("details.dbox") : null;
  if (box && !box.open) { box.open = true; section.scrollIntoView(); }
}

function initDiff() {
  const boxes = [...document.querySelectorAll("section.dfile > details.dbox")];
  const toggles = document.querySelector(".dtoggles");
  if (toggles) {
    toggles.hidden = false;
    toggles.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-diff-toggle]");
      if (!b) return;
      const open = b.dataset.diffToggle === "open";
      for (const d of boxes) d.open = open;
    });
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initDiff);
else initDiff();
