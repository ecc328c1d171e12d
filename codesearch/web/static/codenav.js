// codesearch: code navigation on the file page (no build step).
//
// - identifiers of the highlighted code are symbols: click or Enter goes to the definition (one:
//   jump; several: a panel), "r" or the tooltip's button lists the references (a panel grouped by
//   file); hovering or focusing one shows its definition line in a tooltip; Escape closes;
// - the terms of ?q= (carried by search result links) are marked in the code;
// - a file-tree sidebar, its directories loaded when opened (GET /api/tree);
// - a file finder ("t" or Ctrl/Cmd-P) that fuzzy-filters the repository's paths;
// - a branch and tag selector that opens the file at another ref, or says it is not there.
//
// Everything from the server or the repository is put in the page as text (textContent, DOM
// APIs), never parsed as HTML. Definitions and references come from POST /api/find_definitions
// and /api/find_references with the visitor's session: the permission rule of those routes holds.
import {apiFetch} from "./http.js";

(function () {
  const cfgNode = document.getElementById("codenav-config");
  if (!cfgNode) return;
  const cfg = JSON.parse(cfgNode.textContent);
  const root = cfg.root || "";

  // el("a", {href: "...", class: "x"}, "text", child, ...): strings become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function encPath(p) { return p.split("/").map(encodeURIComponent).join("/"); }

  // This service's page of a file or directory at `rev` (as codesearch.web.pages_search.browse_url).
  function browseUrl(rev, kind, path) {
    return `${root}/browse/${encPath(cfg.repo)}@${encodeURIComponent(rev)}/-/${kind}/${encPath(path)}`;
  }

  // A result's page on this origin: the /browse/ part of its webUrl (built from the public URL).
  function localUrl(webUrl) {
    if (typeof webUrl !== "string") return null;
    const i = webUrl.indexOf("/browse/");
    return i >= 0 ? root + webUrl.slice(i) : null;
  }

  async function postJson(url, body) {
    const r = await apiFetch(root + url, {method: "POST", body: JSON.stringify(body),
                                          headers: {"Content-Type": "application/json"}});
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.message || `HTTP ${r.status}`);
    return data;
  }

  async function getJson(url) {
    const r = await apiFetch(root + url);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) { const e = new Error(data.message || `HTTP ${r.status}`); e.status = r.status; throw e; }
    return data;
  }

  function typing(e) {
    const t = e.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }

  const code = document.getElementById("code");

  // ------------------------------------------------------------------ searched terms

  // Marks [start, end) character ranges of one line's text, across the token spans it is split in
  // (the pieces of one range share data-term="<id>", ids counted from `firstId`).
  function markRanges(src, ranges, cls, firstId) {
    if (!ranges.length) return;
    const walker = document.createTreeWalker(src, NodeFilter.SHOW_TEXT);
    const nodes = [];
    let pos = 0;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push([n, pos]); pos += n.data.length; }
    for (let k = ranges.length - 1; k >= 0; k--) {
      const [a, b] = ranges[k];
      for (let i = nodes.length - 1; i >= 0; i--) {
        const [node, at] = nodes[i];
        const s = Math.max(a, at), e = Math.min(b, at + node.data.length);
        if (s >= e) continue;
        const mid = node.splitText(s - at);
        mid.splitText(e - s);
        const m = el("mark", {class: cls, "data-term": firstId + k});
        mid.replaceWith(m);
        m.append(mid);
      }
    }
  }

  function termRegexes() {
    const out = [];
    for (const t of cfg.highlight || []) {
      let src = t.pattern, flags = "g";
      if (t.regex) {
        if (src.startsWith("(?i)")) { src = src.slice(4); flags += "i"; }
      } else {
        src = src.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      }
      if (!t.case) flags += flags.includes("i") ? "" : "i";
      try { out.push(new RegExp(src, flags + "u")); } catch (_) {
        try { out.push(new RegExp(src, flags)); } catch (_) { /* a regex JavaScript cannot read: not marked */ }
      }
    }
    return out;
  }

  function highlightTerms() {
    const rxs = termRegexes();
    if (!code || !rxs.length) return;
    let first = null, count = 0;
    for (const src of code.querySelectorAll(".line .src")) {
      const text = src.textContent;
      const ranges = [];
      for (const rx of rxs) {
        rx.lastIndex = 0;
        for (let m = rx.exec(text); m; m = rx.exec(text)) {
          if (m[0].length === 0) { rx.lastIndex++; continue; }
          ranges.push([m.index, m.index + m[0].length]);
          if (ranges.length > 200) break;
        }
      }
      if (!ranges.length) continue;
      ranges.sort((x, y) => x[0] - y[0]);
      const merged = [];
      for (const r of ranges) {
        const last = merged[merged.length - 1];
        if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]); else merged.push(r.slice());
      }
      markRanges(src, merged, "cn-term", count);
      count += merged.length;
      if (!first) first = src;
      if (count > 5000) break;
    }
    if (first && !location.hash) first.scrollIntoView({block: "center"});
  }

  // ------------------------------------------------------------------ symbols

  // Pygments classes of names: plain, attribute, class, constant, exception, function, magic
  // function, property, label, other, variable (and its kinds). Builtins and keywords are not symbols.
  const NAME_CLASSES = ["n", "na", "nc", "no", "ne", "nf", "fm", "py", "nl", "nx", "nv", "vc", "vg", "vi", "vm", "nd"];
  const IDENT = /^[A-Za-z_$][\w$]*$/;
  const MAX_SYMBOL_TOKENS = 20000;
  const defsCache = new Map();
  const tip = document.getElementById("cn-tip");
  const panel = document.getElementById("cn-panel");
  const panelTitle = document.getElementById("cn-panel-title");
  const panelBody = document.getElementById("cn-panel-body");
  let tipFor = null, hoverTimer = null, lastFocus = null;

  function symbolName(tok) {
    let t = tok.textContent;
    if (tok.classList.contains("nd")) t = t.replace(/^@/, "");
    return IDENT.test(t) ? t : null;
  }

  function markSymbols() {
    if (!code) return;
    const sel = NAME_CLASSES.map((c) => `.src .${c}`).join(",");
    let n = 0;
    for (const tok of code.querySelectorAll(sel)) {
      const name = symbolName(tok);
      if (!name) continue;
      tok.classList.add("cn-sym");
      tok.dataset.sym = name;
      tok.tabIndex = 0;
      tok.setAttribute("role", "button");
      tok.setAttribute("aria-label", `${name}: Enter goes to the definition, R lists references`);
      if (++n >= MAX_SYMBOL_TOKENS) break;
    }
  }

  function definitions(name) {
    if (!defsCache.has(name)) {
      const base = {symbolName: name};
      if (cfg.language) base.language = cfg.language;
      // this repository first; when it defines nothing of that name, every repository the visitor may see
      const p = postJson("/api/find_definitions", {...base, repoName: cfg.repo})
        .then((r) => (r.files.length ? r : postJson("/api/find_definitions", base)));
      defsCache.set(name, p);
      p.catch(() => defsCache.delete(name));
    }
    return defsCache.get(name);
  }

  function flat(resp) {
    const out = [];
    for (const f of resp.files || []) {
      for (const m of f.matches || []) out.push({file: f, match: m, line: m.range.start.lineNumber});
    }
    return out;
  }

  function hitUrl(f, line) {
    const u = localUrl(f.webUrl);
    return u ? `${u}#L${line}` : null;
  }

  function isHere(f) {
    return f.repository === cfg.repo && f.fileName === cfg.path;
  }

  // One line of code with the match marked, as text.
  function codeLine(m) {
    const text = m.lineContent || "";
    const a = Math.max(0, m.range.start.column - 1);
    const b = m.range.end.lineNumber === m.range.start.lineNumber ? Math.max(a, m.range.end.column - 1) : text.length;
    return el("code", {class: "cn-code"}, text.slice(0, a), el("mark", null, text.slice(a, b)), text.slice(b));
  }

  function go(f, line) {
    if (isHere(f)) {
      location.hash = `#L${line}`;
      hideTip();
      return;
    }
    const u = hitUrl(f, line);
    if (u) location.href = u;
  }

  function showTip(tok) {
    const name = tok.dataset.sym;
    tipFor = tok;
    tip.replaceChildren(el("div", {class: "cn-tip-head"}, el("strong", null, name)), el("div", {class: "muted small"}, "Looking up the definition…"));
    tip.hidden = false;
    placeTip(tok);
    tok.setAttribute("aria-describedby", "cn-tip");
    definitions(name).then((resp) => {
      if (tipFor !== tok) return;
      const hits = flat(resp);
      const body = [];
      if (!hits.length) body.push(el("div", {class: "muted small"}, "No definition found in the index."));
      for (const h of hits.slice(0, 3)) {
        body.push(el("div", {class: "cn-tip-def"},
          el("a", {href: hitUrl(h.file, h.line), class: "small"}, `${h.file.fileName}:${h.line}`),
          codeLine(h.match)));
      }
      if (hits.length > 3) body.push(el("div", {class: "muted small"}, `and ${hits.length - 3} more definitions`));
      const goBtn = el("button", {type: "button", class: "cn-btn", "data-act": "def"}, "Go to definition");
      const refBtn = el("button", {type: "button", class: "cn-btn", "data-act": "refs"}, "Find references");
      goBtn.disabled = !hits.length;
      goBtn.addEventListener("click", () => goToDefinition(name));
      refBtn.addEventListener("click", () => findReferences(name));
      tip.replaceChildren(el("div", {class: "cn-tip-head"}, el("strong", null, name)), ...body,
        el("div", {class: "cn-tip-actions"}, goBtn, refBtn, el("span", {class: "muted small"}, "Enter · R · Esc")));
      placeTip(tok);
    }).catch((e) => {
      if (tipFor === tok) tip.replaceChildren(el("div", {class: "error small"}, `Could not look up ${name}: ${e.message}`));
    });
  }

  function placeTip(tok) {
    const r = tok.getBoundingClientRect();
    const w = Math.min(tip.offsetWidth || 320, document.documentElement.clientWidth - 16);
    const left = Math.max(8, Math.min(r.left, document.documentElement.clientWidth - w - 8));
    tip.style.left = `${left + window.scrollX}px`;
    tip.style.top = `${r.bottom + window.scrollY + 4}px`;
  }

  function hideTip() {
    clearTimeout(hoverTimer);
    if (tipFor) tipFor.removeAttribute("aria-describedby");
    tipFor = null;
    tip.hidden = true;
  }

  function openPanel(title, children) {
    panelTitle.textContent = title;
    panelBody.replaceChildren(...children);
    if (panel.hidden) lastFocus = document.activeElement;
    panel.hidden = false;
    document.body.classList.add("cn-panel-open");
    panel.focus({preventScroll: true});
  }

  function closePanel() {
    if (panel.hidden) return;
    panel.hidden = true;
    document.body.classList.remove("cn-panel-open");
    if (lastFocus && document.contains(lastFocus)) lastFocus.focus({preventScroll: true});
  }

  // Results grouped by file: the file, then each line as a link to file#Ln.
  function groups(resp) {
    const out = [];
    for (const f of resp.files || []) {
      const list = el("ul", {class: "cn-lines"});
      for (const m of f.matches || []) {
        const line = m.range.start.lineNumber;
        const a = el("a", {href: hitUrl(f, line), class: "cn-hit"}, el("span", {class: "cn-ln"}, String(line)), codeLine(m));
        if (isHere(f)) a.addEventListener("click", (e) => { e.preventDefault(); go(f, line); });
        list.append(el("li", null, a));
      }
      out.push(el("section", {class: "cn-group"},
        el("h3", {class: "cn-file"}, f.repository === cfg.repo ? "" : el("span", {class: "muted"}, `${f.repository} · `),
          f.fileName, el("span", {class: "muted small"}, ` (${(f.matches || []).length})`)),
        list));
    }
    return out;
  }

  function goToDefinition(name) {
    hideTip();
    definitions(name).then((resp) => {
      const hits = flat(resp);
      if (hits.length === 1) return go(hits[0].file, hits[0].line);
      if (!hits.length) return openPanel(`No definition of ${name}`, [el("p", {class: "muted"}, "The index has no definition of this name (definitions come from ctags). Find references lists where it is used."), refsButton(name)]);
      openPanel(`${hits.length} definitions of ${name}`, groups(resp));
    }).catch((e) => openPanel(`Definitions of ${name}`, [el("p", {class: "error"}, e.message)]));
  }

  function refsButton(name) {
    const b = el("button", {type: "button", class: "cn-btn"}, `Find references to ${name}`);
    b.addEventListener("click", () => findReferences(name));
    return b;
  }

  function findReferences(name) {
    hideTip();
    openPanel(`References to ${name}`, [el("p", {class: "muted"}, "Searching…")]);
    const body = {symbolName: name, repoName: cfg.repo};
    if (cfg.language) body.language = cfg.language;
    postJson("/api/find_references", body).then((resp) => {
      const n = resp.stats ? resp.stats.matchCount : flat(resp).length;
      const files = (resp.files || []).length;
      const title = `References to ${name}: ${n} in ${files} file${files === 1 ? "" : "s"}` + (resp.isSearchExhaustive === false ? " (first 1000)" : "");
      openPanel(title, files ? groups(resp) : [el("p", {class: "muted"}, "No references found in this repository.")]);
    }).catch((e) => openPanel(`References to ${name}`, [el("p", {class: "error"}, e.message)]));
  }

  function initSymbols() {
    if (!code) return;
    markSymbols();
    code.addEventListener("click", (e) => {
      const tok = e.target.closest(".cn-sym");
      if (!tok || window.getSelection().toString()) return;
      goToDefinition(tok.dataset.sym);
    });
    code.addEventListener("keydown", (e) => {
      const tok = e.target.closest && e.target.closest(".cn-sym");
      if (!tok) return;
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); goToDefinition(tok.dataset.sym); }
      else if ((e.key === "r" || e.key === "R") && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); findReferences(tok.dataset.sym); }
    });
    code.addEventListener("mouseover", (e) => {
      const tok = e.target.closest(".cn-sym");
      if (!tok || tok === tipFor) return;
      clearTimeout(hoverTimer);
      hoverTimer = setTimeout(() => showTip(tok), 350);
    });
    code.addEventListener("mouseout", (e) => {
      const tok = e.target.closest(".cn-sym");
      if (tok && !tok.contains(e.relatedTarget)) clearTimeout(hoverTimer);
    });
    code.addEventListener("focusin", (e) => {
      const tok = e.target.closest(".cn-sym");
      if (tok) showTip(tok);
    });
    document.addEventListener("click", (e) => {
      if (!tip.hidden && !tip.contains(e.target) && !(e.target.closest && e.target.closest(".cn-sym"))) hideTip();
    });
    document.getElementById("cn-panel-close").addEventListener("click", closePanel);
  }

  // ------------------------------------------------------------------ file tree

  const tree = document.getElementById("cn-tree");
  const treeRoot = document.getElementById("cn-tree-root");
  const treeToggle = document.getElementById("cn-tree-toggle");
  const WIDE = window.matchMedia("(min-width: 1100px)");
  const TREE_KEY = "codesearch.tree";

  async function loadDir(path, list) {
    list.replaceChildren(el("li", {class: "muted small"}, "Loading…"));
    try {
      const q = new URLSearchParams({repo: cfg.repo, ref: cfg.ref, path, depth: "1", maxEntries: "2000"});
      const resp = await getJson(`/api/tree?${q}`);
      const items = resp.entries.map((e) => treeItem(e));
      if (resp.truncated) items.push(el("li", {class: "muted small"}, "(more entries not shown)"));
      list.replaceChildren(...items);
    } catch (e) {
      list.replaceChildren(el("li", {class: "error small"}, e.message));
    }
  }

  function treeItem(e) {
    if (e.type === "tree") {
      const sub = el("ul", {class: "cn-tree-list"});
      sub.hidden = true;
      const btn = el("button", {type: "button", class: "cn-dir", "aria-expanded": "false", "data-path": e.path}, e.name);
      btn.addEventListener("click", () => toggleDir(btn, sub));
      return el("li", null, btn, sub);
    }
    const here = e.path === cfg.path;
    return el("li", null, el("a", {href: browseUrl(cfg.rev, "blob", e.path), class: here ? "cn-file-link cn-here" : "cn-file-link",
                                                 "aria-current": here ? "page" : null, "data-path": e.path}, e.name));
  }

  async function toggleDir(btn, sub) {
    const open = btn.getAttribute("aria-expanded") !== "true";
    btn.setAttribute("aria-expanded", String(open));
    sub.hidden = !open;
    if (open && !sub.dataset.loaded) { sub.dataset.loaded = "1"; await loadDir(btn.dataset.path, sub); }
  }

  let treeLoaded = false;
  async function openTree() {
    tree.hidden = false;
    treeToggle.setAttribute("aria-expanded", "true");
    document.body.classList.add("cn-tree-open");
    if (treeLoaded) return;
    treeLoaded = true;
    await loadDir("", treeRoot);
    // open the directories down to this file
    const parts = cfg.path.split("/").slice(0, -1);
    let list = treeRoot;
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i + 1).join("/");
      const btn = Array.from(list.querySelectorAll(":scope > li > button.cn-dir")).find((b) => b.dataset.path === dir);
      if (!btn) break;
      const sub = btn.nextElementSibling;
      await toggleDir(btn, sub);
      list = sub;
    }
    const here = tree.querySelector(".cn-here");
    if (here) here.scrollIntoView({block: "nearest"});
  }

  function closeTree() {
    tree.hidden = true;
    treeToggle.setAttribute("aria-expanded", "false");
    document.body.classList.remove("cn-tree-open");
  }

  function initTree() {
    treeToggle.addEventListener("click", () => {
      const open = tree.hidden;
      if (open) openTree(); else closeTree();
      if (WIDE.matches) try { localStorage.setItem(TREE_KEY, open ? "open" : "closed"); } catch (_) { /* private mode */ }
    });
    document.getElementById("cn-tree-close").addEventListener("click", () => {
      closeTree();
      if (WIDE.matches) try { localStorage.setItem(TREE_KEY, "closed"); } catch (_) { /* private mode */ }
      treeToggle.focus();
    });
    let saved = null;
    try { saved = localStorage.getItem(TREE_KEY); } catch (_) { /* private mode */ }
    if (WIDE.matches && saved !== "closed") openTree();
  }

  // ------------------------------------------------------------------ file finder

  const finder = document.getElementById("cn-finder");
  const finderInput = document.getElementById("cn-finder-input");
  const finderList = document.getElementById("cn-finder-list");
  const finderNote = document.getElementById("cn-finder-note");
  const MAX_SHOWN = 50;
  let paths = null, pathsTruncated = false, shown = [], active = 0, finderReturn = null;

  // Fuzzy score of `path` for `q` (lower case): the characters of q in order; consecutive runs,
  // word starts and the file name score higher. null when they are not all there.
  function score(path, q) {
    const p = path.toLowerCase();
    const nameAt = p.lastIndexOf("/") + 1;
    let s = 0, i = 0, prev = -2;
    for (const ch of q) {
      const j = p.indexOf(ch, i);
      if (j < 0) return null;
      s += 1;
      if (j === prev + 1) s += 3;
      if (j === 0 || "/_-. ".includes(p[j - 1])) s += 2;
      if (j >= nameAt) s += 1;
      prev = j;
      i = j + 1;
    }
    return s - path.length * 0.01;
  }

  function renderFinder() {
    const q = finderInput.value.trim().toLowerCase();
    let list = paths || [];
    if (q) {
      list = list.map((p) => [p, score(p, q)]).filter((x) => x[1] !== null).sort((a, b) => b[1] - a[1]).map((x) => x[0]);
    }
    shown = list.slice(0, MAX_SHOWN);
    active = Math.min(active, Math.max(0, shown.length - 1));
    finderList.replaceChildren(...shown.map((p, i) => {
      const a = el("a", {href: browseUrl(cfg.rev, "blob", p), id: `cn-f-${i}`, role: "option", "aria-selected": String(i === active),
                         class: i === active ? "active" : null}, p);
      return el("li", {role: "none"}, a);
    }));
    finderInput.setAttribute("aria-activedescendant", shown.length ? `cn-f-${active}` : "");
    const total = list.length;
    finderNote.textContent = paths === null ? "Loading the file list…"
      : `${total} file${total === 1 ? "" : "s"}${total > MAX_SHOWN ? `, first ${MAX_SHOWN} shown` : ""}` +
        (pathsTruncated ? " (the repository has more files than the finder lists)" : "");
    const act = document.getElementById(`cn-f-${active}`);
    if (act) act.scrollIntoView({block: "nearest"});
  }

  async function openFinder() {
    if (!finder.hidden) return;
    finderReturn = document.activeElement;
    hideTip();
    finder.hidden = false;
    finderInput.value = "";
    active = 0;
    finderInput.focus();
    renderFinder();
    if (paths === null) {
      try {
        const q = new URLSearchParams({repo: cfg.repo, ref: cfg.ref, depth: "10", maxEntries: "10000", includeDirectories: "false"});
        const resp = await getJson(`/api/tree?${q}`);
        paths = resp.entries.filter((e) => e.type === "blob").map((e) => e.path);
        pathsTruncated = resp.truncated;
      } catch (e) {
        paths = [];
        finderNote.textContent = e.message;
        return;
      }
      renderFinder();
    }
  }

  function closeFinder() {
    finder.hidden = true;
    if (finderReturn && document.contains(finderReturn)) finderReturn.focus();
  }

  function initFinder() {
    document.getElementById("cn-finder-open").addEventListener("click", openFinder);
    finderInput.addEventListener("input", () => { active = 0; renderFinder(); });
    finderInput.addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown") { e.preventDefault(); active = Math.min(active + 1, shown.length - 1); renderFinder(); }
      else if (e.key === "ArrowUp") { e.preventDefault(); active = Math.max(active - 1, 0); renderFinder(); }
      else if (e.key === "Enter") { e.preventDefault(); if (shown[active]) location.href = browseUrl(cfg.rev, "blob", shown[active]); }
      else if (e.key === "Escape") { e.preventDefault(); closeFinder(); }
      else if (e.key === "Tab") { e.preventDefault(); } // a modal dialog: the focus stays in the box (arrows move)
    });
    finder.addEventListener("click", (e) => { if (e.target === finder) closeFinder(); });
  }

  // ------------------------------------------------------------------ branch and tag selector

  function initRefs() {
    const sel = document.getElementById("cn-ref");
    const note = document.getElementById("cn-ref-note");
    const names = new Set((cfg.refs.branches || []).map((b) => b.name));
    sel.addEventListener("change", async () => {
      const opt = sel.selectedOptions[0];
      const ref = sel.value, name = opt.dataset.name;
      // a tag named like a branch is opened by its full name (a short name means the branch)
      const rev = ref.startsWith("refs/tags/") && names.has(name) ? ref : name;
      note.replaceChildren(el("span", {class: "muted small"}, `Opening ${cfg.path} at ${name}…`));
      const dir = cfg.path.includes("/") ? cfg.path.slice(0, cfg.path.lastIndexOf("/")) : "";
      try {
        const q = new URLSearchParams({repo: cfg.repo, ref, path: dir, depth: "1", maxEntries: "10000"});
        const resp = await getJson(`/api/tree?${q}`);
        if (resp.entries.some((e) => e.path === cfg.path && e.type === "blob")) {
          location.href = browseUrl(rev, "blob", cfg.path) + location.hash;
          return;
        }
      } catch (e) {
        if (e.status !== 404) { note.replaceChildren(el("span", {class: "error small"}, e.message)); return; }
      }
      note.replaceChildren(el("span", {class: "error small"}, `${cfg.path} does not exist at ${name}. `),
        el("a", {href: browseUrl(rev, "tree", ""), class: "small"}, `Browse ${name}`));
    });
  }

  // ------------------------------------------------------------------ keys

  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      if (!finder.hidden) return; // the finder's own handler
      if (!panel.hidden && panel.contains(document.activeElement)) { hideTip(); closePanel(); return; }
      if (!tip.hidden) { hideTip(); return; } // the focus stays where it is (on the symbol, from the keyboard)
      if (!panel.hidden) { closePanel(); return; }
      if (!WIDE.matches && !tree.hidden) { closeTree(); treeToggle.focus(); }
      return;
    }
    if ((e.key === "p" || e.key === "P") && (e.ctrlKey || e.metaKey) && !e.altKey) { e.preventDefault(); openFinder(); return; }
    if (e.key === "t" && !e.ctrlKey && !e.metaKey && !e.altKey && !typing(e)) { e.preventDefault(); openFinder(); }
  });

  highlightTerms();
  initSymbols();
  initTree();
  initFinder();
  initRefs();
})();
