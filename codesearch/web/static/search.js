// codesearch: the search pages (home, results, file view, repos). No build step.
//
// Safety rule: text from the server (repository contents, paths, names, errors) only ever
// reaches the page through textContent / text nodes (`el` below), never through innerHTML.
// Links from the server pass `safeHref` (http(s) or same-site paths only).
"use strict";

(function () {
  const root = () => document.body.dataset.root || "";

  // ------------------------------------------------------------------ helpers

  // el("a", {href: "...", class: "x"}, "text", child, ...): strings become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function safeHref(url) {
    if (typeof url !== "string" || !url) return null;
    if (url.startsWith("/") && !url.startsWith("//")) return url;
    try {
      const u = new URL(url, location.href);
      return (u.protocol === "http:" || u.protocol === "https:") ? u.href : null;
    } catch (_) {
      return null;
    }
  }

  // A file's page in this service, on the current origin: the `/browse/...` part of a webUrl
  // (which carries the configured public URL) under this page's root.
  function localBrowseUrl(webUrl, publicUrl) {
    if (typeof webUrl !== "string") return null;
    if (publicUrl && webUrl.startsWith(publicUrl + "/browse/")) return root() + webUrl.slice(publicUrl.length);
    const i = webUrl.indexOf("/browse/");
    return i >= 0 ? root() + webUrl.slice(i) : safeHref(webUrl);
  }

  function plural(n, word, many) {
    return `${n.toLocaleString()} ${n === 1 ? word : (many || word + "s")}`;
  }

  function browsePath(repoName) {
    return `${root()}/browse/${repoName.split("/").map(encodeURIComponent).join("/")}`;
  }

  function ago(iso) {
    if (!iso) return "";
    const t = Date.parse(iso);
    if (isNaN(t)) return iso;
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 5) return "just now";
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    if (s < 30 * 86400) return `${Math.floor(s / 86400)} d ago`;
    return new Date(t).toISOString().slice(0, 10);
  }

  function timeEl(iso) {
    return iso ? el("time", {datetime: iso, title: iso}, ago(iso)) : el("span", {class: "muted"}, "never");
  }

  function badge(label, cls, title) {
    return el("span", {class: `badge ${cls}`, title: title || null}, label);
  }

  async function errorMessage(resp) {
    try {
      const body = await resp.json();
      if (body && body.message) return String(body.message);
    } catch (_) { /* not JSON */ }
    return `${resp.status} ${resp.statusText}`;
  }

  // ------------------------------------------------------------------ search form toggles

  // Flipping regex or case re-runs the search (when there is one): the URL holds both.
  for (const form of document.querySelectorAll("form.searchform")) {
    for (const box of form.querySelectorAll(".toggle input[type=checkbox]")) {
      box.addEventListener("change", () => {
        const q = form.querySelector("input[name=q]");
        if (q && q.value.trim()) form.requestSubmit();
      });
    }
  }

  // ------------------------------------------------------------------ search results

  // Match ranges (absolute positions: 1-based line and character column) as, per line, a list of
  // [from, to) character intervals; `to` = Infinity runs to the end of the line.
  function rangesByLine(ranges) {
    const out = new Map();
    for (const r of ranges || []) {
      const s = r.start, e = r.end;
      for (let ln = s.lineNumber; ln <= e.lineNumber; ln++) {
        const from = ln === s.lineNumber ? s.column - 1 : 0;
        const to = ln === e.lineNumber ? e.column - 1 : Infinity;
        if (to <= from) continue;
        if (!out.has(ln)) out.set(ln, []);
        out.get(ln).push([from, to]);
      }
    }
    return out;
  }

  // The text with the intervals wrapped in <mark>, as DOM nodes (characters = code points).
  function marked(text, intervals) {
    const frag = document.createDocumentFragment();
    if (!intervals || !intervals.length) {
      frag.append(text);
      return frag;
    }
    const chars = Array.from(text);
    const sorted = intervals.slice().sort((a, b) => a[0] - b[0]);
    let pos = 0;
    for (const [a0, b0] of sorted) {
      const a = Math.max(a0, pos), b = Math.min(b0, chars.length);
      if (b <= a) continue;
      if (a > pos) frag.append(chars.slice(pos, a).join(""));
      frag.append(el("mark", null, chars.slice(a, b).join("")));
      pos = b;
    }
    if (pos < chars.length) frag.append(chars.slice(pos).join(""));
    return frag;
  }

  function fileMatchCount(f) {
    let n = (f.fileName && f.fileName.matchRanges ? f.fileName.matchRanges.length : 0);
    for (const c of f.chunks || []) n += (c.matchRanges || []).length;
    return n;
  }

  // The lines of the file's first match, as a file view anchor: "#L4", or "#L4-L6" when it spans lines.
  function firstMatchAnchor(f) {
    for (const c of f.chunks || []) {
      if (!c.matchRanges || !c.matchRanges.length) continue;
      const {start, end} = c.matchRanges[0];
      let last = end.lineNumber;
      if (end.column === 1 && last > start.lineNumber) last--; // ends with the newline of the line before
      return last > start.lineNumber ? `#L${start.lineNumber}-L${last}` : `#L${start.lineNumber}`;
    }
    return "";
  }

  // The name a repository is shown by: its display name (the folder of a local repository, the
  // path after the host of a hosted one), or the full name when two repositories share it.
  function repoLabel(name, display) {
    const shown = display.get(name);
    return shown || name || "";
  }

  // The query a result link carries to the file page, which highlights its terms (codenav.js).
  function termParams(cfg) {
    const p = new URLSearchParams({q: cfg.query});
    if (cfg.regex) p.set("regex", "1");
    if (cfg.case) p.set("case", "1");
    return `?${p}`;
  }

  function renderFile(f, cfg, display) {
    const page = localBrowseUrl(f.webUrl, cfg.publicUrl);
    const base = page ? page + termParams(cfg) : null;
    const anchor = firstMatchAnchor(f);
    const name = f.fileName || {text: ""};
    const nameMarks = (name.matchRanges || []).map((r) => [r.start.column - 1, r.end.column - 1]);
    const branch = (f.branches && f.branches[0]) ? f.branches[0].replace(/^refs\/(heads|tags)\//, "") : "";
    const ext = safeHref(f.externalWebUrl);
    const head = el("header", {class: "file-head"},
      el("span", {class: "file-repo", title: f.repository || null}, repoLabel(f.repository, display)),
      el("a", {class: "file-path", href: base ? base + anchor : null}, marked(name.text || "", nameMarks)),
      f.language ? badge(f.language, "lang") : null,
      branch ? badge(branch, "rev", (f.branches || []).join(", ")) : null,
      el("span", {class: "spacer"}),
      el("span", {class: "muted small"}, plural(fileMatchCount(f), "match", "matches")),
      ext ? el("a", {class: "ext small", href: ext, target: "_blank", rel: "noopener noreferrer", title: "Open on the code host"}, "↗") : null);
    const sec = el("section", {class: "file", "data-lang": f.language || "", "data-repo": f.repository || ""}, head);
    for (const c of f.chunks || []) {
      const byLine = rangesByLine(c.matchRanges);
      const lines = (c.content || "").split("\n");
      const start = c.contentStart ? c.contentStart.lineNumber : 1;
      const box = el("div", {class: "chunk"});
      lines.forEach((text, i) => {
        const ln = start + i;
        const href = base ? `${base}#L${ln}` : null;
        const row = el("div", {class: byLine.has(ln) ? "cline hit" : "cline", "data-href": href},
          el("a", {class: "ln", href: href}, String(ln)),
          el("code", {class: "ctext"}, marked(text, byLine.get(ln))));
        box.append(row);
      });
      sec.append(box);
    }
    return sec;
  }

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

    // The response of the request static/search_start.js sent from <head>.
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

  // ------------------------------------------------------------------ file view

  function initFile() {
    const code = document.getElementById("code");
    if (!code) return;
    let anchor = null;

    function wanted() {
      let m = location.hash.match(/^#L(\d+)(?:-L?(\d+))?$/);
      if (!m) {
        const line = new URLSearchParams(location.search).get("line");
        m = line ? line.match(/^(\d+)(?:-L?(\d+))?$/) : null;
      }
      if (!m) return null;
      let a = parseInt(m[1], 10), b = m[2] ? parseInt(m[2], 10) : a;
      if (b < a) [a, b] = [b, a];
      return [a, b];
    }

    function mark(scroll) {
      for (const e of code.querySelectorAll(".line.hl")) e.classList.remove("hl");
      const range = wanted();
      if (!range) return;
      const [a, b] = range;
      for (let i = a; i <= b && i - a < 20000; i++) {
        const e = document.getElementById(`L${i}`);
        if (e) e.classList.add("hl");
      }
      anchor = a;
      const first = document.getElementById(`L${a}`);
      if (first && scroll) first.scrollIntoView({block: "center"});
    }

    // Shift-click on a line number selects a range from the last line clicked.
    code.addEventListener("click", (e) => {
      const ln = e.target.closest("a.ln");
      if (!ln) return;
      const n = parseInt(ln.dataset.n, 10);
      if (e.shiftKey && anchor) {
        e.preventDefault();
        const a = Math.min(anchor, n), b = Math.max(anchor, n);
        history.replaceState(null, "", a === b ? `#L${a}` : `#L${a}-L${b}`);
        mark(false);
        return;
      }
      e.preventDefault();
      history.replaceState(null, "", `#L${n}`);
      mark(false);
    });
    window.addEventListener("hashchange", () => mark(true));
    mark(true);
  }

  // ------------------------------------------------------------------ home: sync status

  function repoState(x) {
    const job = x.job ? x.job.state : null;
    if (job === "IN_PROGRESS" || x.indexStatus === "INDEXING") return ["indexing", "INDEXING"];
    if (job === "PENDING") return [x.indexStatus === "FAILED" ? "queued (retry)" : "queued", "PENDING"];
    if (x.indexStatus === "INDEXED") return ["indexed", "INDEXED"];
    if (x.indexStatus === "FAILED") return ["failed", "FAILED"];
    return ["never indexed", "NEW"];
  }

  function connectionState(c) {
    const job = c.job ? c.job.state : null;
    if (job === "IN_PROGRESS" || c.syncStatus === "SYNCING") return ["syncing", "SYNCING"];
    if (job === "PENDING") return ["queued", "PENDING"];
    switch (c.syncStatus) {
      case "SYNCED": return ["synced", "SYNCED"];
      case "SYNCED_WITH_WARNINGS": return ["synced with warnings", "WARN"];
      case "FAILED": return ["failed", "FAILED"];
      default: return [c.syncedAt ? "sync needed" : "never synced", "NEW"];
    }
  }

  async function getJSON(path) {
    const resp = await apiFetch(root() + path, {headers: {"Accept": "application/json"}});
    if (!resp.ok) {
      const err = new Error(await errorMessage(resp));
      err.status = resp.status;
      throw err;
    }
    return {body: await resp.json(), total: parseInt(resp.headers.get("X-Total-Count") || "0", 10)};
  }

  function initHome() {
    const box = document.getElementById("sync");
    if (!box) return;
    const every = parseInt(box.dataset.pollMs || "2000", 10);
    const names = new Map(); // repo id -> name, for the job list

    function renderConnections(conns) {
      const tbody = document.querySelector("#connections tbody");
      if (!conns.length) {
        tbody.replaceChildren(el("tr", null, el("td", {colspan: 5, class: "muted"}, "No connections configured.")));
        return;
      }
      tbody.replaceChildren(...conns.map((c) => {
        const [label, cls] = connectionState(c);
        const problems = [c.syncError, ...(c.syncWarnings || [])].filter(Boolean);
        return el("tr", {"data-connection": c.name, "data-status": cls},
          el("td", null, c.name),
          el("td", {class: "muted"}, c.type),
          el("td", null, badge(label, cls), problems.length ? el("div", {class: "error small"}, problems.join("; ")) : null),
          el("td", null, timeEl(c.syncedAt)),
          el("td", null, String(c.repoCount ?? "")));
      }));
    }

    function renderJobs(jobs) {
      const tbody = document.querySelector("#jobs tbody");
      if (!jobs.length) {
        tbody.replaceChildren(el("tr", null, el("td", {colspan: 4, class: "muted"}, "Nothing queued or running.")));
        return;
      }
      tbody.replaceChildren(...jobs.slice(0, 50).map((j) => {
        const target = j.kind === "sync" ? (j.connection || `connection ${j.connectionId}`)
                                          : (names.get(j.repoId) || `repo ${j.repoId}`);
        const running = j.state === "IN_PROGRESS";
        return el("tr", {"data-job": j.id},
          el("td", null, j.kind),
          el("td", null, target),
          el("td", null, badge(running ? "running" : "queued", running ? "INDEXING" : "PENDING"),
             j.attempts > 1 ? el("span", {class: "muted small"}, ` attempt ${j.attempts}`) : null,
             j.error ? el("div", {class: "error small"}, j.error) : null),
          el("td", null, timeEl(running ? j.startedAt : j.createdAt)));
      }));
    }

    function renderRepos(repos, total) {
      const tbody = document.querySelector("#repo-status tbody");
      const counts = {};
      for (const x of repos) {
        names.set(x.repoId, x.repoDisplayName || x.repoName);
        const [label] = repoState(x);
        counts[label] = (counts[label] || 0) + 1;
      }
      if (!repos.length) {
        tbody.replaceChildren(el("tr", null, el("td", {colspan: 4, class: "muted"}, "No repositories yet.")));
      } else {
        tbody.replaceChildren(...repos.map((x) => {
          const [label, cls] = repoState(x);
          const branches = Object.keys(x.indexedRevisions || {}).map((r) => r.replace(/^refs\/(heads|tags)\//, ""));
          return el("tr", {"data-repo": x.repoName, "data-status": cls},
            el("td", null, el("a", {href: browsePath(x.repoName), title: x.repoName}, x.repoDisplayName || x.repoName)),
            el("td", null, badge(label, cls), x.lastError ? el("div", {class: "error small"}, x.lastError) : null),
            el("td", null, timeEl(x.indexedAt)),
            el("td", {class: "small"}, branches.join(", ")));
        }));
      }
      const parts = Object.entries(counts).sort().map(([k, n]) => `${n} ${k}`);
      document.getElementById("sync-summary").textContent =
        `${plural(total, "repository", "repositories")}${parts.length ? ": " + parts.join(", ") : ""}`;
      const moreNote = document.getElementById("repo-more");
      moreNote.hidden = total <= repos.length;
      moreNote.textContent = `Showing ${repos.length} of ${total}; see all on the Repositories page.`;
    }

    async function refresh() {
      const errorBox = document.getElementById("sync-error");
      if (document.hidden) { // a background tab: no polling until it is looked at again
        document.addEventListener("visibilitychange", refresh, {once: true});
        return;
      }
      try {
        const [conns, repos, jobs] = await Promise.all([
          getJSON("/api/connections"), getJSON("/api/repos/status?perPage=100"), getJSON("/api/jobs?limit=100")]);
        renderRepos(repos.body, repos.total);
        renderConnections(conns.body.connections);  // GET /api/connections: Sourcebot's {connections: [...]}
        renderJobs(jobs.body);
        errorBox.hidden = true;
        document.getElementById("sync-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      } catch (e) {
        errorBox.hidden = false;
        errorBox.textContent = `Could not load the sync status: ${e.message}`;
        if (e.status === 401) return; // signed out: stop polling
      }
      setTimeout(refresh, every);
    }

    refresh();
  }

  // ------------------------------------------------------------------ repos: re-index

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

  initSearch();
  initFile();
  initHome();
  initRepos();
})();
