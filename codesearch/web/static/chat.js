// codesearch: the chat page (pages_chat.py). Asks POST /api/chat and shows its event stream:
// each tool call as it happens, the answer as it arrives, then the stored chat.
// Everything from the model or the tools is set as text (textContent); the one HTML inserted is
// the server's rendering of the answer (answerHtml: markdown without raw HTML, links checked).
import {apiFetch} from "./http.js";
import {clearMentions, mentionParts} from "./chat-mentions.js";
import "./skills-menu.js"; // the slash-command list of the Ask box (it sets itself up)

(function () {
  const AUTOSTART_KEY = "codesearch.ask.autostart";
  const MODEL_KEY = "codesearch.ask.model";
  const root = document.body.dataset.root || "";

  // The question boxes of the home and file pages: the chat page starts the question they send.
  document.querySelectorAll("form.askbox").forEach((form) => {
    form.addEventListener("submit", () => {
      const q = form.querySelector("[name=q]");
      try { sessionStorage.setItem(AUTOSTART_KEY, q ? q.value : ""); } catch (e) { /* private mode */ }
    });
  });

  const form = document.getElementById("ask-form");
  const chatEl = document.getElementById("chat");
  if (!form || !chatEl) return;
  const box = document.getElementById("ask-q");
  const modelSel = document.getElementById("ask-model");
  const sendBtn = document.getElementById("ask-send");
  const errorEl = document.getElementById("ask-error");
  const turns = document.getElementById("turns");
  let chatId = chatEl.dataset.chatId || "";
  let busy = false;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function showError(message) {
    errorEl.textContent = message;
    errorEl.hidden = !message;
  }

  // ------------------------------------------------------------------ the model picker
  function loadModels() {
    fetch(root + "/api/models", {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then((r) => r.ok ? r.json() : r.json().then((b) => Promise.reject(new Error(b.message || r.statusText))))
      .then((models) => {
        modelSel.textContent = "";
        if (!models.length) {
          modelSel.appendChild(el("option", "", "No model configured"));
          modelSel.disabled = true;
          sendBtn.disabled = true;
          showError("No language model is configured on this server: asking is unavailable.");
          return;
        }
        let saved = "";
        try { saved = localStorage.getItem(MODEL_KEY) || ""; } catch (e) { /* ignore */ }
        for (const m of models) {
          const o = el("option", "", m.displayName || m.model);
          o.value = JSON.stringify({provider: m.provider, model: m.model});
          o.title = m.provider + " / " + m.model;
          if (o.value === saved) o.selected = true;
          modelSel.appendChild(o);
        }
      })
      .catch((e) => showError("Could not list the language models: " + e.message));
  }
  modelSel.addEventListener("change", () => {
    try { localStorage.setItem(MODEL_KEY, modelSel.value); } catch (e) { /* ignore */ }
  });

  // ------------------------------------------------------------------ the scope picker
  const scopeList = document.getElementById("scope-list");
  const scopeSummary = document.getElementById("scope-summary");
  const scopeFilter = document.getElementById("scope-filter");
  function checkedRepos() {
    return Array.from(form.querySelectorAll("input[name=repo]:checked")).map((i) => i.value);
  }
  function updateScope() {
    const n = checkedRepos().length;
    scopeSummary.textContent = n ? (n === 1 ? checkedRepos()[0] : n + " selected") : "all you can read";
  }
  if (scopeList) {
    scopeList.addEventListener("change", updateScope);
    scopeFilter.addEventListener("input", () => {
      const needle = scopeFilter.value.trim().toLowerCase();
      scopeList.querySelectorAll("li").forEach((li) => {
        li.hidden = !!needle && !li.textContent.toLowerCase().includes(needle);
      });
    });
    document.getElementById("scope-clear").addEventListener("click", () => {
      form.querySelectorAll("input[name=repo]:checked").forEach((i) => { i.checked = false; });
      updateScope();
    });
    updateScope();
  }

  // ------------------------------------------------------------------ keyboard
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  // ------------------------------------------------------------------ one turn, live
  function newTurn(question) {
    const section = el("section", "turn live");
    section.appendChild(el("h2", "chat-question", question));
    const model = modelSel.selectedOptions[0];
    section.appendChild(el("p", "muted small turn-model", "Model: " + (model ? model.textContent : "")));
    const head = el("h3", "steps-head", "Research steps (0)");
    const steps = el("ol", "steps");
    const status = el("p", "muted small turn-status", "Researching…");
    const answer = el("div", "answer markdown");
    const stream = el("div", "answer-stream");
    answer.appendChild(stream);
    section.append(head, steps, status, answer);
    turns.appendChild(section);
    return {section, head, steps, status, answer, stream, calls: {}, count: 0};
  }

  function argsText(input) {
    try { return JSON.stringify(input || {}); } catch (e) { return ""; }
  }

  function onEvent(t, ev) {
    switch (ev.type) {
      case "tool-input-available": {
        const li = el("li", "step running");
        const details = el("details");
        const summary = el("summary");
        summary.append(el("code", "step-tool", ev.toolName || ""), " ",
          el("span", "muted step-args", argsText(ev.input)), " ", el("span", "step-summary", "running…"));
        details.appendChild(summary);
        details.appendChild(el("pre", "step-output", ""));
        li.appendChild(details);
        t.steps.appendChild(li);
        t.calls[ev.toolCallId] = li;
        t.count += 1;
        t.head.textContent = "Research steps (" + t.count + ")";
        t.status.textContent = "Running " + (ev.toolName || "a tool") + "…";
        break;
      }
      case "tool-output-available": {
        const li = t.calls[ev.toolCallId];
        if (!li) break;
        const out = ev.output || {};
        li.classList.remove("running");
        if (out.isError) li.classList.add("step-error");
        li.querySelector(".step-summary").textContent = (out.isError ? "error: " : "") + (out.summary || "");
        li.querySelector(".step-output").textContent = out.text || "";
        t.status.textContent = "Researching…";
        break;
      }
      case "text-start":
        t.status.textContent = "Answering…";
        break;
      case "text-delta":
        t.stream.appendChild(document.createTextNode(ev.delta || ""));
        break;
      case "data-chat": {
        const d = ev.data || {};
        t.answer.innerHTML = d.answerHtml || "";  // rendered by the server: safe markdown
        if (d.chatId && d.chatId !== chatId) {
          chatId = d.chatId;
          chatEl.dataset.chatId = chatId;
          history.replaceState(null, "", root + "/chat/" + encodeURIComponent(chatId));
        }
        break;
      }
      case "message-metadata": {
        const meta = ev.messageMetadata || {};
        if (meta.totalInputTokens || meta.totalOutputTokens) {
          const n = (x) => Number(x || 0).toLocaleString("en-US");
          t.section.appendChild(el("p", "muted small turn-usage", "Tokens: " + n(meta.totalInputTokens) +
            " input tokens · " + n(meta.totalOutputTokens) + " output tokens"));
        }
        break;
      }
      case "error":
        t.status.textContent = "";
        t.section.appendChild(el("p", "error", "The question failed: " + (ev.errorText || "unknown error")));
        break;
      case "finish":
        t.status.remove();
        t.section.classList.remove("live");
        break;
    }
  }

  async function readStream(response, t) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const chunk = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of chunk.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (!data || data === "[DONE]") continue;
          let ev;
          try { ev = JSON.parse(data); } catch (e) { continue; }
          onEvent(t, ev);
        }
      }
    }
  }

  async function ask(question) {
    if (busy) return;
    busy = true;
    sendBtn.disabled = true;
    chatEl.setAttribute("aria-busy", "true");
    showError("");
    const intro = document.getElementById("chat-intro");
    if (intro) intro.hidden = true;
    const body = {messages: [{role: "user", parts: [{type: "text", text: question}, ...mentionParts()]}],
                  selectedSearchScopes: checkedRepos().map((v) => ({type: "repo", value: v}))};
    if (chatId) body.id = chatId;
    if (modelSel.value) {
      try { body.languageModel = JSON.parse(modelSel.value); } catch (e) { /* the default model */ }
    }
    const share = document.getElementById("ask-public");
    if (!chatId && share) body.visibility = share.checked ? "PUBLIC" : "PRIVATE";
    let t = null;
    try {
      const r = await apiFetch(root + "/api/chat", {method: "POST", body: JSON.stringify(body),
        headers: {"Content-Type": "application/json", "Accept": "text/event-stream"}});
      if (!r.ok) {
        let message = r.status + " " + r.statusText;
        try { const b = await r.json(); message = b.message || message; } catch (e) { /* not JSON */ }
        showError(message);
        return;
      }
      box.value = "";
      clearMentions();
      t = newTurn(question);
      await readStream(r, t);
    } catch (e) {
      showError("The connection was lost: " + e.message + ". The answer is saved when it finishes: reload the chat.");
    } finally {
      busy = false;
      sendBtn.disabled = false;
      chatEl.setAttribute("aria-busy", "false");
      if (t && t.status.isConnected) t.status.remove();
      box.focus();
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = box.value.trim();
    if (!q) { showError("Write a question first."); return; }
    ask(q);
  });

  // ------------------------------------------------------------------ sharing
  const share = document.getElementById("share-toggle");
  if (share) {
    share.addEventListener("click", async () => {
      const next = share.dataset.visibility === "PUBLIC" ? "PRIVATE" : "PUBLIC";
      const r = await apiFetch(root + "/api/chat/" + encodeURIComponent(chatId), {method: "PATCH",
        body: JSON.stringify({visibility: next}), headers: {"Content-Type": "application/json"}});
      if (!r.ok) { showError("Could not change who can read this chat (" + r.status + ")."); return; }
      const b = await r.json();
      share.dataset.visibility = b.visibility;
      share.setAttribute("aria-pressed", b.visibility === "PUBLIC" ? "true" : "false");
      share.textContent = b.visibility === "PUBLIC" ? "Stop sharing" : "Share: make public";
      document.getElementById("chat-visibility").textContent = b.visibility.toLowerCase();
    });
  }

  loadModels();
  // A question sent from the home or file page's box starts right away (only then: a link
  // alone never makes anyone ask).
  let pending = null;
  try { pending = sessionStorage.getItem(AUTOSTART_KEY); sessionStorage.removeItem(AUTOSTART_KEY); } catch (e) { /* ignore */ }
  if (pending !== null && pending.trim() && pending === box.value && !chatId) {
    // wait for the models, so the question goes to the chosen one
    const start = () => ask(box.value.trim());
    const wait = setInterval(() => {
      if (modelSel.options.length && modelSel.options[0].value !== "" || modelSel.disabled) {
        clearInterval(wait);
        if (!modelSel.disabled) start();
      }
    }, 50);
  }
})();
