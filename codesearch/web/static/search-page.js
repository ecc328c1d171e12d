// codesearch: the search results page (native ES module, no build step). The results stream
// from POST /api/stream_search, asked for by the page's inline static/search_start.js; files are placed in rank order as
// each searcher answers, with language and repository facets beside them.

import {el, plural, root} from "./dom.js";
import {errorMessage} from "./http.js";
import {fileMatchCount, renderFile, repoLabel} from "./results.js";
import {rerunOnToggle} from "./searchform.js";

rerunOnToggle();

function initSearch() {
  const cfgNode = document.getElementById("search-config");
  if (!cfgNode) return;
  const cfg = JSON.parse(cfgNode.textContent);
  const params = new URLSearchParams(location.search);
  const results = document.getElementById("results");
  const summary = document.getElementById("summary");
  const errorBox = document.getElementById("search-error");
  const more = document.getElementById("more");
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

  // Clicking a result line opens the file there (unless the user is selecting text).
  results.addEventListener("click", (e) => {
    const row = e.target.closest(".cline");
    if (!row || e.target.closest("a")) return;
    const sel = window.getSelection();
    if (sel && String(sel).length) return;
    const href = row.dataset.href;
    if (href) location.href = href;
  });

  // The rest of the page (the query bar's context list) waits for this: nothing competes with
  // the search for the server while the first results are on their way.
  const announceDone = () => {
    if (document.body.dataset.searchDone) return;
    document.body.dataset.searchDone = "1";
    document.dispatchEvent(new Event("codesearch:search-done"));
  };

  function showError(message, position) {
    announceDone();
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
  const ranks = new WeakMap();
  function before(a, b) { // whether rank a comes before rank b
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
    node.dataset.score = String(rank.score);
    // from the end: a later chunk's files mostly go after those shown
    let at = results.lastElementChild;
    while (at && before(rank, ranks.get(at))) at = at.previousElementSibling;
    results.insertBefore(node, at ? at.nextElementSibling : results.firstElementChild);
  }

  function addFiles(files, repositoryInfo) {
    learnRepos(repositoryInfo);
    for (const f of files || []) {
      const order = Array.isArray(f.order) ? f.order.map(Number) : [];
      place(renderFile(f, cfg, state.display), {score: typeof f.score === "number" ? f.score : 0, order});
      state.files++;
      state.matches += fileMatchCount(f);
      const lang = f.language || "";
      state.langs.set(lang, (state.langs.get(lang) || 0) + 1);
      state.repos.set(f.repository || "", (state.repos.get(f.repository || "") || 0) + 1);
    }
    renderFacets("filter-lang", "lang", state.langs);
    renderFacets("filter-repo", "repo", state.repos);
    applyFilter();
    if (!state.done) summary.textContent = `Searching… ${plural(state.matches, "match", "matches")} in ${plural(state.files, "file")} so far`;
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
        el("strong", null, `${plural(state.matches, "match", "matches")} in ${plural(state.files, "file")}`),
        exhaustive ? "" : el("span", {class: "more-exist"}, " (more exist)"),
        el("span", {class: "muted"}, ms));
    }
    summary.dataset.exhaustive = exhaustive ? "true" : "false";
    if (!exhaustive && cfg.matches < cfg.maxMatches) {
      more.hidden = false;
      document.getElementById("more-text").textContent = `Showing the first ${plural(state.matches, "match", "matches")}.`;
    }
  }

  document.getElementById("load-more").addEventListener("click", () => {
    const p = new URLSearchParams(location.search);
    p.set("matches", String(Math.min(cfg.matches * 2, cfg.maxMatches)));
    location.href = `${location.pathname}?${p}`;
  });

  function handleEvent(block) {
    const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (!data) return;
    if (data === "[DONE]") return "done";
    let ev;
    try { ev = JSON.parse(data); } catch (_) { return; }
    if (ev.type === "chunk") addFiles(ev.files, ev.repositoryInfo);
    else if (ev.type === "final") finish(ev.accumulatedStats, ev.isSearchExhaustive, ev.hints);
    else if (ev.type === "error") showError((ev.error && ev.error.message) || "the search failed");
  }

  // The response of the request static/search_start.js sent from <head>, inlined in the page,
  // before this module and the ones it imports were even asked for.
  async function run() {
    let resp;
    try {
      resp = await cfgNode.started;
    } catch (e) {
      showError("the service could not be reached");
      return;
    }
    if (!resp.ok) {
      let body = null;
      try { body = await resp.clone().json(); } catch (_) { /* not JSON */ }
      showError(await errorMessage(resp), body && typeof body.position === "number" ? body.position : undefined);
      return;
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (value) buf += decoder.decode(value, {stream: true}).replace(/\r\n/g, "\n");
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (handleEvent(block) === "done") return;
      }
      if (done) break;
    }
    if (buf.trim()) handleEvent(buf);
    if (!state.done && errorBox.hidden) showError("the search stream ended early");
  }

  run().catch(() => showError("the search stream was interrupted"));
}

initSearch();
