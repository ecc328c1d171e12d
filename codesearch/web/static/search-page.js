// codesearch: the search results page (native ES module, no build step).
//
// The server writes the results into the page as the searchers answer (codesearch/web/
// results_page.py): one `section.file` each, then a JSON `#search-outcome` (statistics, hints,
// an error). This module is loaded `async`, so it usually runs while the results are still
// coming: it places each file in rank order as it is written (data-score, data-order), counts
// it into the language and repository facets and the summary, and, once the page is complete,
// reads the outcome. A click on a result opens it in the preview panel (preview.js); "Show N more
// matches" shows the rest of a file's matches in place (more-matches.js).

import {el, plural, root, whenComplete} from "./dom.js";
import {addExpander, initMoreMatches} from "./more-matches.js";
import {initPreview} from "./preview.js";
import {rerunOnToggle} from "./searchform.js";

// The name a repository is shown by: its display name, unless two repositories of the results
// share it (then the full name tells them apart).
function repoLabel(name, display) {
  return display.get(name) || name || "";
}

// `id`'s element, once the parser has written it (this module may run before it has).
function parsed(id) {
  return new Promise((resolve) => {
    const now = document.getElementById(id);
    if (now) return resolve(now);
    const watch = new MutationObserver(() => {
      const found = document.getElementById(id);
      if (found) { watch.disconnect(); resolve(found); }
    });
    watch.observe(document.documentElement, {childList: true, subtree: true});
  });
}

// Once the whole page is there.
const complete = () => new Promise((resolve) => whenComplete(resolve));

async function initSearch() {
  const cfgNode = document.getElementById("search-config");
  if (!cfgNode) return;
  const cfg = JSON.parse(cfgNode.textContent);
  const params = new URLSearchParams(location.search);
  const results = await parsed("results"); // and everything above it: the form, the facets, the summary
  rerunOnToggle();
  const summary = document.getElementById("summary");
  const errorBox = document.getElementById("search-error");
  const more = () => document.getElementById("more"); // below the results: there once the page is complete
  const filterNote = document.getElementById("filter-note");
  const filtersBox = document.getElementById("filters-box");
  const state = {files: 0, matches: 0, langs: new Map(), repos: new Map(), done: false,
                 display: new Map(), displayNames: new Map(),
                 filter: {lang: params.get("lang"), repo: params.get("repo")}};

  // Facets beside the results on wide screens; a closed "Filters" bar above them on narrow ones,
  // so that the first screen shows results.
  const narrow = window.matchMedia("(max-width: 800px)");
  function fitFilters() { filtersBox.open = !narrow.matches; }
  fitFilters();
  narrow.addEventListener("change", fitFilters);

  // Repository display names from the chunks' repositoryInfo; a display name two repositories
  // share is not used (the full names tell them apart).
  function learnRepos(infos) {
    for (const r of infos || []) {
      if (!r || !r.name) continue;
      const shown = r.displayName || r.name;
      if (!state.displayNames.has(shown)) state.displayNames.set(shown, new Set());
      state.displayNames.get(shown).add(r.name);
    }
    state.display.clear();
    for (const [shown, names] of state.displayNames) {
      if (names.size === 1) state.display.set([...names][0], shown);
    }
    for (const span of results.querySelectorAll(".file-repo")) span.textContent = repoLabel(span.title, state.display);
  }

  // Clicking a result opens it in the preview panel beside the results (preview.js); its links
  // stay links (Cmd/Ctrl-click, middle-click open the file page). The panel is written after the
  // results, so this may run before it is parsed (the page is still streaming): until then a
  // click is what it is without the script (links are followed).
  Promise.race([parsed("preview"), complete()]).then(() => initPreview(results));
  // "Show N more matches" under a file reveals the rest in place (more-matches.js).
  initMoreMatches(results);

  // The rest of the page (the query bar's context list) waits for this: nothing competes with
  // the search for the server while the first results are on their way.
  const announceDone = () => {
    if (document.body.dataset.searchDone) return;
    document.body.dataset.searchDone = "1";
    document.dispatchEvent(new Event("codesearch:search-done"));
  };

  function showError(message, position) {
    announceDone();
    state.done = true;
    errorBox.hidden = false;
    errorBox.replaceChildren(el("strong", null, "Search failed: "), message);
    if (typeof position === "number" && position >= 0) showCaret(position);
    summary.textContent = "";
  }

  // A query that does not parse: the query with a caret under the character the error is at
  // (the API's `position`: a 0-based offset in code points, one column each in the monospace
  // copy), and the bar's copy of it underlined there (at the same character, in UTF-16 units).
  function showCaret(position) {
    const q = cfg.query;
    const chars = Array.from(q);
    const at = Math.min(position, chars.length);
    errorBox.append(el("pre", {class: "query-caret", "aria-label": `error at character ${at + 1}`},
      el("code", {class: "query-caret-query"}, q), "\n",
      el("code", {class: "query-caret-mark"}, " ".repeat(at) + "^")));
    const form = document.querySelector("form.searchform");
    if (form) {
      form.dataset.errorPos = String(chars.slice(0, at).join("").length);
      form.dataset.errorQuery = q;
      form.dispatchEvent(new Event("querybar:error"));
    }
  }

  // Why nothing was found and the fixed queries (the `hints` of the final event).
  function showHints(hints) {
    if (!Array.isArray(hints) || !hints.length) return;
    let box = document.getElementById("search-hints");
    if (!box) {
      box = el("div", {id: "search-hints", class: "notice hints", role: "status"});
      errorBox.after(box);
    }
    box.hidden = false;
    box.replaceChildren(...hints.map((h) => {
      const links = (h.suggestions || []).filter((s) => typeof s.query === "string" && s.query).map((s) => {
        const p = new URLSearchParams({q: s.query});
        if (cfg.regex) p.set("regex", "1");
        if (cfg.case) p.set("case", "1");
        return el("a", {class: "hint-fix", href: `${root()}/search?${p}`}, String(s.label));
      });
      return el("p", {class: "hint", "data-kind": String(h.kind || "")}, String(h.message || ""),
        links.length ? el("span", {class: "hint-fixes"}, " Try: ", ...links.flatMap((a, i) => (i ? [" · ", a] : [a]))) : "");
    }));
  }

  function applyFilter() {
    let shown = 0;
    for (const sec of results.children) {
      const ok = (!state.filter.lang || sec.dataset.lang === state.filter.lang) &&
                 (!state.filter.repo || sec.dataset.repo === state.filter.repo);
      sec.hidden = !ok;
      if (ok) shown++;
    }
    const active = [state.filter.lang, state.filter.repo && repoLabel(state.filter.repo, state.display)].filter(Boolean);
    filterNote.textContent = active.length ? `showing ${plural(shown, "file")} (${active.join(", ")})` : "";
    document.getElementById("filters-active").textContent = active.length ? `(${active.join(", ")})` : "";
    for (const b of document.querySelectorAll(".facet")) {
      b.classList.toggle("active", state.filter[b.dataset.facet] === b.dataset.value);
      b.setAttribute("aria-pressed", state.filter[b.dataset.facet] === b.dataset.value ? "true" : "false");
    }
  }

  function setFilter(kind, value) {
    state.filter[kind] = state.filter[kind] === value ? null : value;
    const p = new URLSearchParams(location.search);
    if (state.filter[kind]) p.set(kind, state.filter[kind]); else p.delete(kind);
    history.replaceState(null, "", `${location.pathname}?${p}`);
    applyFilter();
  }

  function renderFacets(listId, kind, counts) {
    const ul = document.getElementById(listId);
    const label = (value) => (kind === "repo" ? repoLabel(value, state.display) : value) || "(unknown)";
    const items = [...counts.entries()].sort((a, b) => b[1] - a[1] || label(a[0]).localeCompare(label(b[0])));
    ul.replaceChildren(...items.map(([value, n]) => el("li", null,
      el("button", {type: "button", class: "facet", "data-facet": kind, "data-value": value, title: value || null},
        el("span", {class: "facet-name"}, label(value)),
        el("span", {class: "sr-only"}, ": "), el("span", {class: "count"}, String(n)),
        el("span", {class: "sr-only"}, n === 1 ? " file" : " files")))));
    if (!items.length) ul.replaceChildren(el("li", {class: "muted small"}, state.done ? "none" : "…"));
  }

  document.getElementById("filters").addEventListener("click", (e) => {
    const b = e.target.closest(".facet");
    if (b) setFilter(b.dataset.facet, b.dataset.value);
  });

  // Files arrive in chunks, one per searcher, as each answers; each chunk is ranked and every
  // file carries its score and its order (the tie-break of equal scores: searcher, shard,
  // document). A file goes before the first one shown that ranks after it, so the page is in
  // the order of /api/search whatever order the searchers answer in, the same on every load.
  // With another order than relevance (`sort`: path, recency), that order first, then the rank,
  // as the server sorts (codesearch/search/sorting.py); an unknown time ("") comes last.
  const ranks = new WeakMap();
  function before(a, b) { // whether rank a comes before rank b
    if (cfg.sort === "recency" && a.time !== b.time) return a.time > b.time;
    if (cfg.sort === "path" && a.repo !== b.repo) return a.repo < b.repo;
    if (cfg.sort === "path" && a.path !== b.path) return a.path < b.path;
    if (a.score !== b.score) return a.score > b.score;
    const n = Math.max(a.order.length, b.order.length);
    for (let i = 0; i < n; i++) {
      const x = a.order[i] ?? -1, y = b.order[i] ?? -1;
      if (x !== y) return x < y;
    }
    return false; // equal: arrival order
  }
  function place(node, rank) {
    ranks.set(node, rank);
    // from the end: a later answer's files mostly go after those shown. Files not placed yet
    // (written since the last look) are passed over: their turn comes.
    let at = results.lastElementChild;
    while (at && (at === node || !ranks.has(at) || before(rank, ranks.get(at)))) at = at.previousElementSibling;
    const next = at ? at.nextElementSibling : results.firstElementChild;
    if (next !== node) results.insertBefore(node, next);
  }

  // A file the server wrote into #results: placed by its rank, counted.
  const adopted = new WeakSet();
  function adopt(sec) {
    if (sec.matches("details.copies[data-copy-of]")) return foldLate(sec);
    if (adopted.has(sec) || !sec.classList.contains("file")) return;
    adopted.add(sec);
    addExpander(sec);
    const order = (sec.dataset.order || "").split(",").filter(Boolean).map(Number);
    place(sec, {score: Number(sec.dataset.score) || 0, order, time: sec.dataset.time || "",
                repo: sec.dataset.repo || "", path: sec.dataset.path || ""});
    state.files++;
    state.matches += Number(sec.dataset.matches) || 0;
    if ("matchesPartial" in sec.dataset) state.partial = true; // a file's matches counted up to a limit
    const lang = sec.dataset.lang || "";
    state.langs.set(lang, (state.langs.get(lang) || 0) + 1);
    state.repos.set(sec.dataset.repo || "", (state.repos.get(sec.dataset.repo || "") || 0) + 1);
  }
  // Copies of a file shown by an earlier answer (codesearch/web/result_copies.py): their links
  // join the disclosure of that file, which counts the repositories again.
  function foldLate(box) {
    const first = [...results.querySelectorAll("section.file")].find((s) => s.dataset.content === box.dataset.copyOf);
    if (!first) return;
    let mine = first.querySelector("details.copies");
    if (!mine) {
      mine = box.cloneNode(false);
      mine.removeAttribute("data-copy-of");
      mine.append(box.querySelector("summary").cloneNode(true), el("ul", {class: "copies-list"}));
      first.append(mine);
    }
    mine.querySelector(".copies-list").append(...box.querySelectorAll("li"));
    const repos = new Set([...mine.querySelectorAll("li")].map((li) => li.dataset.repo));
    mine.querySelector(".copies-count").textContent = plural(repos.size, "repository", "repositories");
    box.remove();
  }

  function adoptNew() {
    const before = state.files;
    for (const sec of [...results.children]) adopt(sec);
    if (state.files === before) return;
    renderFacets("filter-lang", "lang", state.langs);
    renderFacets("filter-repo", "repo", state.repos);
    applyFilter();
    if (!state.done) summary.textContent = `Searching… ${matchesText()} in ${plural(state.files, "file")} so far`;
  }

  // The matches of the files listed: those shown and those each file counted beyond ("1,000+"
  // when a file's were counted only up to a limit).
  function matchesText() {
    const text = plural(state.matches, "match", "matches");
    return state.partial ? text.replace(" ", "+ ") : text;
  }

  function finish(stats, exhaustive, hints) {
    state.done = true;
    announceDone();
    if (!state.files) showHints(hints);
    renderFacets("filter-lang", "lang", state.langs);
    renderFacets("filter-repo", "repo", state.repos);
    applyFilter();
    const ms = stats && stats.duration ? ` · ${Math.max(1, Math.round(stats.duration / 1e6))} ms` : "";
    if (!state.files) {
      summary.replaceChildren("No results for ", el("code", null, cfg.query), ms ? el("span", {class: "muted"}, ms) : "");
    } else {
      summary.replaceChildren(
        el("strong", null, `${matchesText()} in ${plural(state.files, "file")}`),
        exhaustive ? "" : el("span", {class: "more-exist"}, " (more exist)"),
        el("span", {class: "muted"}, ms));
    }
    summary.dataset.exhaustive = exhaustive ? "true" : "false";
    const moreBox = more(), moreText = document.getElementById("more-text");
    if (!exhaustive && cfg.matches < cfg.maxMatches && moreBox && moreText) {
      moreBox.hidden = false;
      moreText.textContent = `Showing the first ${plural(state.files, "file")}.`;
    }
  }

  // The files as they are written, then what the search concluded (#search-outcome, after them).
  adoptNew();
  const watch = new MutationObserver(adoptNew);
  watch.observe(results, {childList: true});
  await complete();
  watch.disconnect();
  adoptNew();
  // What the search concluded, written after the files. A page cut off on its way (a dropped
  // connection, a replica stopping) has none, nor what follows the results.
  let outcome = null;
  try {
    const node = document.getElementById("search-outcome");
    outcome = node ? JSON.parse(node.textContent) : null;
  } catch (_) { /* reported below */ }
  const loadMore = document.getElementById("load-more");
  if (loadMore) {
    loadMore.addEventListener("click", () => {
      const p = new URLSearchParams(location.search);
      p.set("matches", String(Math.min(cfg.matches * 2, cfg.maxMatches)));
      location.href = `${location.pathname}?${p}`;
    });
  }
  if (!outcome) {
    showError("the search stream ended early");
    return;
  }
  learnRepos(outcome.repositoryInfo);
  if (outcome.error) {
    renderFacets("filter-lang", "lang", state.langs);
    renderFacets("filter-repo", "repo", state.repos);
    showError(outcome.error.message || "the search failed", outcome.error.position);
    return;
  }
  finish(outcome.stats, outcome.exhaustive, outcome.hints);
  showMissing(outcome.missing);
}

// Part of the index could not be read (a shard its checksum refused, a lost file): say that the
// results are incomplete, and whose files are left out, until the service has rebuilt them.
function showMissing(missing) {
  if (!Array.isArray(missing)) return;
  const anchor = document.getElementById("search-error");
  if (!anchor) return;
  const names = missing.map((r) => r && r.name).filter(Boolean);
  const box = document.createElement("p");
  box.className = "notice error-notice index-missing";
  box.setAttribute("role", "status");
  box.textContent = "Part of the index could not be read, so these results are incomplete" +
    (names.length ? `: files of ${names.join(", ")} are missing.` : ".") +
    " The service is rebuilding it; search again in a minute.";
  anchor.before(box);
}

initSearch().catch((e) => console.error("search page:", e));
