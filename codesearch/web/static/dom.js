// codesearch: DOM helpers the pages' modules share (native ES module, no build step).
//
// Safety rule: text from the server (repository contents, paths, names, errors) only ever
// reaches the page through textContent / text nodes (`el` below), never through innerHTML.
// Links from the server pass `safeHref` (http(s) or same-site paths only).

// The path the app is mounted under (Serve's route prefix, usually ""), from <body data-root>.
export const root = () => document.body.dataset.root || "";

// el("a", {href: "...", class: "x"}, "text", child, ...): strings become text nodes.
export function el(tag, attrs, ...children) {
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

// `fn` once the page is complete: at DOMContentLoaded, or now if that has passed (a module loaded
// `async` may run before or after it).
export function whenComplete(fn) {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => fn(), {once: true});
  else fn();
}

export function safeHref(url) {
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
export function localBrowseUrl(webUrl, publicUrl) {
  if (typeof webUrl !== "string") return null;
  if (publicUrl && webUrl.startsWith(publicUrl + "/browse/")) return root() + webUrl.slice(publicUrl.length);
  const i = webUrl.indexOf("/browse/");
  return i >= 0 ? root() + webUrl.slice(i) : safeHref(webUrl);
}

export function plural(n, word, many) {
  return `${n.toLocaleString()} ${n === 1 ? word : (many || word + "s")}`;
}

export function browsePath(repoName) {
  return `${root()}/browse/${repoName.split("/").map(encodeURIComponent).join("/")}`;
}

export function ago(iso) {
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

export function timeEl(iso) {
  return iso ? el("time", {datetime: iso, title: iso}, ago(iso)) : el("span", {class: "muted"}, "never");
}

export function badge(label, cls, title) {
  return el("span", {class: `badge ${cls}`, title: title || null}, label);
}
