// codesearch: one file of the search results, as DOM (native ES module, no build step).
// Repository text only ever becomes text nodes (`dom.js`'s `el`).

import {badge, el, localBrowseUrl, plural, safeHref} from "./dom.js";

// Match ranges (absolute positions: 1-based line and character column) as, per line, a list of
// [from, to) character intervals; `to` = Infinity runs to the end of the line.
export function rangesByLine(ranges) {
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
export function marked(text, intervals) {
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

export function fileMatchCount(f) {
  let n = (f.fileName && f.fileName.matchRanges ? f.fileName.matchRanges.length : 0);
  for (const c of f.chunks || []) n += (c.matchRanges || []).length;
  return n;
}

// The lines of the file's first match, as a file view anchor: "#L4", or "#L4-L6" when it spans lines.
export function firstMatchAnchor(f) {
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
export function repoLabel(name, display) {
  const shown = display.get(name);
  return shown || name || "";
}

// The query a result link carries to the file page, which highlights its terms (codenav.js).
export function termParams(cfg) {
  const p = new URLSearchParams({q: cfg.query});
  if (cfg.regex) p.set("regex", "1");
  if (cfg.case) p.set("case", "1");
  return `?${p}`;
}

export function renderFile(f, cfg, display) {
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
