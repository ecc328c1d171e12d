// codesearch: "Show N more matches" on the results page (native ES module, no build step).
//
// The server writes, under a file that has more matches than the page shows, a line "N more
// matches in this file" linking to the file page (what works without JavaScript, and before this
// module runs). Once search-page.js adopts the file, `addExpander` turns that line into a button,
// as Sourcebot's results show it: pressed, it fetches the file's matches (GET /search/file?…,
// codesearch/web/more_matches.py: the page's own search narrowed to the file, bounded, highlighted
// as the first ones) and shows them in place of the first ones, in the same list, without leaving
// the page; the focus moves to the first match that was not shown before. Pressed again ("Show
// fewer matches"), the file shows its first matches again and the focus stays on the button.
//
// The answer is HTML the server escaped; it still does not go into the page as HTML: it is parsed
// apart (DOMParser: nothing in it runs) and rebuilt from its text, keeping only the elements,
// classes and links a result's lines have (`copySafe`).

import {el, plural, root} from "./dom.js";

const KEEP_TAGS = new Set(["DIV", "SPAN", "A", "CODE", "MARK", "P"]);
const KEEP_ATTRS = ["class"];
const LINK_ATTRS = ["href", "data-href"]; // kept when they point at a file page of this site

function fileLink(value) {
  return typeof value === "string" && value.startsWith(`${root()}/browse/`) ? value : null;
}

// `node` rebuilt from its text and the few elements and attributes a result's lines have.
function copySafe(node) {
  if (node.nodeType === Node.TEXT_NODE) return document.createTextNode(node.data);
  if (node.nodeType !== Node.ELEMENT_NODE || !KEEP_TAGS.has(node.tagName)) return document.createTextNode(node.textContent || "");
  const out = document.createElement(node.tagName.toLowerCase());
  for (const a of KEEP_ATTRS) if (node.hasAttribute(a)) out.setAttribute(a, node.getAttribute(a));
  for (const a of LINK_ATTRS) {
    const v = fileLink(node.getAttribute(a));
    if (v) out.setAttribute(a, v);
  }
  for (const c of node.childNodes) out.append(copySafe(c));
  return out;
}

const hitLines = (chunks) => new Set(chunks.flatMap((c) => [...c.querySelectorAll(".cline.hit .ln")].map((a) => a.textContent)));

// What each expandable file holds: its first chunks, and once fetched, all of them.
const files = new WeakMap();

// The server's "N more matches in this file" of `section`, as a button (the link is kept for an
// answer that fails).
export function addExpander(section) {
  const box = section.querySelector(":scope > .more-matches[data-expand]");
  const count = box ? Number(box.dataset.moreShown) : 0;
  if (!box || !count || files.has(section)) return;
  const link = box.querySelector("a");
  const button = el("button", {type: "button", class: "link more-toggle", "aria-expanded": "false"});
  const status = el("span", {class: "sr-only", role: "status"});
  files.set(section, {box, link, button, status, count, first: null, all: null, rest: null, busy: false});
  label(files.get(section), false);
  box.replaceChildren(button, status);
}

function label(f, expanded) {
  f.button.textContent = expanded ? "Show fewer matches" : `Show ${plural(f.count, "more match", "more matches")}`;
  f.button.setAttribute("aria-expanded", expanded ? "true" : "false");
}

const chunksOf = (section) => [...section.querySelectorAll(":scope > .chunk")];

function show(section, f, chunks) {
  for (const c of chunksOf(section)) c.remove();
  f.box.before(...chunks);
}

// The file's matches, fetched once: its chunks and, when it has still more, the line that says so.
async function fetchAll(f) {
  const resp = await fetch(f.box.dataset.expand, {headers: {Accept: "text/html"}, credentials: "same-origin"});
  if (!resp.ok) throw new Error(`${resp.status}`);
  const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
  const answer = doc.querySelector("section.file");
  if (!answer) throw new Error("no file in the answer");
  const chunks = [...answer.querySelectorAll(":scope > .chunk")].map(copySafe);
  const more = answer.querySelector(":scope > .more-matches a");
  const href = more && fileLink(more.getAttribute("href"));
  f.rest = more ? el("p", {class: "more-matches more-rest"}, href ? el("a", {href}, more.textContent) : more.textContent) : null;
  return chunks;
}

async function toggle(section, f) {
  if (f.busy) return;
  if (f.button.getAttribute("aria-expanded") === "true") { // back to the first matches
    show(section, f, f.first);
    if (f.rest) f.rest.remove();
    label(f, false);
    f.status.textContent = "";
    f.button.scrollIntoView({block: "nearest"});
    return;
  }
  f.first = f.first || chunksOf(section);
  if (!f.all) {
    f.busy = true;
    section.setAttribute("aria-busy", "true");
    f.button.textContent = "Loading…";
    try {
      f.all = await fetchAll(f);
    } catch (_) {
      label(f, false);
      f.status.textContent = "";
      f.box.replaceChildren(f.button, " Could not load them: ", f.link, f.status);
      return;
    } finally {
      f.busy = false;
      section.removeAttribute("aria-busy");
    }
  }
  const before = hitLines(f.first);
  show(section, f, f.all);
  if (f.rest) f.box.after(f.rest);
  label(f, true);
  const shown = section.querySelectorAll(":scope > .chunk .cline.hit").length;
  f.status.textContent = `Showing ${plural(shown, "matching line")} of this file`;
  const next = [...section.querySelectorAll(":scope > .chunk .cline.hit .ln")].find((a) => !before.has(a.textContent));
  if (next) next.focus();
}

// Presses of the buttons of `results`' files (delegated: files are written while the page loads).
export function initMoreMatches(results) {
  results.addEventListener("click", (e) => {
    const button = e.target.closest(".more-matches > button.more-toggle");
    const section = button && button.closest("section.file");
    const f = section && files.get(section);
    if (f) toggle(section, f);
  });
}
