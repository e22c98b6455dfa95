// graphrunner run explorer: live updates and the actions (cancel, resume, fork; schedules), from the JSON API.
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

  function say(text, bad) {
    const out = document.getElementById("action-result");
    out.className = bad ? "bad" : ""; out.textContent = text;
  }

  // POST an action; `done(reply)` on success (default: say the run's status and reload)
  async function act(url, body, done) {
    say("…");
    try {
      const answer = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-XSRFToken": token() },
        body: JSON.stringify(body || {}),
      });
      const reply = await answer.json();
      if (!answer.ok) { say(reply.error ? reply.error.type + ": " + reply.error.message : answer.statusText, true); return; }
      if (done) { done(reply); return; }
      say("Done: the run is " + reply.status + ".");
      setTimeout(() => location.reload(), 600);
    } catch (e) { say(String(e), true); }
  }

  function parsed(textarea, what) {
    try { return { value: JSON.parse(textarea.value || "{}") }; } catch (e) { say("The " + what + " is not JSON: " + e.message, true); return null; }
  }

  // the fork box: "Fork from here" on a transcript row picks its step and shows its state
  function forkBox(base) {
    const box = document.getElementById("fork-box");
    if (!box) return;
    const step = document.getElementById("fork-step");
    const shown = document.getElementById("fork-state");
    const patch = document.getElementById("fork-patch");
    async function showState() {
      try {
        const state = await getJson(base + "/state?at=" + encodeURIComponent(step.value));
        shown.textContent = "State after step " + step.value + ":\n" + JSON.stringify(state, null, 2);
      } catch (e) { shown.textContent = "The state after step " + step.value + " is not kept (" + e.message + ")."; }
      shown.hidden = false;
    }
    step.addEventListener("change", showState);
    document.querySelectorAll("button.fork-here").forEach((button) => button.addEventListener("click", () => {
      step.value = button.dataset.step; box.open = true; showState(); patch.focus();
    }));
    document.getElementById("fork").addEventListener("click", () => {
      const value = parsed(patch, "state patch");
      if (value === null) return;
      act(base + "/fork", { step: Number(step.value), state_patch: value.value }, (reply) => {
        say("Forked: run " + reply.run_id + " is " + reply.status + ".");
        location.assign("/runs/" + encodeURIComponent(reply.run_id));
      });
    });
  }

  // "/schedules": pause, resume and trigger
  function schedulesPage(table) {
    table.querySelectorAll("button.schedule-act").forEach((button) => button.addEventListener("click", () => {
      const row = button.closest("tr");
      const id = row.dataset.scheduleId, action = button.dataset.action;
      act("/api/schedules/" + encodeURIComponent(id) + "/" + action, {}, (reply) => {
        say(action === "trigger" ? "Triggered: run " + reply.run_id + " is " + reply.status + "." : "Done: " + id + (reply.paused ? " is paused." : " fires again."));
        setTimeout(() => location.reload(), 600);
      });
    }));
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
      const value = parsed(patch, "state patch");
      if (value !== null) act(base + "/resume", { state_patch: value.value });
    });
    forkBox(base);
    const forkPatch = document.getElementById("fork-patch");
    const edited = (area) => area && area.value.trim() !== "{}" && area.value.trim() !== "";
    setInterval(async () => {
      try {
        const run = await getJson(base);
        const moved = run.status !== section.dataset.status || String(run.step_count) !== section.dataset.step;
        const box = document.getElementById("fork-box");
        const editing = edited(patch) || edited(forkPatch) || (box && box.open);
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
    const schedules = document.getElementById("schedules");
    if (schedules) schedulesPage(schedules);
  });
})();
