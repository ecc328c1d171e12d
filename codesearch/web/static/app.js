// codesearch: what every page does (native ES module, no build step): the "/" shortcut and the
// narrow screen's table labels. The API helpers are `http.js`'s, the DOM helpers `dom.js`'s.

import {whenComplete} from "./dom.js";

// "/" focuses the search box, unless the user is typing somewhere.
document.addEventListener("keydown", (e) => {
  if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  const box = document.querySelector("input[name=q]");
  if (box) { e.preventDefault(); box.focus(); box.select(); }
});

// Narrow screens show tables one block per row (style.css): each cell is labelled with its
// column's header (data-label), for the tables of the page and those its scripts fill later.
function labelTableCells(root) {
  for (const table of (root || document).querySelectorAll("main table")) {
    const heads = [...table.querySelectorAll(":scope > thead th")].map((th) => th.textContent.trim());
    if (!heads.length) continue;
    for (const row of table.querySelectorAll(":scope > tbody > tr")) {
      [...row.children].forEach((cell, i) => {
        if (!cell.hasAttribute("colspan") && heads[i] !== undefined && cell.dataset.label !== heads[i]) cell.dataset.label = heads[i];
      });
    }
  }
}
// Loaded `async` (base.html): it may run before the page is complete (the results page is written
// while its search runs) or after.
whenComplete(() => {
  labelTableCells();
  const main = document.querySelector("main");
  if (!main) return;
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; labelTableCells(); });
  }).observe(main, {childList: true, subtree: true});
});
