// codesearch: the slash-command list of the Ask boxes (the chat page's #ask-q, the home and file
// pages' #askbox-q). Typing "/" at the start of a question lists the skills the caller may run
// (GET /api/skills: their personal ones, then the shared ones); arrows move, Enter or Tab picks
// one ("/slug " is put in the box), Escape closes. The server applies the skill when the question
// is asked (codesearch/app/skills.py), so nothing here is needed for a typed command to work.
// Names and descriptions are set as text only.
import {el, root, whenComplete} from "./dom.js";

let skills = null;  // the list, fetched once per page: one request, whoever asks first
// (each keystroke asks: a second request answering late would draw the list again and move the
// choice the keyboard had made back to the first entry)

function load() {
  if (!skills) {
    skills = (async () => {
      try {
        const r = await fetch(root() + "/api/skills", {credentials: "same-origin", headers: {"Accept": "application/json"}});
        return r.ok ? (await r.json()).skills || [] : [];
      } catch (_) {
        return [];
      }
    })();
  }
  return skills;
}

function attach(box, n) {
  const menu = el("ul", {id: `skill-menu-${n}`, class: "skill-menu", role: "listbox", "aria-label": "Skills"});
  menu.hidden = true;
  box.after(menu);
  box.setAttribute("aria-autocomplete", "list");
  box.setAttribute("aria-controls", menu.id);
  let shown = [];
  let active = -1;

  function close() {
    menu.hidden = true;
    shown = [];
    active = -1;
    box.removeAttribute("aria-activedescendant");
  }

  function mark(i) {
    active = i;
    [...menu.children].forEach((li, k) => li.setAttribute("aria-selected", String(k === i)));
    if (i >= 0) {
      box.setAttribute("aria-activedescendant", menu.children[i].id);
      menu.children[i].scrollIntoView({block: "nearest"});
    }
  }

  function pick(i) {
    const s = shown[i];
    if (!s) return;
    const rest = box.value.replace(/^\/\S*\s*/, "");
    box.value = `/${s.slug} ${rest}`;
    close();
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  async function update() {
    const m = /^\/([a-z0-9-]*)$/.exec(box.value);
    if (!m) return close();
    const want = m[1];
    const all = await load();
    shown = all.filter((s) => s.slug.startsWith(want) || s.name.toLowerCase().includes(want)).slice(0, 20);
    menu.textContent = "";
    if (!shown.length) return close();
    shown.forEach((s, k) => {
      const li = el("li", {id: `${menu.id}-${k}`, role: "option", "aria-selected": "false"},
        el("code", null, "/" + s.slug), " ", el("span", null, s.name),
        s.scope === "shared" ? el("span", {class: "muted"}, " · shared") : null,
        el("div", {class: "muted"}, s.description));
      li.addEventListener("mousedown", (e) => { e.preventDefault(); pick(k); });
      menu.append(li);
    });
    menu.style.top = `${box.offsetTop + box.offsetHeight}px`;
    menu.style.left = `${box.offsetLeft}px`;
    menu.style.width = `${box.offsetWidth}px`;
    menu.hidden = false;
    mark(0);
  }

  box.addEventListener("input", update);
  box.addEventListener("blur", close);
  box.addEventListener("keydown", (e) => {
    if (menu.hidden) return;
    if (e.key === "ArrowDown") { e.preventDefault(); mark((active + 1) % shown.length); }
    else if (e.key === "ArrowUp") { e.preventDefault(); mark((active - 1 + shown.length) % shown.length); }
    else if (e.key === "Enter" || e.key === "Tab") { e.preventDefault(); e.stopImmediatePropagation(); pick(active); }
    else if (e.key === "Escape") { e.preventDefault(); close(); }
  }, true);  // capture: before the chat page's Enter-sends listener on the same box
}

whenComplete(() => {
  ["ask-q", "askbox-q"].forEach((id, n) => {
    const box = document.getElementById(id);
    if (box) attach(box, n);
  });
});
