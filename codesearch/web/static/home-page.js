// codesearch: the home page's sync status (native ES module, no build step): connections,
// repositories and the queued and running jobs, polled from the API while the tab is visible.

import {badge, browsePath, el, plural, root, timeEl} from "./dom.js";
import {getJSON} from "./http.js";
import {rerunOnToggle} from "./searchform.js";

rerunOnToggle();

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
        getJSON(`${root()}/api/connections/status`), getJSON(`${root()}/api/repos/status?perPage=100`),
          getJSON(`${root()}/api/jobs?limit=100`)]);
      renderRepos(repos.body, repos.total);
      renderConnections(conns.body.connections);  // GET /api/connections/status: {connections: [...]}
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

initHome();
