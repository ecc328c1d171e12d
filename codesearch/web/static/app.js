// codesearch: what every page does (native ES module, no build step): the "/" shortcut and the
// narrow screen's table labels. The API helpers are `http.js`'s, the DOM helpers `dom.js`'s.

import {whenComplete} from "./dom.js";

// The modules a page needs only once it is complete, each named by an element's
// `data-after-load` (search assist): imported then, not with the page, so that what the page
// shows first (the results page's first result) does not wait for their fetch.
const AFTER_LOAD = /^[\w-]+\.js$/;
whenComplete(() => {
  const names = new Set([...document.querySelectorAll("[data-after-load]")].map((node) => node.dataset.afterLoad));
  for (const name of names) if (AFTER_LOAD.test(name)) import(`./${name}`);
});

// "/" focuses the search box, unless the user is typing somewhere.
document.addEventListener("keydown", (e) => {
  if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  const box = document.querySelector("input[name=q]");
  if (box) { e.preventDefault(); box.focus(); box.select(); }
});

// Cmd/Ctrl-/ opens (or closes) the query syntax reference on a page with the search box
// (_searchform.html brings it), even while typing in the box, as Sourcebot's shortcut does.
document.addEventListener("keydown", (e) => {
  if (e.key !== "/" || !(e.ctrlKey || e.metaKey) || e.altKey) return;
  const ref = document.querySelector("details.syntax");
  if (!ref) return;
  e.preventDefault();
  ref.open = !ref.open;
  if (ref.open) { ref.scrollIntoView({block: "nearest"}); ref.querySelector("summary").focus(); }
});

// The copy-path buttons of the file and tree pages (hidden until this script can run them): the
// repo-relative path to the clipboard, and "Copied" said on the button and to screen readers.
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = Object.assign(document.createElement("textarea"), {value: text});
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}
document.addEventListener("click", async (e) => {
  const b = e.target.closest && e.target.closest("button[data-copy-path]");
  if (!b) return;
  const ok = await copyText(b.dataset.copyPath);
  const said = ok ? "Copied" : "Could not copy";
  b.textContent = said;
  const status = b.nextElementSibling;
  if (status && status.getAttribute("role") === "status") status.textContent = ok ? `Copied ${b.dataset.copyPath}` : said;
  clearTimeout(b._reset);
  b._reset = setTimeout(() => { b.textContent = "Copy path"; if (status) status.textContent = ""; }, 2000);
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
  for (const b of document.querySelectorAll("button[data-copy-path][hidden]")) b.hidden = false;
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
