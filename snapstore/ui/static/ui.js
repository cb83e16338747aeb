// snapstore ui: the actions (restore, undo, delete) and the live timeline.
// Plain JavaScript, no build step. Text from the store is only ever set through textContent.
(function () {
  "use strict";

  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const POLL_MS = 1500;

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (ignored) { data = null; }
    if (!response.ok || !data || data.error) {
      const message = data && data.error ? data.error.message : "HTTP " + response.status;
      throw new Error(message);
    }
    return data;
  }

  function pathList(label, paths, total) {
    const box = el("div", null, "paths");
    if (!total) return box;
    box.append(el("h3", label + " (" + total + ")"));
    const list = el("ul");
    for (const path of paths) list.append(el("li", path));
    if (total > paths.length) list.append(el("li", "... and " + (total - paths.length) + " more"));
    box.append(list);
    return box;
  }

  function reportNodes(report, what) {
    const counts = report.counts;
    const dry = report.dry_run;
    const fragment = document.createDocumentFragment();
    const summary = (dry ? "A " + what + " would change " : "The " + what + " changed ") +
      report.target + ": " + (dry ? "write " : "wrote ") + counts.written + ", " +
      (dry ? "remove " : "removed ") + counts.removed + ", " + counts.unchanged + " unchanged" +
      (counts.kept ? ", " + counts.kept + " left alone" : "") + ".";
    fragment.append(el("p", summary, "summary"));
    fragment.append(pathList(dry ? "would write" : "written", report.written, counts.written));
    fragment.append(pathList(dry ? "would remove" : "removed", report.removed, counts.removed));
    fragment.append(pathList("left alone", report.kept, counts.kept));
    if (report.backup) {
      fragment.append(el("p", "What it replaced is kept as the undo backup " + report.backup + "."));
    }
    return fragment;
  }

  const dialog = document.getElementById("confirm-dialog");
  let pending = null;

  function ask(title, body, onConfirm) {
    document.getElementById("dialog-title").textContent = title;
    const holder = document.getElementById("dialog-body");
    holder.replaceChildren(body);
    pending = onConfirm;
    dialog.showModal();
  }

  function showError(error) {
    const section = document.getElementById("result");
    document.getElementById("result-body").replaceChildren(el("p", String(error.message || error), "error"));
    document.getElementById("result-undo").hidden = true;
    section.hidden = false;
    section.scrollIntoView({block: "nearest"});
  }

  function showResult(session, report, what) {
    const section = document.getElementById("result");
    document.getElementById("result-body").replaceChildren(reportNodes(report, what));
    const undo = document.getElementById("result-undo");
    undo.dataset.session = session;
    undo.dataset.backup = report.backup || "";
    undo.dataset.now = "1";
    undo.hidden = !report.backup;
    section.hidden = false;
    section.scrollIntoView({block: "nearest"});
  }

  function selectedPaths(button) {
    if (button.dataset.paths) return [button.dataset.paths];
    if (button.dataset.selection === "tree") {
      const picked = Array.from(document.querySelectorAll("input.pick:checked"), (box) => box.value);
      return picked.length ? picked : null;
    }
    return null;
  }

  async function restore(button) {
    const request = {session: button.dataset.session, name: button.dataset.name, paths: selectedPaths(button)};
    const preview = await post("/api/restore", Object.assign({dry_run: true}, request));
    const body = document.createDocumentFragment();
    body.append(el("p", request.paths ? "Restore " + request.paths.length + " selected path(s) of " + request.name + "?" : "Restore all of " + request.name + "?"));
    body.append(reportNodes(preview, "restore"));
    ask("Restore " + request.name, body, async () => {
      const report = await post("/api/restore", request);
      showResult(request.session, report, "restore");
    });
  }

  async function undo(button) {
    const request = {session: button.dataset.session, backup: button.dataset.backup || null};
    if (button.dataset.now) {
      const report = await post("/api/undo", request);
      showResult(request.session, report, "undo");
      return;
    }
    const preview = await post("/api/undo", Object.assign({dry_run: true}, request));
    const body = document.createDocumentFragment();
    body.append(el("p", "Put back the undo backup " + (request.backup || "(newest)") + "?"));
    body.append(reportNodes(preview, "undo"));
    ask("Undo", body, async () => {
      const report = await post("/api/undo", request);
      showResult(request.session, report, "undo");
    });
  }

  function remove(button) {
    const request = {session: button.dataset.session, name: button.dataset.name};
    const body = el("p", "Delete the checkpoint " + request.name + " of " + request.session + "? This cannot be undone.");
    ask("Delete " + request.name, body, async () => {
      await post("/api/delete", request);
      const row = button.closest("tr");
      if (row) row.remove();
      else window.location.assign("/session?s=" + encodeURIComponent(request.session));
    });
  }

  const handlers = {restore: restore, undo: undo, delete: remove};

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.action");
    if (!button) return;
    const handler = handlers[button.dataset.action];
    if (!handler) return;
    event.preventDefault();
    Promise.resolve(handler(button)).catch(showError);
  });

  const closeResult = document.getElementById("result-close");
  if (closeResult) {
    closeResult.addEventListener("click", () => { document.getElementById("result").hidden = true; });
  }

  if (dialog) {
    document.getElementById("dialog-cancel").addEventListener("click", () => { pending = null; dialog.close(); });
    document.getElementById("dialog-confirm").addEventListener("click", () => {
      const action = pending;
      pending = null;
      dialog.close();
      if (action) Promise.resolve(action()).catch(showError);
    });
  }

  // ---------------------------------------------------------------- diffs that load after the page

  const diffs = document.getElementById("diffs");

  async function loadPendingDiffs() {
    for (;;) {
      const pending = diffs.querySelector("article.diff.pending");
      if (!pending) return;
      const response = await fetch(diffs.dataset.moreUrl + "&from=" + pending.dataset.index, {credentials: "same-origin"});
      if (!response.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();  // server-rendered, escaped HTML
      let progressed = false;
      for (const article of holder.querySelectorAll("article.diff:not(.pending)")) {
        const old = document.getElementById(article.id);
        if (old && old.classList.contains("pending")) {
          old.replaceWith(article);
          progressed = true;
        }
      }
      if (!progressed) return;
    }
  }

  if (diffs) loadPendingDiffs();

  // ---------------------------------------------------------------- the live timeline

  const timeline = document.getElementById("timeline");

  async function fillChanges() {
    const cells = Array.from(timeline.querySelectorAll("td.changes")).filter((cell) => !cell.dataset.done);
    for (let start = 0; start < cells.length; start += 10) {
      const chunk = cells.slice(start, start + 10);
      const params = new URLSearchParams();
      for (const cell of chunk) params.append("n", cell.dataset.name);
      const response = await fetch(timeline.dataset.changesUrl + "&" + params.toString(), {credentials: "same-origin"});
      if (!response.ok) return;
      const counts = await response.json();
      for (const cell of chunk) {
        const tally = counts[cell.dataset.name];
        cell.dataset.done = "1";
        if (!tally) { cell.textContent = "-"; continue; }
        cell.replaceChildren();
        const parts = [["added", "+", tally.added], ["modified", "~", tally.modified], ["removed", "-", tally.removed]];
        let any = false;
        for (const [kind, sign, number] of parts) {
          if (!number) continue;
          any = true;
          cell.append(el("span", sign + number + " " + kind, "count " + kind), " ");
        }
        if (!any) cell.textContent = "no change";
      }
    }
  }

  async function poll() {
    try {
      const response = await fetch(timeline.dataset.headUrl, {credentials: "same-origin"});
      if (response.ok) {
        const head = await response.json();
        const changed = String(head.count) !== timeline.dataset.count || (head.newest || "") !== timeline.dataset.newest;
        if (changed) {
          const rows = await fetch(timeline.dataset.rowsUrl, {credentials: "same-origin"});
          if (rows.ok) {
            document.getElementById("timeline-rows").innerHTML = await rows.text();
            timeline.dataset.count = String(head.count);
            timeline.dataset.newest = head.newest || "";
            await fillChanges();
          }
        }
      }
    } catch (ignored) {
      // the server may be restarting; try again at the next tick
    }
    window.setTimeout(poll, POLL_MS);
  }

  if (timeline) {
    fillChanges();
    window.setTimeout(poll, POLL_MS);
  }

  // ---------------------------------------------------------------- the live sessions page

  const sessions = document.getElementById("sessions-rows");

  async function pollSessions() {
    try {
      const response = await fetch(document.getElementById("sessions").dataset.rowsUrl, {credentials: "same-origin"});
      if (response.ok) {
        const holder = document.createElement("tbody");
        holder.innerHTML = await response.text();  // server-rendered, escaped HTML
        const first = holder.querySelector("tr");
        const signature = first ? first.dataset.signature : "";
        if (signature !== sessions.dataset.signature) {
          sessions.replaceChildren(...holder.children);
          sessions.dataset.signature = signature;
        }
      }
    } catch (ignored) {
      // the server may be restarting; try again at the next tick
    }
    window.setTimeout(pollSessions, POLL_MS);
  }

  if (sessions) window.setTimeout(pollSessions, POLL_MS);
})();
