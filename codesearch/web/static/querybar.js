// codesearch: the query bar of every search form. No build step.
//
// - Syntax highlighting: the input's own text is transparent and a layer behind it (same font,
//   padding and scroll) shows the query split into tokens: prefixes, their values, quoted strings,
//   /regex/ terms, negation, `or`, brackets. The layer is built with text nodes only.
// - Suggestions as you type (an ARIA 1.2 combobox): the prefixes the query language knows, then,
//   after a prefix, its values: repositories, languages, files, symbols and search contexts from
//   `GET /api/suggest` (filtered by the caller's permissions on the server), fixed values for
//   archived:/fork:/visibility:. Recent queries (localStorage) when the bar is empty.
//   Up/Down move, Enter or Tab take the suggestion moved to (without moving, Enter searches and
//   Tab moves the focus on, as in any form), Escape closes the list.
// - A search context selector next to the bar: choosing one writes `context:<name>` into the
//   query (the query stays the single source of truth, as in a shared link).
// - A parse error's position (set by search-page.js as `data-error-pos` on the form) is underlined.
//
// Safety rule, as in dom.js: text from the server or the user only ever reaches the page as
// text nodes or attribute values, never as HTML.

(function () {
  const root = () => document.body.dataset.root || "";
  const RECENT_KEY = "codesearch.recentQueries";
  const MAX_RECENT = 10;

  // The prefixes of the query language (codesearch/query/parser.py) with what their value is.
  const PREFIXES = [
    ["repo:", "repository name (regex)", "repo"], ["r:", "repository (short for repo:)", "repo"],
    ["lang:", "language", "lang"], ["language:", "language (GitHub's name for lang:)", "lang"],
    ["file:", "path (regex)", "file"], ["f:", "path (short for file:)", "file"],
    ["path:", "path (GitHub's name for file:)", "file"],
    ["sym:", "symbol definition (regex)", "sym"], ["content:", "text in the file", null],
    ["c:", "text (short for content:)", null], ["context:", "search context", "context"],
    ["rev:", "branch or tag", null], ["reposet:", "exactly these repositories", "repo"],
    ["archived:", "yes, no or only", "archived"], ["fork:", "yes, no or only", "fork"],
    ["visibility:", "public, private or any", "visibility"],
  ];
  const KIND_OF = new Map(PREFIXES.map(([p, , k]) => [p.slice(0, -1), k]));
  const FIXED = {archived: ["no", "yes", "only"], fork: ["no", "yes", "only"], visibility: ["public", "private", "any"]};

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  // ------------------------------------------------------------------ tokens

  // The query as [class, text] tokens, for highlighting only (the server parses for real).
  function tokenize(q) {
    const out = [];
    let i = 0;
    const push = (cls, text) => { if (text) out.push([cls, text]); };
    const quoted = (at) => {  // end (exclusive) of the quoted string at `at`, or -1 if unclosed
      for (let j = at + 1; j < q.length; j++) {
        if (q[j] === "\\") { j++; continue; }
        if (q[j] === '"') return j + 1;
      }
      return -1;
    };
    const wordEnd = (at) => {
      let j = at;
      while (j < q.length && !/\s/.test(q[j])) {
        if (q[j] === '"') { const e = quoted(j); j = e > 0 ? e : j + 1; } else j++;
      }
      return j;
    };
    while (i < q.length) {
      const c = q[i];
      if (/\s/.test(c)) { const m = /^\s+/.exec(q.slice(i))[0]; push("", m); i += m.length; continue; }
      if (c === "(" || c === ")") { push("qb-paren", c); i++; continue; }
      if (c === "-") {  // negates a known prefix or a group (after optional whitespace), else text
        const rest = q.slice(i + 1).replace(/^\s*/, "");
        const pm = /^([a-z]+):/.exec(rest);
        if (rest[0] === "(" || (pm && KIND_OF.has(pm[1]))) { push("qb-neg", "-"); i++; continue; }
      }
      if (c === '"') {
        const e = quoted(i);
        if (e > 0) { push("qb-str", q.slice(i, e)); i = e; continue; }
      }
      const m = /^([a-z]+):/.exec(q.slice(i));
      if (m && KIND_OF.has(m[1])) {
        push("qb-prefix", m[0]);
        i += m[0].length;
        const e = q[i] === '"' && quoted(i) > 0 ? quoted(i) : wordEnd(i);
        push("qb-value", q.slice(i, e));
        i = e;
        continue;
      }
      let e = wordEnd(i);
      // a word glued to a closing bracket of a group: leave the bracket to the next round
      while (e > i + 1 && q[e - 1] === ")" && !q.slice(i, e - 1).includes("(")) e--;
      const w = q.slice(i, e);
      if (w === "or") push("qb-op", w);
      else if (w.length >= 3 && w[0] === "/" && w[w.length - 1] === "/") push("qb-re", w);
      else push("qb-word", w);
      i = e;
    }
    return out;
  }

  // ------------------------------------------------------------------ values

  function regexEscape(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
  function quoteIfNeeded(s) { return /^[^\s"()]+$/.test(s) ? s : `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`; }

  // The text a chosen value becomes after its prefix.
  function valueText(kind, value) {
    if (kind === "repo") return quoteIfNeeded(`^${regexEscape(value)}$`);
    if (kind === "file") return quoteIfNeeded(regexEscape(value));
    if (kind === "sym") return quoteIfNeeded(`^${regexEscape(value)}$`);
    return quoteIfNeeded(value);
  }

  function recentQueries() {
    try {
      const v = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
      return Array.isArray(v) ? v.filter((x) => typeof x === "string") : [];
    } catch (_) { return []; }
  }

  function remember(q) {
    q = q.trim();
    if (!q) return;
    try {
      const list = [q, ...recentQueries().filter((x) => x !== q)].slice(0, MAX_RECENT);
      localStorage.setItem(RECENT_KEY, JSON.stringify(list));
    } catch (_) { /* storage disabled: no history */ }
  }

  // ------------------------------------------------------------------ one bar

  let serial = 0;

  function setup(form) {
    const input = form.querySelector("input[name=q]");
    if (!input || input.dataset.queryBar) return;
    input.dataset.queryBar = "1";
    const n = ++serial;
    const wrap = el("div", {class: "qb"});
    const layer = el("div", {class: "qb-layer", "aria-hidden": "true"});
    const list = el("ul", {class: "qb-list", role: "listbox", id: `qb-list-${n}`, "aria-label": "Suggestions"});
    list.hidden = true;
    input.replaceWith(wrap);
    wrap.append(layer, input, list);
    input.classList.add("qb-input");
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", list.id);

    // ---------------------------------------------------------------- highlighting
    function paint() {
      const q = input.value;
      const errAt = form.dataset.errorPos !== undefined && form.dataset.errorQuery === q ? Number(form.dataset.errorPos) : -1;
      const frag = document.createDocumentFragment();
      let pos = 0;
      for (const [cls, text] of tokenize(q)) {
        if (errAt >= pos && errAt < pos + text.length) {
          const k = errAt - pos;
          if (k) frag.append(el("span", {class: cls}, text.slice(0, k)));
          frag.append(el("span", {class: `${cls} qb-err`}, text[k]));
          if (k + 1 < text.length) frag.append(el("span", {class: cls}, text.slice(k + 1)));
        } else {
          frag.append(cls ? el("span", {class: cls}, text) : text);
        }
        pos += text.length;
      }
      if (errAt >= q.length && errAt >= 0) frag.append(el("span", {class: "qb-err"}, " "));
      frag.append("\u200b");  // keeps the line's height when empty
      layer.replaceChildren(frag);
      syncScroll();
    }
    function syncScroll() { layer.scrollLeft = input.scrollLeft; }

    // ---------------------------------------------------------------- suggestions
    let items = [];      // [{label, detail, apply: () => void, group}]
    let active = -1;
    let pending = null;  // AbortController of the request in flight
    let timer = 0;

    function close() {
      list.hidden = true;
      items = [];
      active = -1;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function render() {
      if (!items.length) { close(); return; }
      list.replaceChildren(...items.map((it, k) => el("li", {
        role: "option", id: `${list.id}-${k}`, class: `qb-option${k === active ? " active" : ""}`,
        "aria-selected": k === active ? "true" : "false", "data-index": k,
      }, el("span", {class: "qb-label"}, it.label), it.detail ? el("span", {class: "qb-detail"}, it.detail) : "")));
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
      if (active >= 0) {
        input.setAttribute("aria-activedescendant", `${list.id}-${active}`);
        const node = list.children[active];
        if (node && node.scrollIntoView) node.scrollIntoView({block: "nearest"});
      } else {
        input.removeAttribute("aria-activedescendant");
      }
    }

    // The word the caret is in: [start, end) of the text from the last whitespace before the caret.
    function currentWord() {
      const q = input.value;
      const caret = input.selectionStart === null ? q.length : input.selectionStart;
      let start = caret;
      while (start > 0 && !/\s/.test(q[start - 1])) start--;
      let end = caret;
      while (end < q.length && !/\s/.test(q[end])) end++;
      return {start, end, text: q.slice(start, caret)};
    }

    // Replace the word the caret is in now (not when the list was made: typing may have gone on).
    function replaceWord(text, keepOpen) {
      const word = currentWord();
      const q = input.value;
      const after = q.slice(word.end);
      const sep = keepOpen || after.startsWith(" ") ? "" : " ";
      input.value = q.slice(0, word.start) + text + sep + after;
      const caret = word.start + text.length + sep.length;
      input.setSelectionRange(caret, caret);
      paint();
      if (keepOpen) update(); else close();
    }

    function update() {
      clearTimeout(timer);
      if (pending) { pending.abort(); pending = null; }
      const q = input.value;
      const word = currentWord();
      if (!q.trim()) {
        items = recentQueries().map((r) => ({label: r, detail: "recent", apply: () => {
          input.value = r; paint(); close(); remember(r); form.requestSubmit();
        }}));
        active = -1;
        render();
        return;
      }
      const neg = word.text.startsWith("-") ? "-" : "";
      const m = /^-?([a-z]+):(.*)$/.exec(word.text);
      if (m && KIND_OF.has(m[1])) {
        const kind = KIND_OF.get(m[1]);
        const typed = m[2].replace(/^"/, "").replace(/^\^/, "");
        if (!kind) { close(); return; }
        if (FIXED[kind]) {
          items = FIXED[kind].filter((v) => v.startsWith(typed)).map((v) => ({
            label: v, detail: m[1] + ":", apply: () => replaceWord(`${neg}${m[1]}:${v}`)}));
          active = -1;  // Enter searches, Tab moves on, unless the user picked one with the arrows
          render();
          return;
        }
        // The list on screen was made for other text (its edits would land in the wrong place).
        if (items.length && !items.every((it) => it.forWord === word.start)) close();
        timer = setTimeout(() => fetchValues(word, neg, m[1], kind, typed), 120);
        return;
      }
      if (word.text && !word.text.includes(":") && /^-?[a-z]+$/.test(word.text)) {
        const t = word.text.replace(/^-/, "");
        items = PREFIXES.filter(([p]) => p.startsWith(t) && p !== t + ":").map(([p, detail, kind]) => ({
          label: neg + p, detail, apply: () => replaceWord(neg + p, !!kind)}));
        active = -1;  // Enter searches, Tab moves on, unless the user picked one with the arrows
        render();
        return;
      }
      close();
    }

    async function fetchValues(word, neg, prefix, kind, typed) {
      const ctl = new AbortController();
      pending = ctl;
      let data;
      try {
        const url = `${root()}/api/suggest?kind=${encodeURIComponent(kind)}&q=${encodeURIComponent(typed)}&limit=10`;
        const resp = await fetch(url, {credentials: "same-origin", signal: ctl.signal});
        if (!resp.ok) { close(); return; }
        data = await resp.json();
      } catch (_) { return; }
      if (pending !== ctl) return;
      pending = null;
      items = (data.suggestions || []).map((s) => ({
        label: String(s.label), detail: s.detail ? String(s.detail) : "", forWord: word.start,
        apply: () => replaceWord(`${neg}${prefix}:${valueText(kind, String(s.value))}`)}));
      active = -1;  // Enter searches, Tab moves on, unless the user picked one with the arrows
      render();
    }

    input.addEventListener("input", () => { delete form.dataset.errorPos; paint(); update(); });
    input.addEventListener("scroll", syncScroll);
    input.addEventListener("focus", () => { if (!input.value.trim()) update(); });
    input.addEventListener("blur", () => setTimeout(close, 150));
    input.addEventListener("click", update);
    input.addEventListener("keyup", (e) => { if (e.key === "ArrowLeft" || e.key === "ArrowRight" || e.key === "Home" || e.key === "End") { syncScroll(); update(); } });
    input.addEventListener("keydown", (e) => {
      if (e.isComposing) return;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        if (list.hidden) { update(); e.preventDefault(); return; }
        if (!items.length) return;
        e.preventDefault();
        active = e.key === "ArrowDown" ? (active + 1) % items.length : (active <= 0 ? items.length - 1 : active - 1);
        render();
      } else if ((e.key === "Enter" || (e.key === "Tab" && !e.shiftKey)) && !list.hidden && active >= 0 && items[active]) {
        e.preventDefault();
        items[active].apply();
      } else if (e.key === "Escape" && !list.hidden) {
        e.preventDefault();
        close();
      }
    });
    list.addEventListener("mousedown", (e) => e.preventDefault());  // keep the focus in the input
    list.addEventListener("click", (e) => {
      const li = e.target.closest(".qb-option");
      if (li && items[Number(li.dataset.index)]) items[Number(li.dataset.index)].apply();
    });
    form.addEventListener("submit", () => remember(input.value));
    form.addEventListener("querybar:error", paint);

    // ---------------------------------------------------------------- context selector
    // Hidden until the contexts are known, shown only if there are some: a selector drawn and then
    // taken away moved everything below the form (at narrow widths it has a row of its own) while
    // the user was already reading, or clicking, the results.
    const select = el("select", {class: "qb-context", "aria-label": "Search context", title: "Search context", hidden: true},
      el("option", {value: ""}, "All repositories"));
    wrap.after(select);
    const contextIn = () => {
      const m = /(?:^|\s)context:("(?:[^"\\]|\\.)*"|\S+)/.exec(input.value);
      return m ? m[1].replace(/^"|"$/g, "") : "";
    };
    const loadContexts = () => fetch(`${root()}/api/suggest?kind=context&q=&limit=50`, {credentials: "same-origin"})
      .then((r) => (r.ok ? r.json() : {suggestions: []}))
      .then((data) => {
        const names = (data.suggestions || []).map((s) => String(s.value));
        if (!names.length) return;
        for (const name of names) select.append(el("option", {value: name}, name));
        select.value = names.includes(contextIn()) ? contextIn() : "";
        select.hidden = false;
      })
      .catch(() => {}); // (no contexts to offer: the selector stays hidden)
    // On the results page (its #search-config is in <head>: #results may not be written yet), after
    // the search (search-page.js announces its end): the first results come first; elsewhere at once.
    if (document.getElementById("search-config") && !document.body.dataset.searchDone) {
      document.addEventListener("codesearch:search-done", loadContexts, {once: true});
    } else {
      loadContexts();
    }
    select.addEventListener("change", () => {
      const rest = input.value.replace(/(^|\s)context:("(?:[^"\\]|\\.)*"|\S+)/g, "$1").replace(/\s+/g, " ").trim();
      input.value = select.value ? `context:${quoteIfNeeded(select.value)}${rest ? " " + rest : ""}` : rest;
      paint();
      if (rest) form.requestSubmit(); else input.focus();
    });

    paint();
  }

  for (const form of document.querySelectorAll("form.searchform")) setup(form);
})();
