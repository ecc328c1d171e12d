// codesearch: Mermaid diagrams in Ask answers (the chat page only), drawn safely.
// An answer's ```mermaid block arrives as <pre><code class="language-mermaid"> (server-rendered
// markdown, as text). This module draws each one as an SVG, in three layers, because the text
// is the model's and the model may repeat what a hostile file told it:
//   0. HTML tags in the source (but <br>) lose their angle brackets (‹b›) before mermaid sees it:
//      labels are text, and mermaid never has markup to parse;
//   1. mermaid (vendored: static/vendor/mermaid.min.js, its licence beside it; loaded only when
//      a page has a diagram) runs with securityLevel "strict": labels are sanitised, click
//      callbacks and links are off; htmlLabels off (SVG text, no HTML); and a diagram cannot
//      change those settings (`secure`);
//   2. the SVG is parsed and walked before it is shown: no script, iframe, object, embed or
//      foreignObject, no on* attribute, no link other than to "#...", no "javascript:" anywhere;
//   3. the site's Content-Security-Policy runs no inline script and no eval.
// A diagram that does not parse, or is too big, stays as its source text.
const MAX_SOURCE = 20000;   // characters of one diagram's source
const MAX_DIAGRAMS = 20;    // per page
const DROP = new Set(["script", "iframe", "object", "embed", "foreignobject", "link", "meta", "base", "form",
  "input", "button", "textarea", "audio", "video", "use", "animate", "set", "animatetransform", "animatemotion"]);
const SECURE = ["secure", "securityLevel", "startOnLoad", "maxTextSize", "maxEdges", "suppressErrorRendering",
  "htmlLabels", "flowchart", "theme", "themeVariables", "themeCSS", "fontFamily", "darkMode", "dompurifyConfig"];
const TAG = /<\/?[a-zA-Z][^<>]*>/g;
const BR = /^<br\s*\/?>$/i;
let loading = null;
let drawn = 0;
let serial = 0;

function load() {
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = new URL("./vendor/mermaid.min.js", import.meta.url).href;
      s.onload = () => {
        const m = globalThis.mermaid;
        if (!m) { reject(new Error("mermaid did not load")); return; }
        const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
        m.initialize({startOnLoad: false, securityLevel: "strict", htmlLabels: false, flowchart: {htmlLabels: false},
          theme: dark ? "dark" : "default", maxTextSize: MAX_SOURCE, maxEdges: 500, suppressErrorRendering: true,
          secure: SECURE});
        resolve(m);
      };
      s.onerror = () => reject(new Error("mermaid did not load"));
      document.head.appendChild(s);
    });
  }
  return loading;
}

// The diagram's source without HTML tags (layer 0 above); <br> stays, as Mermaid's line break.
export function withoutTags(source) {
  return source.replace(TAG, (tag) => (BR.test(tag) ? tag : "\u2039" + tag.slice(1, -1) + "\u203a"));
}

// The SVG's elements without anything that could run or navigate (layer 2 above).
export function cleanSvg(svgText) {
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const svg = doc.documentElement;
  if (!svg || svg.nodeName.toLowerCase() !== "svg" || doc.getElementsByTagName("parsererror").length) return null;
  for (const node of Array.from(svg.querySelectorAll("*"))) {
    if (DROP.has(node.localName.toLowerCase())) { node.remove(); continue; }
    for (const attr of Array.from(node.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\s\u0000-\u001f]+/g, "").toLowerCase();
      if (name.startsWith("on") || value.includes("javascript:") || value.includes("data:text/html") ||
          ((name === "href" || name.endsWith(":href")) && !attr.value.startsWith("#"))) {
        node.removeAttribute(attr.name);
      }
    }
  }
  for (const attr of Array.from(svg.attributes)) {
    if (attr.name.toLowerCase().startsWith("on")) svg.removeAttribute(attr.name);
  }
  return document.importNode(svg, true);
}

async function draw(code) {
  const pre = code.closest("pre");
  if (!pre || pre.dataset.mermaid) return;
  pre.dataset.mermaid = "pending";
  const source = code.textContent || "";
  if (source.length > MAX_SOURCE || drawn >= MAX_DIAGRAMS) { pre.dataset.mermaid = "skipped"; return; }
  drawn += 1;
  try {
    const mermaid = await load();
    serial += 1;
    const {svg} = await mermaid.render("answer-diagram-" + serial, withoutTags(source));
    const clean = cleanSvg(svg);
    if (!clean) throw new Error("not an SVG");
    clean.setAttribute("role", "img");
    clean.setAttribute("aria-label", "Diagram: " + source.split("\n")[0].slice(0, 80));
    const figure = document.createElement("figure");
    figure.className = "mermaid-diagram";
    figure.appendChild(clean);
    const more = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "Diagram source";
    more.append(summary, pre.cloneNode(true));
    figure.appendChild(more);
    pre.replaceWith(figure);
  } catch (e) {
    pre.dataset.mermaid = "failed";  // stays as its source text
    pre.title = "This diagram could not be drawn: " + (e && e.message ? e.message : e);
  }
}

function scan(rootEl) {
  rootEl.querySelectorAll(".answer pre > code.language-mermaid").forEach((code) => { draw(code); });
}

const turns = document.getElementById("turns");
if (turns) {
  scan(turns);
  // answers of this visit arrive later (chat.js sets each one when its stream ends)
  new MutationObserver(() => scan(turns)).observe(turns, {childList: true, subtree: true});
}
