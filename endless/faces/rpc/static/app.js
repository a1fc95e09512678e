// The History page of an Endless memory: plain JavaScript, no build step.
// Text from the memory is only ever put into the page with textContent (never as HTML).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = {
    memory: null, turns: [], next: null, anchored: false, query: "", matcher: null,
    seq: 0, generation: 0,
  };

  // -- talking to the server ------------------------------------------------------------
  async function call(method, args) {
    const response = await fetch("/api/endless-ui." + method, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ type: "client-request", rpcId: ++state.seq, method: "endless." + method,
                             payload: { args: args || {} } }),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { /* not an envelope */ }
    if (!data || !data.result) throw new Error("the server answered " + response.status);
    if (!data.result.ok) throw new Error(data.result.error.message);
    return data.result.value;
  }

  function say(message) { $("status").textContent = message || ""; }

  // -- small DOM helpers (textContent only) -------------------------------------------------
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function when(at) {
    if (at === null || at === undefined) return "time unknown";
    return new Date(at * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }
  function dayKey(at) {
    const d = new Date(at * 1000);
    return d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0");
  }
  function dayTitle(at) {
    return new Date(at * 1000).toLocaleDateString(undefined, { weekday: "long", year: "numeric", month: "long", day: "numeric" });
  }

  // The search as a RegExp for highlighting in the conversation; null if none.  A /pattern/ is
  // itself; a "quoted phrase" its words with any whitespace between; plain words each word and
  // the endings the server's stemming folds onto it (deploy: deploying, deployed).
  function matcherFor(query) {
    if (!query) return null;
    const escape = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    try {
      if (query.length > 2 && query.startsWith("/") && query.endsWith("/")) {
        return new RegExp(query.slice(1, -1), "giu");
      }
      const quoted = query.length > 2 && query.startsWith('"') && query.endsWith('"') && query.indexOf('"', 1) === query.length - 1;
      if (quoted) {
        return new RegExp(query.slice(1, -1).trim().split(/\s+/).map(escape).join("\\s+"), "giu");
      }
      const words = query.replace(/"/g, " ").match(/[\p{L}\p{N}]+/gu) || [];
      if (!words.length) return null;
      return new RegExp("(?<![\\p{L}\\p{N}])(?:" + words.map(escape).join("|") + ")[\\p{L}\\p{N}]*", "giu");
    } catch (e) { return null; }
  }

  // Fill `node` with `text`, marking the [start, end) spans the server found (a hit's snippet).
  function fillMarked(node, text, marks) {
    node.textContent = "";
    let last = 0;
    for (const [start, end] of marks || []) {
      if (start < last) continue;
      node.appendChild(document.createTextNode(text.slice(last, start)));
      node.appendChild(el("mark", null, text.slice(start, end)));
      last = end;
    }
    node.appendChild(document.createTextNode(text.slice(last)));
  }

  // Fill `node` with `text`, wrapping matches in <mark> elements built node by node.
  function fillText(node, text, matcher) {
    node.textContent = "";
    if (!matcher || !text) { node.textContent = text || ""; return 0; }
    let last = 0, count = 0;
    matcher.lastIndex = 0;
    let m;
    while ((m = matcher.exec(text)) !== null) {
      if (m[0].length === 0) { matcher.lastIndex++; continue; }
      node.appendChild(document.createTextNode(text.slice(last, m.index)));
      node.appendChild(el("mark", null, m[0]));
      last = m.index + m[0].length;
      count++;
      if (count > 2000) break;
    }
    node.appendChild(document.createTextNode(text.slice(last)));
    return count;
  }

  // -- memories ------------------------------------------------------------------------
  async function loadMemories() {
    const value = await call("memories", {});
    const select = $("memory");
    select.textContent = "";
    const wanted = new URLSearchParams(location.search).get("memory");
    const list = value.memories.slice();
    const current = list.findIndex((m) => m.memoryId === wanted);
    if (current > 0) list.unshift(list.splice(current, 1)[0]);
    for (const m of list) {
      const option = el("option", null, m.project + " · " + m.turns + " turns" + (m.lastAt ? " · " + when(m.lastAt) : ""));
      option.value = m.memoryId;
      option.title = m.agent + " · " + m.memoryId;
      select.appendChild(option);
    }
    if (!list.length) { say("No memories yet: chat with Endless first, or run `endless demo`."); return; }
    select.value = list[0].memoryId;
    await openMemory(list[0].memoryId);
  }

  async function openMemory(id) {
    state.memory = id;
    state.generation++;
    clearSearch(false);
    const url = new URL(location.href);
    url.searchParams.set("memory", id);
    history.replaceState(null, "", url.pathname + url.search);
    await Promise.all([loadNewest(), loadLines()]);
  }

  // -- conversation ------------------------------------------------------------------------
  async function loadNewest() {
    state.turns = []; state.next = null; state.anchored = false;
    await loadPage(undefined);
    window.scrollTo(0, document.documentElement.scrollHeight);  // the newest turn, as in a chat
  }

  async function loadPage(before) {
    const generation = state.generation;
    const args = { memoryId: state.memory, limit: 50 };
    if (before !== undefined && before !== null) args.before = before;
    const value = await call("history", args);
    if (generation !== state.generation) return;
    const known = new Set(state.turns.map((t) => t.turn));
    state.turns = value.turns.filter((t) => !known.has(t.turn)).concat(state.turns);
    state.turns.sort((a, b) => a.turn - b.turn);
    state.next = value.next === undefined ? null : value.next;
    renderTurns();
  }

  function renderTurns() {
    const days = $("days");
    days.textContent = "";
    let section = null, key = null;
    for (const turn of state.turns) {
      const k = turn.at ? dayKey(turn.at) : "unknown";
      if (k !== key) {
        key = k;
        section = el("section", "day");
        section.appendChild(el("h2", null, turn.at ? dayTitle(turn.at) : "Turns without a known time"));
        days.appendChild(section);
      }
      section.appendChild(renderTurn(turn));
    }
    if (!state.turns.length) days.appendChild(el("p", "hint", "No turns yet."));
    $("earlier").hidden = state.next === null;
    $("newest").hidden = !state.anchored;
  }

  const KIND_LABEL = { user: "you", reply: "assistant", trace: "tools", call: "did", result: "result",
                       said: "said", work: "colleague", status: "note", note: "note" };

  function renderTurn(turn) {
    const article = el("article", "turn");
    article.id = "turn-" + turn.turn;
    const meta = el("div", "turn-meta");
    meta.appendChild(el("span", "turn-title", turn.sessionTitle || "(untitled chat)"));
    meta.appendChild(el("span", null, when(turn.at)));
    meta.appendChild(el("span", null, "turn " + turn.turn));
    meta.appendChild(el("span", "status status-" + (turn.status || "damaged"), turn.status || "damaged"));
    article.appendChild(meta);
    for (const entry of turn.entries) {
      const box = el("div", "entry kind-" + entry.kind);
      box.id = "m-" + entry.id;
      box.appendChild(el("div", "entry-kind", (KIND_LABEL[entry.kind] || entry.kind) + " · " + entry.id));
      const text = el("div", "text");
      fillText(text, entry.text, state.matcher);
      box.appendChild(text);
      if (entry.truncated) box.appendChild(el("div", "hint", "(cut to fit this page; open it in Remembers)"));
      article.appendChild(box);
    }
    return article;
  }

  async function showEarlier() {
    if (state.next === null) return;
    const before = document.documentElement.scrollHeight - window.scrollY;
    await loadPage(state.next);
    window.scrollTo(0, document.documentElement.scrollHeight - before);
  }

  // -- search -------------------------------------------------------------------------------
  async function runSearch(query) {
    query = query.trim();
    if (!query) { clearSearch(true); return; }
    const generation = state.generation;
    let value;
    try {
      value = await call("search", { memoryId: state.memory, query: query, limit: 50 });
    } catch (e) {
      // A refused query leaves no hits of the previous one on screen (the typed query stays to fix).
      if (generation === state.generation) { clearSearch(true); $("query").value = query; }
      throw e;
    }
    if (generation !== state.generation) return;
    state.query = query;
    state.matcher = matcherFor(query);
    const list = $("hits");
    list.textContent = "";
    $("hits-title").textContent = value.hits.length
      ? value.hits.length + (value.more ? "+" : "") + " hits for " + query + (value.mode === "words" ? ", best first" : ", newest first")
      : "No hits for " + query;
    if (value.stoppedAt !== undefined) $("hits-title").textContent += " (the search stopped early)";
    for (const hit of value.hits) {
      const item = el("li");
      const button = el("button");
      button.type = "button";
      button.appendChild(el("span", "hit-meta", (hit.sessionTitle || "") + " · " + when(hit.at) + " · " + hit.kind + " · #" + hit.id));
      button.appendChild(el("br"));
      const snippet = el("span", "text");
      fillMarked(snippet, hit.snippet, hit.marks);
      button.appendChild(snippet);
      button.addEventListener("click", () => goToHit(hit));
      item.appendChild(button);
      list.appendChild(item);
    }
    $("hits-box").hidden = false;
    $("clear-search").hidden = false;
    renderTurns();
  }

  function clearSearch(rerender) {
    state.query = ""; state.matcher = null;
    $("query").value = "";
    $("hits").textContent = "";
    $("hits-box").hidden = true;
    $("clear-search").hidden = true;
    if (rerender) renderTurns();
  }

  async function goToHit(hit) {
    if (!state.turns.some((t) => t.turn === hit.turn) && hit.turn !== null) {
      state.turns = []; state.anchored = true;
      await loadPage(hit.turn + 3);
    }
    const target = $("m-" + hit.id);
    if (!target) return;
    for (const old of document.querySelectorAll(".current-hit")) old.classList.remove("current-hit");
    target.classList.add("current-hit");
    target.tabIndex = -1;
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
  }

  // -- remembers ------------------------------------------------------------------------------
  async function loadLines() {
    const generation = state.generation;
    const value = await call("view", { memoryId: state.memory });
    if (generation !== state.generation) return;
    const list = $("lines");
    list.textContent = "";
    for (const line of value.lines) list.appendChild(renderLine(line));
    if (!value.lines.length) list.appendChild(el("li", "hint", "The view is empty."));
  }

  function range(line) {
    const from = when(line.from), to = when(line.to);
    return from === to ? from : from + " – " + to;
  }

  function renderLine(line) {
    const item = el("li", "line");
    const button = el("button");
    button.type = "button";
    button.setAttribute("aria-expanded", "false");
    button.appendChild(el("span", "line-name", line.id + "+" + line.n));
    button.appendChild(el("span", "line-meta", (line.n === 1 ? "message " + line.id : line.n + " messages") + " · " + range(line)));
    const text = el("div", "text" + (line.text === null ? " unwritten" : ""),
                    line.text === null ? "(not written yet: open it to read the message)" : line.text);
    button.appendChild(text);
    item.appendChild(button);
    const inside = el("div");
    inside.hidden = true;
    item.appendChild(inside);
    let loaded = false;
    button.addEventListener("click", async () => {
      const open = button.getAttribute("aria-expanded") === "true";
      button.setAttribute("aria-expanded", String(!open));
      inside.hidden = open;
      if (open || loaded) return;
      loaded = true;
      try {
        if (line.n === 1) await showMessage(inside, line.id, 1);
        else {
          const value = await call("zoom", { memoryId: state.memory, id: line.id, n: line.n });
          const halves = el("ol");
          for (const half of value.lines) halves.appendChild(renderLine(half));
          inside.appendChild(halves);
        }
      } catch (e) { loaded = false; say(e.message); }
    });
    return item;
  }

  async function showMessage(box, id, page) {
    const value = await call("zoom", { memoryId: state.memory, id: id, n: 1, page: page });
    const m = value.message;
    box.textContent = "";
    const card = el("div", "message");
    card.id = "message-" + m.id;
    card.appendChild(el("div", "turn-meta", (KIND_LABEL[m.kind] || m.kind) + " · message " + m.id + " · " + (m.sessionTitle || "") + " · " + when(m.at)));
    card.appendChild(el("div", "text", m.text));
    if (m.pages > 1) {
      const pager = el("div", "pager");
      const prev = el("button", null, "Previous page");
      prev.type = "button"; prev.disabled = m.page <= 1;
      prev.addEventListener("click", () => showMessage(box, id, m.page - 1).catch((e) => say(e.message)));
      const next = el("button", null, "Next page");
      next.type = "button"; next.disabled = m.page >= m.pages;
      next.addEventListener("click", () => showMessage(box, id, m.page + 1).catch((e) => say(e.message)));
      pager.appendChild(prev);
      pager.appendChild(el("span", "page-of", "page " + m.page + " of " + m.pages));
      pager.appendChild(next);
      card.appendChild(pager);
    }
    box.appendChild(card);
  }

  // -- tabs and keys ---------------------------------------------------------------------------
  function selectTab(name) {
    for (const tab of ["conversation", "remembers"]) {
      const on = tab === name;
      const button = $("tab-" + tab);
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
      $(tab).hidden = !on;
    }
  }

  function guarded(fn) {
    return (...args) => { say(""); return Promise.resolve(fn(...args)).catch((e) => say(e.message)); };
  }

  function start() {
    $("tab-conversation").addEventListener("click", () => selectTab("conversation"));
    $("tab-remembers").addEventListener("click", () => selectTab("remembers"));
    $("tab-conversation").addEventListener("keydown", (e) => {
      if (e.key === "ArrowRight") { selectTab("remembers"); $("tab-remembers").focus(); }
    });
    $("tab-remembers").addEventListener("keydown", (e) => {
      if (e.key === "ArrowLeft") { selectTab("conversation"); $("tab-conversation").focus(); }
    });
    $("memory").addEventListener("change", guarded((e) => openMemory(e.target.value)));
    $("earlier").addEventListener("click", guarded(showEarlier));
    $("newest").addEventListener("click", guarded(loadNewest));
    $("search").addEventListener("submit", guarded((e) => { e.preventDefault(); return runSearch($("query").value); }));
    $("clear-search").addEventListener("click", () => clearSearch(true));
    document.addEventListener("keydown", (e) => {
      if (e.key === "/" && document.activeElement.tagName !== "INPUT") { e.preventDefault(); selectTab("conversation"); $("query").focus(); }
    });
    guarded(loadMemories)();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
