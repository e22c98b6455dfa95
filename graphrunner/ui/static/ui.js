// graphrunner run explorer: live updates and the cancel/resume actions, from the JSON API.
"use strict";
(function () {
  const POLL_MS = 3000;
  const token = () => document.querySelector('meta[name="xsrf-token"]').content;

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) { const span = document.createElement("span"); span.className = cls; span.textContent = text; td.append(span); }
    else td.textContent = text;
    return td;
  }
  function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : ""; }
  function link(href, text, cls) { const a = document.createElement("a"); a.href = href; a.textContent = text; if (cls) a.className = cls; return a; }

  async function getJson(url) {
    const answer = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!answer.ok) throw new Error(answer.status + " " + answer.statusText);
    return answer.json();
  }

  // "/": the first page of runs, refreshed while it is open
  function liveList(table) {
    if (table.dataset.live !== "yes") return;
    const body = table.querySelector("tbody");
    setInterval(async () => {
      try {
        const page = await getJson("/api/runs?" + table.dataset.query);
        const rows = page.runs.map((r) => {
          const tr = document.createElement("tr");
          tr.dataset.runId = r.run_id;
          const run = cell(""); run.append(link("/runs/" + encodeURIComponent(r.run_id), r.run_id, "run-link"));
          const graph = cell(""); graph.append(link("/graphs/" + r.graph_id.split("/").map(encodeURIComponent).join("/"), r.graph_id));
          tr.append(run, graph, cell(r.status, "status " + r.status), cell(String(r.step_count)), cell(when(r.created_at)), cell(when(r.updated_at)));
          return tr;
        });
        body.replaceChildren(...rows);
      } catch (e) { /* the next poll tries again */ }
    }, POLL_MS);
  }

  async function act(url, body) {
    const out = document.getElementById("action-result");
    out.className = ""; out.textContent = "…";
    try {
      const answer = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-XSRFToken": token() },
        body: JSON.stringify(body || {}),
      });
      const reply = await answer.json();
      if (!answer.ok) { out.className = "bad"; out.textContent = reply.error ? reply.error.type + ": " + reply.error.message : answer.statusText; return; }
      out.textContent = "Done: the run is " + reply.status + ".";
      setTimeout(() => location.reload(), 600);
    } catch (e) { out.className = "bad"; out.textContent = String(e); }
  }

  // "/runs/<id>": the actions, and a reload when the run moves on (unless a patch is being edited)
  function runPage(section) {
    const id = section.dataset.runId;
    const base = "/api/runs/" + encodeURIComponent(id);
    const cancel = document.getElementById("cancel");
    if (cancel) cancel.addEventListener("click", () => { if (confirm("Cancel run " + id + "?")) act(base + "/cancel"); });
    const resume = document.getElementById("resume");
    const patch = document.getElementById("state-patch");
    if (resume) resume.addEventListener("click", () => {
      let value;
      try { value = JSON.parse(patch.value || "{}"); } catch (e) {
        const out = document.getElementById("action-result"); out.className = "bad"; out.textContent = "The state patch is not JSON: " + e.message; return;
      }
      act(base + "/resume", { state_patch: value });
    });
    setInterval(async () => {
      try {
        const run = await getJson(base);
        const moved = run.status !== section.dataset.status || String(run.step_count) !== section.dataset.step;
        const editing = patch && patch.value.trim() !== "{}" && patch.value.trim() !== "";
        if (moved && !editing) location.reload();
        else if (moved) document.getElementById("run-status").textContent = run.status + " (reload to see)";
      } catch (e) { /* the next poll tries again */ }
    }, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const table = document.getElementById("runs");
    if (table) liveList(table);
    const section = document.getElementById("run");
    if (section) runPage(section);
  });
})();
