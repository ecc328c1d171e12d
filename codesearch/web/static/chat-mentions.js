// codesearch: @-mentions in the Ask box. Typing "@" and part of a path offers files (GET
// /api/suggest?kind=file: only files the user may read, at most 8); choosing one (Enter, Tab or a
// click) puts "@path" in the question and the file in the question's context: chat.js sends each
// chosen file as a message part {type: "data-source", data: {type: "file", repo, path, name}},
// as Sourcebot's Ask does, and the server gives the model the file's text (codesearch/tools/ask_files.py).
const MAX_MENTIONS = 5;
const LIMIT = 8;
const TOKEN = /(^|\s)@([^\s@]{1,200})$/;

const chosen = [];  // [{repo, path}]

// The message parts of the files chosen for the next question.
export function mentionParts() {
  return chosen.map((f) => ({type: "data-source",
    data: {type: "file", repo: f.repo, path: f.path, name: f.path.split("/").pop(), revision: ""}}));
}

// Forget the chosen files (the question was sent).
export function clearMentions() {
  chosen.length = 0;
  renderChips();
}

let chips = null;
function renderChips() {
  if (!chips) return;
  chips.textContent = "";
  chips.hidden = !chosen.length;
  chosen.forEach((f, i) => {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.textContent = f.repo + "/" + f.path;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.setAttribute("aria-label", "Remove " + f.path + " from the question's context");
    remove.addEventListener("click", () => { chosen.splice(i, 1); renderChips(); });
    li.append(name, remove);
    chips.appendChild(li);
  });
}

(function () {
  const box = document.getElementById("ask-q");
  const form = document.getElementById("ask-form");
  if (!box || !form) return;
  const root = document.body.dataset.root || "";
  const wrap = document.createElement("div");
  wrap.className = "mention-wrap";
  box.replaceWith(wrap);
  wrap.appendChild(box);
  const list = document.createElement("ul");
  list.id = "mention-list";
  list.className = "mention-list";
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-label", "Files to mention");
  list.hidden = true;
  wrap.appendChild(list);
  chips = document.createElement("ul");
  chips.id = "mention-chips";
  chips.className = "mention-chips";
  chips.setAttribute("aria-label", "Files in the question's context");
  chips.hidden = true;
  wrap.appendChild(chips);
  box.setAttribute("aria-autocomplete", "list");
  box.setAttribute("aria-controls", "mention-list");
  let items = [];
  let active = -1;
  let timer = null;
  let asked = 0;

  function close() {
    list.hidden = true;
    list.textContent = "";
    items = [];
    active = -1;
    box.removeAttribute("aria-activedescendant");
  }

  function highlight(i) {
    active = i;
    Array.from(list.children).forEach((li, n) => li.setAttribute("aria-selected", n === i ? "true" : "false"));
    if (i >= 0) box.setAttribute("aria-activedescendant", "mention-" + i);
  }

  function token() {
    const m = TOKEN.exec(box.value.slice(0, box.selectionStart));
    return m ? m[2] : null;
  }

  function choose(i) {
    const item = items[i];
    if (!item) return;
    const before = box.value.slice(0, box.selectionStart);
    const m = TOKEN.exec(before);
    if (!m) { close(); return; }
    const start = before.length - m[2].length;
    const inserted = item.path + " ";
    box.value = box.value.slice(0, start) + inserted + box.value.slice(box.selectionStart);
    box.selectionStart = box.selectionEnd = start + inserted.length;
    if (!chosen.some((f) => f.repo === item.repo && f.path === item.path)) {
      if (chosen.length >= MAX_MENTIONS) chosen.shift();
      chosen.push(item);
    }
    renderChips();
    close();
    box.focus();
  }

  async function lookup(q) {
    const mine = ++asked;
    let body;
    try {
      const r = await fetch(root + "/api/suggest?kind=file&limit=" + LIMIT + "&q=" + encodeURIComponent(q),
        {credentials: "same-origin", headers: {"Accept": "application/json"}});
      if (!r.ok) return;
      body = await r.json();
    } catch (e) { return; }
    if (mine !== asked || token() !== q) return;  // typed on meanwhile
    items = (body.suggestions || []).map((s) => ({repo: s.detail, path: s.value}));
    list.textContent = "";
    if (!items.length) { close(); return; }
    items.forEach((it, n) => {
      const li = document.createElement("li");
      li.id = "mention-" + n;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", "false");
      li.append(it.path + " ");
      const repo = document.createElement("span");
      repo.className = "muted small";
      repo.textContent = it.repo;
      li.appendChild(repo);
      li.addEventListener("mousedown", (e) => { e.preventDefault(); choose(n); });
      list.appendChild(li);
    });
    list.hidden = false;
    highlight(0);
  }

  box.addEventListener("input", () => {
    clearTimeout(timer);
    const q = token();
    if (q === null) { close(); return; }
    timer = setTimeout(() => lookup(q), 120);
  });
  // capture: before chat.js's Enter-sends handler, so that Enter picks the highlighted file
  box.addEventListener("keydown", (e) => {
    if (list.hidden || !items.length) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const step = e.key === "ArrowDown" ? 1 : -1;
      highlight((active + step + items.length) % items.length);
    } else if (e.key === "Enter" || e.key === "Tab") {
      e.preventDefault();
      e.stopImmediatePropagation();
      choose(active < 0 ? 0 : active);
    } else if (e.key === "Escape") {
      e.preventDefault();
      close();
    }
  }, true);
  box.addEventListener("blur", () => setTimeout(close, 150));
})();
