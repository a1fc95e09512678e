// The History page of an Endless memory: plain JavaScript, no build step.
// Text from the memory is only ever put into the page with textContent (never as HTML).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = {
    memory: null, memories: [], turns: [], next: null, later: null, query: "", matcher: null,
    hits: [], hitsNext: null, hitsBelow: null,
    seq: 0, generation: 0, tab: "conversation", scroll: { conversation: 0, remembers: 0 },
    opened: new Set(),  // ids of long messages opened whole (kept across re-renders)
    openers: new Map(),  // id of a collapsed message -> a function that opens it
  };
  const PAGE_TURNS = 50;

  // What the page says when it cannot go on, in the reader's words: what happened, what to do.
  const SAY = {
    gone: "The Endless server is not answering: it has stopped, or its address changed. Start it again " +
          "with `endless serve` in a terminal and open the new address it prints.",
    unknown: "The server no longer knows this page (it was restarted since the page opened). Open the new " +
             "address that `endless serve` printed when it started, or run it again for one.",
    noMemory: "There is no memory to read yet: make one first (chat through Endless, or run " +
              "`endless import FILE`), then reload this page.",
  };

  // -- talking to the server ------------------------------------------------------------
  async function call(method, args) {
    let response;
    try {
      response = await fetch("/api/endless-ui." + method, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ type: "client-request", rpcId: ++state.seq, method: "endless." + method,
                               payload: { args: args || {} } }),
      });
    } catch (e) {
      throw new Error(SAY.gone);  // the browser says only "Failed to fetch"
    }
    if (response.status === 403) throw new Error(SAY.unknown);
    let data = null;
    try { data = await response.json(); } catch (e) { /* not an envelope */ }
    if (!data || !data.result) {
      throw new Error("The server answered " + response.status + " instead of an answer; reload the page, " +
                      "or restart `endless serve` if it keeps happening.");
    }
    if (!data.result.ok) throw new Error(data.result.error.message);
    return data.result.value;
  }

  // A line under the toolbar: an error (what went wrong, what to do), or a note.  A `command`
  // in it is shown as code.
  function say(message, note) {
    const status = $("status");
    status.textContent = "";
    (message || "").split("`").forEach((part, k) => {
      if (part) status.appendChild(k % 2 ? el("code", null, part) : document.createTextNode(part));
    });
    status.classList.toggle("note", Boolean(note));
    barHeight();  // now, not at the next frame: a jump may follow at once
  }

  function needMemory() {
    if (!state.memory) throw new Error(SAY.noMemory);
  }

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
  function dayTitleOfKey(key) {
    const [y, m, d] = key.split("-").map(Number);
    return dayTitle(new Date(y, m - 1, d).getTime() / 1000);
  }

  // -- highlighting ----------------------------------------------------------------------------
  // A /pattern/ as the server reads it (Python's `regex`, any case, ^ and $ at every line) in
  // JavaScript's dialect: named groups spelt (?P<name>) and (?P=name), inline flags at the start.
  function patternMatcher(body) {
    let flags = "gim";
    const inline = body.match(/^\(\?([aiLmsux]+)\)/);
    if (inline) {
      body = body.slice(inline[0].length);
      if (inline[1].includes("s")) flags += "s";
    }
    body = body.replace(/\(\?P</g, "(?<").replace(/\(\?P=(\w+)\)/g, "\\k<$1>");
    try { return new RegExp(body, flags + "u"); } catch (e) { /* not valid with u: try without */ }
    return new RegExp(body, flags);
  }

  // The search as a RegExp for highlighting in the conversation; null if none.  A /pattern/ is
  // itself; a "quoted phrase" its words with any whitespace between; plain words each word and
  // the endings the server's stemming folds onto it (deploy: deploying, deployed).
  function matcherFor(query) {
    if (!query) return null;
    const escape = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    try {
      if (query.length > 2 && query.startsWith("/") && query.endsWith("/")) return patternMatcher(query.slice(1, -1));
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

  function countMatches(text, matcher) {
    if (!matcher || !text) return 0;
    let count = 0, m;
    matcher.lastIndex = 0;
    while ((m = matcher.exec(text)) !== null && count < 2000) {
      if (m[0].length === 0) { matcher.lastIndex++; continue; }
      count++;
    }
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
    state.memories = list;
    for (const m of list) {
      const option = el("option", null, m.project + " · " + m.turns + " turns" + (m.lastAt ? " · " + when(m.lastAt) : ""));
      option.value = m.memoryId;
      option.title = m.agent + " · " + m.memoryId;
      select.appendChild(option);
    }
    if (!list.length) { showNoMemory(); return; }
    select.value = list[0].memoryId;
    await openMemory(list[0].memoryId);
  }

  // No memory at all: say how to make one, in both tabs, and keep the controls from failing.
  function showNoMemory() {
    state.memory = null;
    const select = $("memory");
    select.appendChild(el("option", null, "no memory yet"));
    select.disabled = true;
    $("no-memory").hidden = false;
    $("conversation").classList.add("empty-tab");
    $("remembers").classList.add("empty-tab");
  }

  async function openMemory(id) {
    state.memory = id;
    state.generation++;
    state.opened.clear();
    state.scroll = { conversation: 0, remembers: 0 };
    clearSearch(false);
    const url = new URL(location.href);
    url.searchParams.set("memory", id);
    history.replaceState(null, "", url.pathname + url.search);
    const summary = state.memories.find((m) => m.memoryId === id);
    const day = $("day");
    day.min = summary && summary.firstAt ? dayKey(summary.firstAt) : "";
    day.max = summary && summary.lastAt ? dayKey(summary.lastAt) : "";
    day.value = "";
    if (state.tab === "remembers") window.scrollTo(0, 0);
    await Promise.all([loadNewest(), loadLines()]);
  }

  // -- conversation: which turns are on the page ---------------------------------------------
  // The page holds one unbroken run of turns; `next` (older) and `later` (newer) say what lies
  // beyond it.  A fresh page replaces the run; an earlier or later page extends it.
  async function loadPage(args, how) {
    needMemory();
    const generation = state.generation;
    const value = await call("history", Object.assign({ memoryId: state.memory, limit: PAGE_TURNS }, args));
    if (generation !== state.generation) return null;
    if (how === "fresh") state.turns = [];
    const known = new Set(state.turns.map((t) => t.turn));
    state.turns = state.turns.concat(value.turns.filter((t) => !known.has(t.turn)));
    state.turns.sort((a, b) => a.turn - b.turn);
    if (how !== "later") state.next = value.next === undefined ? null : value.next;
    if (how !== "earlier") state.later = value.later === undefined ? null : value.later;
    renderTurns();
    return value;
  }

  function atBottom() {
    const root = document.documentElement;
    if (state.tab === "conversation") window.scrollTo(0, root.scrollHeight);
    else state.scroll.conversation = "bottom";  // where the tab opens next
  }

  async function loadNewest() {
    if (await loadPage({}, "fresh")) atBottom();  // the newest turn at the bottom, as in a chat
  }

  async function loadOldest() {
    if (await loadPage({ from: 0 }, "fresh")) window.scrollTo(0, 0);
  }

  async function loadDay(key) {
    if (!key) return;
    const [y, m, d] = key.split("-").map(Number);
    const midnight = new Date(y, m - 1, d).getTime() / 1000;  // the reader's own midnight, as days are drawn
    const value = await loadPage({ since: midnight }, "fresh");
    if (!value) return;
    if (!value.turns.length) {
      await loadNewest();
      say("Nothing was said on or after " + dayTitleOfKey(key) + "; these are the newest turns.", true);
      return;
    }
    const first = value.turns[0];
    if (first.at && dayKey(first.at) !== key) {
      say("Nothing was said on " + dayTitleOfKey(key) + "; this is the next day with turns.", true);
    }
    $("turn-" + first.turn).scrollIntoView({ block: "start" });
  }

  async function showEarlier() {
    if (state.next === null) return;
    const before = document.documentElement.scrollHeight - window.scrollY;
    if (await loadPage({ before: state.next }, "earlier")) {
      window.scrollTo(0, document.documentElement.scrollHeight - before);  // stay where the reader was
    }
  }

  async function showLater() {
    if (state.later !== null) await loadPage({ from: state.later }, "later");
  }

  // -- conversation: drawing ------------------------------------------------------------------
  function renderTurns() {
    const days = $("days");
    days.textContent = "";
    state.openers.clear();
    let section = null, key = null;
    for (const turn of state.turns) {
      const k = turn.at ? dayKey(turn.at) : "unknown";  // each turn's own time (an import keeps it)
      if (k !== key) {
        key = k;
        section = el("section", "day");
        section.appendChild(el("h2", null, turn.at ? dayTitle(turn.at) : "Turns without a known time"));
        days.appendChild(section);
      }
      section.appendChild(renderTurn(turn));
    }
    if (!state.turns.length) {
      days.appendChild(el("p", "empty", "This memory has no turns yet. Chat through Endless (Hermes, or " +
                                        "`endless chat`) or run `endless import FILE`, then reload this page."));
    }
    $("earlier").hidden = state.next === null;
    $("later").hidden = state.later === null;
  }

  const KIND_LABEL = { user: "you", reply: "assistant", trace: "tools", call: "did", result: "result",
                       said: "said", work: "colleague", status: "note", note: "note", title: "the chat's title" };

  function renderTurn(turn) {
    const article = el("article", "turn");
    article.id = "turn-" + turn.turn;
    const meta = el("div", "turn-meta");
    meta.appendChild(el("span", "turn-title", turn.sessionTitle || "(untitled chat)"));
    meta.appendChild(el("span", null, when(turn.at)));
    meta.appendChild(el("span", null, "turn " + turn.turn));
    meta.appendChild(el("span", "status status-" + (turn.status || "damaged"), turn.status || "damaged"));
    if (turn.entries.some((e) => !e.forgottenAt)) {
      meta.appendChild(forgetButton("Forget turn", { turns: [turn.turn] }, "turn " + turn.turn +
                                    " (" + turn.entries.length + " messages)", turn.turn));
    }
    article.appendChild(meta);
    for (const entry of turn.entries) article.appendChild(renderEntry(entry, turn.turn));
    return article;
  }

  // Forgetting: the words leave the memory for good (ids stay, as tombstones).  Asked first, always.
  function forgetButton(label, what, name, turnNumber) {
    const button = el("button", "forget", label);
    button.type = "button";
    button.addEventListener("click", guarded(async () => {
      const dry = await call("forget", Object.assign({ memoryId: state.memory, dryRun: true }, what));
      if (!dry.messages.length) return say("Nothing to forget there: it was forgotten already.", true);
      const ok = window.confirm("Forget " + name + "? Its words are removed from this memory for good " +
                                "and every summary line written from them is written again.\n\n" +
                                dry.cannotReach);
      if (!ok) return say("Nothing was forgotten.", true);
      const done = await call("forget", Object.assign({ memoryId: state.memory }, what));
      const page = await call("history", { memoryId: state.memory, from: turnNumber, limit: 1 });
      state.turns = state.turns.map((t) => (t.turn === turnNumber && page.turns.length ? page.turns[0] : t));
      renderTurns();
      const n = done.messages.length;
      say("Forgot " + n + (n === 1 ? " message. " : " messages. ") + done.cannotReach, true);
    }));
    return button;
  }

  function renderEntry(entry, turnNumber) {
    const box = el("div", "entry kind-" + entry.kind + (entry.forgottenAt ? " forgotten" : ""));
    box.id = "m-" + entry.id;
    const head = el("div", "entry-kind", (KIND_LABEL[entry.kind] || entry.kind) + " · " + entry.id);
    if (!entry.forgottenAt && turnNumber !== undefined) {
      head.appendChild(forgetButton("Forget", { ids: [entry.id] }, "message " + entry.id, turnNumber));
    }
    box.appendChild(head);
    const text = el("div", "text");
    text.id = "text-" + entry.id;
    box.appendChild(text);
    const cut = previewEnd(entry.text || "");
    if (cut < 0) fillText(text, entry.text, state.matcher);
    else collapsible(box, text, entry, cut);
    if (entry.truncated) box.appendChild(el("div", "hint", "(cut to fit this page; open it in Remembers)"));
    return box;
  }

  // A message this long is shown as its start and a control that opens it in place (and closes it).
  const LONG_CHARS = 3000, LONG_LINES = 60, PREVIEW_CHARS = 1000, PREVIEW_LINES = 12;

  // Where the shown start of a long message ends; -1 for a message short enough to show whole.
  function previewEnd(text) {
    let lines = 0, at = -1, cutLine = -1;
    while ((at = text.indexOf("\n", at + 1)) !== -1) {
      lines++;
      if (lines === PREVIEW_LINES) cutLine = at;
      if (lines > LONG_LINES) break;
    }
    if (text.length <= LONG_CHARS && lines <= LONG_LINES) return -1;
    let end = Math.min(PREVIEW_CHARS, cutLine === -1 ? text.length : cutLine);
    const space = text.lastIndexOf(" ", end);
    if (space > end - 80 && space > 0) end = space;  // not in the middle of a word
    return end;
  }

  function collapsible(box, text, entry, cut) {
    const toggle = el("button", "more");
    toggle.type = "button";
    toggle.setAttribute("aria-controls", text.id);
    const size = entry.text.length.toLocaleString();
    const show = (open) => {
      if (open) state.opened.add(entry.id); else state.opened.delete(entry.id);
      fillText(text, open ? entry.text : entry.text.slice(0, cut), state.matcher);
      box.classList.toggle("collapsed", !open);
      toggle.setAttribute("aria-expanded", String(open));
      const hidden = open ? 0 : countMatches(entry.text.slice(cut), state.matcher);
      toggle.textContent = open ? "Show less (" + size + " characters)"
        : "Show all " + size + " characters" + (hidden ? " (" + hidden + " more highlighted)" : "");
    };
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") === "true";
      show(!open);
      // Closing a long message read far down leaves its start above the screen: go back to it.
      if (open && box.getBoundingClientRect().top < $("top").offsetHeight) box.scrollIntoView({ block: "start" });
    });
    box.appendChild(toggle);
    show(state.opened.has(entry.id));
    state.openers.set(entry.id, () => { if (!state.opened.has(entry.id)) show(true); });
  }

  // -- search -------------------------------------------------------------------------------
  async function runSearch(query) {
    query = query.trim();
    if (!query) { clearSearch(true); return; }
    needMemory();
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
    state.hits = [];
    $("hits").textContent = "";
    addHits(value);
    $("hits-box").hidden = false;
    listShown(true);
    $("clear-search").hidden = false;
    renderTurns();
  }

  async function moreHits() {
    const generation = state.generation;
    const value = await call("search", { memoryId: state.memory, query: state.query, limit: 50,
                                         offset: state.hitsNext, below: state.hitsBelow });
    if (generation === state.generation) addHits(value);
  }

  function addHits(value) {
    const list = $("hits");
    const old = $("more-hits");
    if (old) old.remove();
    for (const hit of value.hits) {
      state.hits.push(hit);
      list.appendChild(renderHit(hit, state.hits.length));
    }
    state.hitsNext = value.more ? value.next : null;
    state.hitsBelow = value.below === undefined ? null : value.below;
    const query = state.query;
    const order = value.mode === "words" ? ", best first" : ", newest first";
    $("hits-title").textContent = state.hits.length
      ? state.hits.length + (value.more ? "+" : "") + " hits for " + query + order
      : "No hits for " + query;
    if (value.partial) {  // a search its time limit cut: say which messages it covered
      const from = value.searched.from, to = value.searched.to;
      $("hits-title").textContent += from !== null && from < to
        ? " (partial: the search stopped at its time limit and searched messages " + from + " to " + (to - 1)
          + " only; search again with below " + value.goOn.below + " for the older ones)"
        : " (partial: the search stopped at its time limit before it searched a message)";
    }
    if (value.more) {
      const item = el("li", "more-hits");
      item.id = "more-hits";
      const button = el("button", null, "More hits");
      button.type = "button";
      button.addEventListener("click", guarded(moreHits));
      item.appendChild(button);
      list.appendChild(item);
    }
  }

  // A hit: its number beside a meta line, the snippet under the meta line (a grid keeps them so).
  function renderHit(hit, number) {
    const item = el("li");
    const button = el("button", "hit");
    button.type = "button";
    button.appendChild(el("span", "hit-n", number + "."));
    button.appendChild(el("span", "hit-meta", (hit.sessionTitle || "(untitled chat)") + " · " + when(hit.at) +
                                              " · " + (KIND_LABEL[hit.kind] || hit.kind) + " · #" + hit.id));
    const snippet = el("span", "hit-snippet text");
    fillMarked(snippet, hit.snippet, hit.marks);
    button.appendChild(snippet);
    button.addEventListener("click", guarded(() => goToHit(hit)));
    item.appendChild(button);
    return item;
  }

  function listShown(on) {
    $("hits").hidden = !on;
    const toggle = $("hits-toggle");
    toggle.setAttribute("aria-expanded", String(on));
    toggle.textContent = on ? "Hide the list" : "Show the list";
  }

  function clearSearch(rerender) {
    state.query = ""; state.matcher = null; state.hits = [];
    $("query").value = "";
    $("hits").textContent = "";
    $("hits-box").hidden = true;
    $("clear-search").hidden = true;
    if (rerender) renderTurns();
  }

  async function goToHit(hit) {
    if (!state.turns.some((t) => t.turn === hit.turn) && hit.turn !== null) {
      await loadPage({ before: hit.turn + 3 }, "fresh");
    }
    const opener = state.openers.get(hit.id);
    if (opener) opener();  // the words may be in the part of a long message not shown
    const target = $("m-" + hit.id);
    if (!target) return;
    for (const old of document.querySelectorAll(".current-hit")) old.classList.remove("current-hit");
    target.classList.add("current-hit");
    target.tabIndex = -1;
    (target.querySelector("mark") || target).scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
  }

  // -- remembers ------------------------------------------------------------------------------
  async function loadLines() {
    const generation = state.generation;
    const value = await call("view", { memoryId: state.memory });
    if (generation !== state.generation) return;
    const list = $("lines");
    list.textContent = "";
    if (!value.lines.length) {
      list.appendChild(el("li", "empty", "Nothing remembered yet: the view gets its first line with the " +
                                         "memory's first turn."));
    }
    addLines(value.lines, 0);
  }

  // Right after a long import the view holds thousands of unwritten lines: drawn a batch at a time.
  const LINES_AT_ONCE = 500;

  function addLines(lines, start) {
    const list = $("lines");
    const end = Math.min(lines.length, start + LINES_AT_ONCE);
    for (let k = start; k < end; k++) list.appendChild(renderLine(lines[k]));
    if (end >= lines.length) return;
    const item = el("li", "more-lines");
    const button = el("button", null, "Show the next " + Math.min(LINES_AT_ONCE, lines.length - end) +
                                      " lines (" + (lines.length - end).toLocaleString() + " more)");
    button.type = "button";
    button.addEventListener("click", () => { item.remove(); addLines(lines, end); });
    item.appendChild(button);
    list.appendChild(item);
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

  // -- tabs, the toolbar's height and keys -----------------------------------------------------
  // Each tab keeps its own place: Remembers first opens at its top (its explanation), and
  // Conversation comes back where the reader left it.
  function selectTab(name) {
    if (name === state.tab) return;
    state.scroll[state.tab] = window.scrollY;
    state.tab = name;
    for (const tab of ["conversation", "remembers"]) {
      const on = tab === name;
      const button = $("tab-" + tab);
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
      $(tab).hidden = !on;
    }
    $("tools").hidden = name !== "conversation";
    $("hits-box").hidden = name !== "conversation" || !state.query;
    const y = state.scroll[name];
    window.scrollTo(0, y === "bottom" ? document.documentElement.scrollHeight : y || 0);
  }

  // Day headings stick under the toolbar and jumps land below it, whatever its height.
  function barHeight() {
    document.documentElement.style.setProperty("--bar", $("top").offsetHeight + "px");
  }

  function trackToolbarHeight() {
    barHeight();
    if (window.ResizeObserver) new ResizeObserver(barHeight).observe($("top"));
  }

  function guarded(fn) {
    return (...args) => {
      say("");
      let result;
      try { result = fn(...args); } catch (e) { result = Promise.reject(e); }
      return Promise.resolve(result).catch((e) => say(e.message));
    };
  }

  function start() {
    trackToolbarHeight();
    // A phone has no "/" key at hand and little room: the hint is the query language only.
    if (window.matchMedia("(max-width: 480px)").matches) $("query").placeholder = 'Words, "phrase", /pattern/';
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
    $("later").addEventListener("click", guarded(showLater));
    $("newest").addEventListener("click", guarded(loadNewest));
    $("oldest").addEventListener("click", guarded(loadOldest));
    $("day").addEventListener("change", guarded((e) => loadDay(e.target.value)));
    $("search").addEventListener("submit", guarded((e) => { e.preventDefault(); return runSearch($("query").value); }));
    $("clear-search").addEventListener("click", () => clearSearch(true));
    $("hits-toggle").addEventListener("click", () => listShown($("hits").hidden));
    document.addEventListener("keydown", (e) => {
      const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
      if (e.key === "/" && !typing) { e.preventDefault(); selectTab("conversation"); $("query").focus(); }
    });
    guarded(loadMemories)();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
