// codesearch: the results page's preview panel (native ES module, no build step).
//
// A plain click on a result (its path, a line number, a line) opens the file beside the results:
// the lines around the match, highlighted by the server as the file page highlights them
// (GET /browse/…/-/blob/<path>?preview&line=<n>, codesearch/web/preview.py), scrolled to the
// line, the result's matches marked. The result's links stay real links: Cmd/Ctrl/Shift-click
// and middle-click open the file page as before. Escape or the close button closes the panel and
// gives the focus back to the result it came from. On a narrow screen the panel covers the
// results (the rest of the page is inert meanwhile).
//
// The fragment is HTML the server escaped; it still does not go into the page as HTML: it is
// parsed apart (DOMParser: nothing in it runs) and rebuilt from its text, keeping only the
// elements, classes and line numbers a preview has (`copySafe`).

import {el} from "./dom.js";

const KEEP_TAGS = new Set(["DIV", "SPAN", "P"]);
const KEEP_ATTRS = ["class", "data-n", "data-first", "data-total"];

// `node` rebuilt from its text and the few elements and attributes a preview has.
function copySafe(node) {
  if (node.nodeType === Node.TEXT_NODE) return document.createTextNode(node.data);
  if (node.nodeType !== Node.ELEMENT_NODE || !KEEP_TAGS.has(node.tagName)) return document.createTextNode(node.textContent || "");
  const out = document.createElement(node.tagName.toLowerCase());
  for (const a of KEEP_ATTRS) if (node.hasAttribute(a)) out.setAttribute(a, node.getAttribute(a));
  for (const c of node.childNodes) out.append(copySafe(c));
  return out;
}

// The [from, to) offsets (UTF-16 units of its text) of the <mark>s of a result line.
function markOffsets(ctext) {
  const out = [];
  let pos = 0;
  const walk = document.createTreeWalker(ctext, NodeFilter.SHOW_TEXT);
  for (let t = walk.nextNode(); t; t = walk.nextNode()) {
    if (t.parentElement.closest("mark")) {
      const last = out[out.length - 1];
      if (last && last[1] === pos) last[1] += t.data.length; else out.push([pos, pos + t.data.length]);
    }
    pos += t.data.length;
  }
  return out;
}

// Wrap the [from, to) ranges of `src`'s text in <mark>s, whatever spans the text is split into.
function markText(src, ranges) {
  const texts = [];
  const walk = document.createTreeWalker(src, NodeFilter.SHOW_TEXT);
  for (let t = walk.nextNode(); t; t = walk.nextNode()) texts.push(t);
  let pos = 0;
  for (const t of texts) {
    const start = pos, end = pos + t.data.length;
    pos = end;
    const cuts = ranges.filter(([a, b]) => a < end && b > start).map(([a, b]) => [Math.max(a, start) - start, Math.min(b, end) - start]);
    if (!cuts.length) continue;
    const parts = [];
    let at = 0;
    for (const [a, b] of cuts) {
      if (a > at) parts.push(t.data.slice(at, a));
      parts.push(el("mark", null, t.data.slice(a, b)));
      at = b;
    }
    if (at < t.data.length) parts.push(t.data.slice(at));
    t.replaceWith(...parts);
  }
}

// The preview's address for a result link (the file page's, without its anchor) and a line.
function previewUrl(href, line) {
  const u = new URL(href, location.href);
  u.hash = "";
  u.searchParams.set("preview", "1");
  u.searchParams.set("line", String(line || 1));
  return u.pathname + u.search;
}

export function initPreview(results) {
  const panel = document.getElementById("preview");
  if (!panel) return;
  const layout = panel.closest(".results-layout");
  const title = panel.querySelector(".preview-title");
  const repoLabel = panel.querySelector(".preview-repo");
  const pathLabel = panel.querySelector(".preview-path");
  const openLink = panel.querySelector(".preview-open");
  const body = panel.querySelector(".preview-body");
  const overlay = window.matchMedia("(max-width: 1000px)");
  let opener = null, asked = 0;

  function setInert(on) {
    for (const node of layout.children) if (node !== panel) node.inert = on && overlay.matches;
  }

  function close() {
    if (panel.hidden) return;
    panel.hidden = true;
    layout.classList.remove("previewing");
    setInert(false);
    body.replaceChildren();
    const back = opener && opener.isConnected ? opener : null;
    opener = null;
    if (back) back.focus();
  }

  // Open the panel on `section`'s file at `line`; `from` is what was clicked (the focus goes back
  // there), `pageHref` the file page of what was clicked (its line or the file's first match).
  async function open(section, line, from, pageHref) {
    const link = section.querySelector("a.file-path");
    const href = link && link.getAttribute("href");
    if (!href) return;
    const n = ++asked;
    opener = from && from.matches("a, button") ? from : link;
    repoLabel.textContent = section.querySelector(".file-repo")?.textContent || "";
    pathLabel.textContent = link.textContent;
    openLink.href = pageHref || href;
    body.replaceChildren(el("p", {class: "muted small"}, "Loading…"));
    panel.hidden = false;
    layout.classList.add("previewing");
    setInert(true);
    title.focus();
    let fragment = null;
    try {
      const resp = await fetch(previewUrl(href, line), {headers: {Accept: "text/html"}, credentials: "same-origin"});
      if (resp.ok) fragment = new DOMParser().parseFromString(await resp.text(), "text/html").querySelector(".preview-fragment");
    } catch (_) { /* said below */ }
    if (n !== asked || panel.hidden) return; // another result was clicked meanwhile, or the panel closed
    if (!fragment) {
      body.replaceChildren(el("p", {class: "notice"}, "This file cannot be previewed. ", el("a", {href: openLink.href}, "Open it")));
      return;
    }
    const copy = copySafe(fragment);
    // the result's own matches, marked on their lines
    for (const row of section.querySelectorAll(".cline")) {
      const ln = Number(row.querySelector(".ln")?.textContent);
      const target = copy.querySelector(`.line[data-n="${ln}"] .src`);
      const ranges = markOffsets(row.querySelector(".ctext"));
      if (target && ranges.length) markText(target, ranges);
    }
    body.replaceChildren(copy);
    const at = copy.querySelector(`.line[data-n="${line || 1}"]`);
    if (at) {
      at.classList.add("hl");
      body.scrollTop += at.getBoundingClientRect().top - body.getBoundingClientRect().top - body.clientHeight / 3;
    }
  }

  results.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const section = e.target.closest("section.file");
    if (!section || e.target.closest(".more-matches, .ext")) return;
    const link = e.target.closest("a.file-path, a.ln");
    const row = e.target.closest(".cline");
    if (!link && !row) return;
    if (!link) {
      const sel = window.getSelection();
      if (sel && String(sel).length) return; // the user is selecting text
    }
    e.preventDefault();
    const pageHref = link ? link.getAttribute("href") : row.dataset.href;
    let line = row ? Number(row.querySelector(".ln")?.textContent) : 0;
    if (!line) {
      const anchor = /#L(\d+)/.exec(pageHref || "");
      line = anchor ? Number(anchor[1]) : 1;
    }
    open(section, line, link, pageHref);
  });

  panel.querySelector(".preview-close").addEventListener("click", close);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !panel.hidden && !e.defaultPrevented) {
      e.preventDefault();
      close();
    }
  });
  overlay.addEventListener("change", () => setInert(!panel.hidden));
}
