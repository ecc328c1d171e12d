// codesearch: managing a chat from its page (_chat_manage.html): rename, duplicate, delete, and
// share with named members, each through the HTTP API (codesearch/service/routes/chat_manage.py),
// which checks who may do it. Names and e-mails are set as text, never as HTML.
import {apiFetch, errorMessage} from "./http.js";

(function () {
  const bar = document.getElementById("chat-manage");
  if (!bar) return;
  const api = bar.dataset.api;
  const root = bar.dataset.root || "";
  const status = document.getElementById("manage-status");

  function say(message, isError) {
    status.textContent = message;
    status.classList.toggle("error", !!isError);
  }

  async function call(url, method, body) {
    const options = {method, headers: {"Accept": "application/json"}};
    if (body !== undefined) {
      options.body = JSON.stringify(body);
      options.headers["Content-Type"] = "application/json";
    }
    const r = await apiFetch(url, options);
    if (!r.ok) throw new Error(await errorMessage(r));
    return r.json();
  }

  // ------------------------------------------------------------------ rename
  const renameOpen = document.getElementById("rename-open");
  const renameForm = document.getElementById("rename-form");
  if (renameOpen && renameForm) {
    const input = document.getElementById("rename-input");
    const close = () => { renameForm.hidden = true; renameOpen.setAttribute("aria-expanded", "false"); renameOpen.focus(); };
    renameOpen.addEventListener("click", () => {
      renameForm.hidden = false;
      renameOpen.setAttribute("aria-expanded", "true");
      input.focus();
      input.select();
    });
    document.getElementById("rename-cancel").addEventListener("click", close);
    renameForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const b = await call(api + "/name", "PUT", {name: input.value});
        document.getElementById("chat-name").textContent = b.name;
        document.title = b.name;
        say("Renamed.");
        close();
      } catch (err) { say("Could not rename the chat: " + err.message, true); }
    });
  }

  // ------------------------------------------------------------------ duplicate
  const duplicate = document.getElementById("duplicate-chat");
  if (duplicate) {
    duplicate.addEventListener("click", async () => {
      duplicate.disabled = true;
      try {
        const b = await call(api + "/duplicate", "POST", {});
        say("Duplicated: opening your copy…");
        window.location.assign(root + "/chat/" + encodeURIComponent(b.chatId));
      } catch (err) {
        say("Could not duplicate the chat: " + err.message, true);
        duplicate.disabled = false;
      }
    });
  }

  // ------------------------------------------------------------------ delete
  const del = document.getElementById("delete-chat");
  if (del) {
    del.addEventListener("click", async () => {
      del.disabled = true;
      try {
        await call(api, "DELETE");
        window.location.assign(root + "/chats");
      } catch (err) {
        say("Could not delete the chat: " + err.message, true);
        del.disabled = false;
      }
    });
  }

  // ------------------------------------------------------------------ members
  const list = document.getElementById("member-list");
  const memberForm = document.getElementById("member-form");
  function showMembers(members) {
    list.textContent = "";
    for (const m of members) {
      const li = document.createElement("li");
      li.dataset.userId = String(m.id);
      const who = document.createElement("span");
      who.className = "member-who";
      const email = document.createElement("span");
      email.className = "muted";
      email.textContent = m.email;
      who.append(m.name + " ", email);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "small member-remove";
      remove.dataset.userId = String(m.id);
      remove.setAttribute("aria-label", "Remove " + m.email);
      remove.textContent = "Remove";
      li.append(who, " ", remove);
      list.appendChild(li);
    }
    document.getElementById("member-count").textContent = String(members.length);
  }
  if (list && memberForm) {
    const email = document.getElementById("member-email");
    memberForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const b = await call(api + "/members", "POST", {email: email.value});
        showMembers(b.members);
        say("Shared with " + email.value + ".");
        email.value = "";
      } catch (err) { say("Could not share the chat: " + err.message, true); }
    });
    list.addEventListener("click", async (e) => {
      const button = e.target.closest("button.member-remove");
      if (!button) return;
      try {
        const b = await call(api + "/members/" + encodeURIComponent(button.dataset.userId), "DELETE");
        showMembers(b.members);
        say("No longer shared with that member.");
      } catch (err) { say("Could not stop sharing: " + err.message, true); }
    });
  }
})();
