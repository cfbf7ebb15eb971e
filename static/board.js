// Switchboard Board: the todo drawer as a modal dialog, and live updates over SSE.
// No third-party code. Everything here enhances server-rendered HTML: without JavaScript
// the Board, the drawer page (/todos/{id}) and every action still work.
(function () {
  "use strict";

  var state = {
    drawerId: null,   // the todo whose drawer is open
    opener: null,     // the element that opened it, to return focus to
    pushed: false,    // we pushed /todos/{id} onto the history
    ignorePop: false,
    source: null,     // the EventSource
    retry: null,
    paused: false,    // the reader paused live updates
    held: {},         // new rows held back: id -> row
    moved: {},        // rows changed in place that would sort elsewhere: id -> true
    announce: null,   // the pending notice update
    said: "",         // the notice's text now, and when it last changed
    saidAt: 0,
    saidBy: {}        // todos whose change another member's action was just said for: id -> timer
  };

  function byId(id) { return document.getElementById(id); }
  function drawer() { return byId("drawer"); }
  function parse(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    return tpl.content;
  }

  // -- patching server-rendered fragments without losing focus or typed text ----------

  function replacePreserving(oldEl, newEl) {
    if (oldEl.outerHTML === newEl.outerHTML) return oldEl;
    var active = document.activeElement;
    var focusId = active && oldEl.contains(active) ? active.id : null;
    var values = {}, checked = {};
    oldEl.querySelectorAll("textarea[id], input[id]:not([type=hidden])").forEach(function (el) {
      values[el.id] = el.value;
      if (el.type === "checkbox") checked[el.id] = el.checked;  // a row's bulk selection
    });
    oldEl.replaceWith(newEl);
    Object.keys(values).forEach(function (id) {
      var el = byId(id);
      if (el && newEl.contains(el)) el.value = values[id];
      if (el && newEl.contains(el) && id in checked) el.checked = checked[id];
    });
    if (focusId && byId(focusId)) byId(focusId).focus();
    return newEl;
  }

  // Keyed patch of a list's children (attempts, table rows): keep unchanged nodes, replace
  // changed ones, insert new ones in order, remove vanished ones. A new attempt is therefore
  // a single insertion inside the aria-live region, announced once.
  function patchChildren(container, freshChildren) {
    var keep = {};
    var prev = null;
    freshChildren.forEach(function (fresh) {
      keep[fresh.id] = true;
      var cur = null;
      for (var c = container.firstElementChild; c; c = c.nextElementSibling) {
        if (c.id === fresh.id) { cur = c; break; }
      }
      var node = cur ? replacePreserving(cur, fresh) : fresh;
      var want = prev ? prev.nextElementSibling : container.firstElementChild;
      if (want !== node) container.insertBefore(node, want);
      prev = node;
    });
    Array.prototype.slice.call(container.children).forEach(function (c) {
      if (!keep[c.id]) c.remove();
    });
  }

  // -- the todo list -----------------------------------------------------------------
  // The list is a stable window: the page the person loaded. New todos never insert
  // themselves into it, focused or not: they are held, counted in one polite notice
  // ("3 new todos, 2 changed") and shown on request. A row that changes is updated where it
  // is; one the updated sort would move up is counted as changed and moved only on request.
  // So the rows of an idle tab stay as many as its page holds, each where it was.

  function rowsBody() { return byId("todo-rows"); }

  function updateEmpty() {
    var body = rowsBody(), empty = byId("todo-empty");
    if (body && empty) empty.hidden = body.children.length > 0;
    syncSelectPage();
  }

  // -- bulk selection: "select all on this page" (the bulk form works without it) ------

  function rowBoxes() {
    return Array.prototype.slice.call(document.querySelectorAll("#todo-rows input[name=ids]"));
  }

  function syncSelectPage() {
    var all = byId("select-page");
    if (!all) return;
    var boxes = rowBoxes();
    var n = boxes.filter(function (b) { return b.checked; }).length;
    all.checked = boxes.length > 0 && n === boxes.length;
    all.indeterminate = n > 0 && n < boxes.length;
  }

  function setUpSelectPage() {
    var all = byId("select-page");
    if (!all) return;
    all.hidden = false;
    all.addEventListener("change", function () {
      rowBoxes().forEach(function (b) { b.checked = all.checked; });
    });
    document.addEventListener("change", function (e) {
      if (e.target.name === "ids") syncSelectPage();
    });
    syncSelectPage();
  }

  // -- the bulk bar: the bulk buttons next to the selection ---------------------------
  // Without this script the buttons stay in the bulk form above the list. Here they become a
  // bar fixed at the bottom of the window while anything is selected, placed in the page
  // right after the row box last ticked (so the next Tab reaches them, not eight Shift+Tabs
  // back); for "select all on this page" and "all in this view" it is their own place above
  // the list, one Shift+Tab or one Tab away. A polite live region says the count once per
  // change. Rows redrawn live are new elements: the bar is put back after the same box.

  var bulk = { bar: null, home: null, label: null, said: "", anchorId: null, focused: -1 };

  function bulkWords() {
    var every = byId("bulk-every");
    if (every && every.checked) {
      var label = document.querySelector("label[for=bulk-every]");
      return "Selected: " + label.textContent.trim().replace(/^All/, "all");
    }
    var n = rowBoxes().filter(function (b) { return b.checked; }).length;
    return n ? n + " selected" : "";
  }

  function placeBulkBar(changed) {
    var bar = bulk.bar, words = bulkWords();
    if (changed && changed.name !== "ids") bulk.anchorId = null;
    else if (changed && changed.checked) bulk.anchorId = changed.id;
    var anchor = bulk.anchorId && byId(bulk.anchorId);
    if (bulk.anchorId && !(anchor && anchor.checked)) {  // unticked or gone: the last box still ticked
      var ticked = rowBoxes().filter(function (b) { return b.checked; });
      anchor = ticked[ticked.length - 1] || null;
      bulk.anchorId = anchor && anchor.id;
    }
    var where = words && anchor ? anchor.parentNode : bulk.home;
    if (bar.parentNode !== where) where.appendChild(bar);
    bar.hidden = !words;
    bulk.label.textContent = words;
    // The bar covers the window's last lines: keep a focused control from going under it.
    document.documentElement.style.scrollPaddingBottom = words ? (bar.offsetHeight + 8) + "px" : "";
  }

  function sayBulkCount() {
    var words = bulkWords() || (bulk.said ? "None selected" : "");
    if (words === bulk.said) return;
    bulk.said = words;
    byId("bulk-selected").textContent = words;
  }

  function setUpBulkBar() {
    var form = byId("bulk-form"), buttons = form && form.querySelector(".buttons");
    if (!buttons || !byId("bulk-selected") || !window.MutationObserver) return;
    var bar = document.createElement("div");
    bar.id = "bulk-bar";
    bar.className = "bulk-bar";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-labelledby", "bulk-bar-count");
    bar.hidden = true;
    var label = document.createElement("span");
    label.id = "bulk-bar-count";
    label.className = "bulk-bar-count";
    bar.appendChild(label);
    buttons.parentNode.insertBefore(bar, buttons);
    bar.appendChild(buttons);
    buttons.querySelectorAll("button").forEach(function (b) { b.setAttribute("form", "bulk-form"); });
    bulk.bar = bar;
    bulk.home = bar.parentNode;
    bulk.label = label;
    // Which of its buttons has focus (a removed element takes focus away without a focusin).
    document.addEventListener("focusin", function (e) {
      bulk.focused = Array.prototype.indexOf.call(bar.querySelectorAll("button"), e.target);
    });
    document.addEventListener("change", function (e) {
      var el = e.target;
      if (el.name !== "ids" && el.id !== "select-page" && el.id !== "bulk-every") return;
      placeBulkBar(el);
      sayBulkCount();
    });
    // A row redrawn or removed live takes the bar with it: put it back, and focus with it.
    new MutationObserver(function () {
      var lost = !bar.isConnected;
      if (!lost && bulkWords() === bulk.label.textContent) return;
      var had = bulk.focused;
      placeBulkBar(null);
      sayBulkCount();
      var back = bar.querySelectorAll("button")[had];
      if (lost && back && !bar.hidden && document.activeElement === document.body) back.focus();
    }).observe(rowsBody(), { childList: true, subtree: true });
    // Back from the bulk confirmation: the same boxes come ticked; the last one gets focus
    // (rather than a search's heading; a message to read still comes first), the bar after it.
    var params = new URLSearchParams(location.search), every = byId("bulk-every");
    var boxes = params.getAll("selected").map(function (id) { return byId("select-" + id); })
      .filter(function (b) { return b && b.checked; });  // in the order they were posted
    bulk.anchorId = boxes.length ? boxes[boxes.length - 1].id : null;
    placeBulkBar(null);
    bulk.said = bulkWords();
    var first = document.querySelector("[data-focus-on-load]");
    var last = every && every.checked ? every : boxes[boxes.length - 1];
    if ((params.has("selected") || params.has("every")) && last && (!first || first.id === "results-heading")) {
      if (first) first.removeAttribute("data-focus-on-load");
      last.focus();
    }
  }

  // A link to a todo in a message (the one just added) opens its drawer, like the list's.
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.flash-link");
    var m = link && link.getAttribute("href").match(/^\/todos\/([^/?#]+)$/);
    if (m && byId("board") && e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey) {
      e.preventDefault();
      openDrawer(decodeURIComponent(m[1]), link, true, link.href);
    }
  });

  // -- the vend result: copy the token -----------------------------------------------

  function setUpCopy() {
    var button = byId("copy-token"), token = byId("new-token"), status = byId("copy-status");
    if (!button || !token || !status) return;
    button.hidden = false;
    function say(text) { status.textContent = text; }
    function selectToken() {
      var range = document.createRange();
      range.selectNodeContents(token);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      say("Could not copy by itself: the token is selected, press Ctrl+C to copy it.");
    }
    button.addEventListener("click", function () {
      say("");
      if (!navigator.clipboard || !navigator.clipboard.writeText) { selectToken(); return; }
      navigator.clipboard.writeText(token.textContent.trim())
        .then(function () { say("Token copied to the clipboard."); }, selectToken);
    });
  }

  // -- the vend form's presets: tick a preset's verbs in place rather than load its page --

  function setUpPresets() {
    var status = byId("preset-status");
    if (!status) return;
    var form = status.closest("form");
    form.querySelectorAll("a[data-verbs]").forEach(function (link) {
      link.addEventListener("click", function (e) {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();  // keep what is typed in the form; tick here what the link's page would
        var verbs = link.dataset.verbs.split(" ");
        form.querySelectorAll("input[name=verbs]").forEach(function (box) {
          box.checked = verbs.indexOf(box.value) >= 0;
        });
        status.textContent = link.textContent.trim() + " preset: its " + verbs.length + " verbs are ticked.";
      });
    });
  }

  function parseRows(html) {
    return Array.prototype.slice.call(parse("<table><tbody>" + html + "</tbody></table>").querySelector("tbody").children);
  }

  // Sorted newest first by a time (created or updated), the page can place a new or changed
  // row itself; in any other order it counts them, and showing them reloads the view.
  function byTime() {
    var sort = rowsBody().dataset.sort;
    return sort === "created" || sort === "updated";
  }

  function sortKey(row) { // the time the list is sorted by (newest first), then the id
    if (rowsBody().dataset.sort === "updated") {
      var t = row.querySelector("time[data-updated]");
      return t ? t.getAttribute("datetime") : "";
    }
    return row.dataset.created;
  }

  function newer(a, b) { // does row a sort before row b?
    var ka = sortKey(a), kb = sortKey(b);
    return ka > kb || (ka === kb && a.dataset.id > b.dataset.id);
  }

  // Where a row goes on this page: before that row, at the end (null), or not here at all
  // (false): past the last row of a page that has more, or above the first of an older page.
  function placeFor(row) {
    var body = rowsBody();
    for (var r = body.firstElementChild; r; r = r.nextElementSibling) {
      if (r !== row && newer(row, r)) {
        return r === body.firstElementChild && "olderPage" in body.dataset ? false : r;
      }
    }
    if (row.parentNode === body) return null; // already here, and the oldest
    return body.dataset.hasMore === "true" && body.children.length ? false : null;
  }

  function place(row) {
    var before = placeFor(row);
    if (before === false) { row.remove(); return false; }
    rowsBody().insertBefore(row, before);
    return true;
  }

  function holding() {
    // Only an empty list takes a new todo straight in: there is nothing for it to move.
    var body = rowsBody();
    return Object.keys(state.held).length > 0 || !!(body && body.children.length > 0);
  }

  function heldCount() { return Object.keys(state.held).length; }

  function noticeWords() {
    var n = heldCount(), m = Object.keys(state.moved).length, parts = [];
    if (n) parts.push(n + " new todo" + (n === 1 ? "" : "s"));
    if (m) parts.push(m + " changed");
    return parts.join(", ");
  }

  // The notice's text changes only when the counts do, and at most once every few seconds,
  // so a busy queue is one short announcement now and then, not a stream of them.
  var NOTICE_GAP_MS = 3000;

  function showHeldNotice() {
    var words = noticeWords();
    var button = byId("show-new-todos"), notice = byId("new-todos");
    if (button) {
      button.hidden = !words;
      button.textContent = heldCount() ? "Show the new todos" : "Put the changed rows in order";
      button.setAttribute("aria-describedby", "new-todos");
    }
    clearTimeout(state.announce);
    if (!notice) return;
    if (!words) { notice.textContent = ""; state.said = ""; return; }
    if (words === state.said) return;
    var wait = Math.max(700, state.saidAt + NOTICE_GAP_MS - Date.now());
    state.announce = setTimeout(function () {
      var now = noticeWords();
      if (!now || now === state.said) return;
      notice.textContent = now;
      state.said = now;
      state.saidAt = Date.now();
    }, wait);
  }

  function hold(row) {
    if (byTime() && placeFor(row) === false) return; // not on this page anyway
    state.held[row.id] = row;
    showHeldNotice();
  }

  function unhold(id) {
    if (!state.held[id] && !state.moved[id]) return;
    delete state.held[id];
    delete state.moved[id];
    showHeldNotice();
  }

  function showHeld() {
    if (!byTime()) { location.reload(); return; }
    var rows = Object.keys(state.held).map(function (id) { return state.held[id]; });
    var moved = Object.keys(state.moved).map(byId).filter(Boolean);
    state.held = {};
    state.moved = {};
    rows.sort(function (a, b) { return newer(a, b) ? -1 : 1; });
    var first = null;
    moved.forEach(function (row) { place(row); });
    rows.forEach(function (row) { if (place(row) && !first) first = row; });
    trimToPage();
    showHeldNotice();
    updateEmpty();
    var link = first && first.querySelector("a.todo-link");
    if (link) link.focus();
    else if (byId("results-heading")) byId("results-heading").focus();
  }

  // Past the page's size the oldest rows leave this page; the "Older todos" link then starts
  // the next page right after the last row kept, so the rows that left are on it.
  function trimToPage() {
    var body = rowsBody(), size = parseInt(body.dataset.pageSize || "0", 10);
    if (!size || body.children.length <= size) return;
    while (body.children.length > size) body.lastElementChild.remove();
    body.dataset.hasMore = "true";
    var link = byId("older-todos"), cursor = body.lastElementChild && body.lastElementChild.dataset.cursor;
    if (!link || !cursor) return;
    var url = new URL(link.href);
    url.searchParams.set("cursor", cursor);
    link.href = url.pathname + url.search;
    byId("older-todos-line").hidden = false;
  }

  // A fresh row for one already shown: updated where it is. If the updated sort would now
  // put it elsewhere, it is counted as changed and moved only on request.
  function refresh(existing, fresh) {
    var node = replacePreserving(existing, fresh);
    if (rowsBody().dataset.sort === "updated" && placeFor(node) !== node.nextElementSibling) {
      state.moved[node.id] = true;
      showHeldNotice();
    }
    return node;
  }

  function applyRows(html, hasMore) {
    var body = rowsBody();
    if (!body) return;
    var fresh = parseRows(html);
    body.dataset.hasMore = hasMore ? "true" : "false";
    if (!holding()) {
      patchChildren(body, fresh);
    } else {
      var seen = {};
      fresh.forEach(function (row) {
        seen[row.id] = true;
        var cur = byId(row.id);
        if (cur) replacePreserving(cur, row);
        else hold(row);
      });
      // A row shown but not in the snapshot no longer matches, unless it only fell off the
      // end of a page that has more (the new rows pushed it down).
      var last = fresh[fresh.length - 1];
      Array.prototype.slice.call(body.children).concat(Object.keys(state.held).map(function (id) {
        return state.held[id];
      })).forEach(function (row) {
        if (seen[row.id] || (hasMore && last && (!byTime() || newer(last, row)))) return;
        if (state.held[row.id]) unhold(row.id); else row.remove();
      });
    }
    updateEmpty();
  }

  function applyRow(data) {
    var body = rowsBody();
    if (!body) return;
    var existing = byId("todo-" + data.id);
    if (data.gone || !data.matches) {
      if (existing) existing.remove();
      unhold("todo-" + data.id);
    } else {
      var fresh = parseRows(data.row)[0];
      if (existing) refresh(existing, fresh);
      else if (state.held[fresh.id] || holding() || !byTime()) hold(fresh);
      else place(fresh);
    }
    updateEmpty();
  }

  function setUpShowHeld() {
    var button = byId("show-new-todos");
    if (button) button.addEventListener("click", showHeld);
  }

  // Relative times ("3 min ago") stay current; the wording is board/view/todo_detail.py's fmt_relative.
  function relative(iso) {
    var seconds = (Date.parse(iso) - Date.now()) / 1000, span = Math.abs(seconds), words;
    if (isNaN(span)) return null;
    if (span < 10) return "just now";
    if (span < 90) words = Math.floor(span) + " s";
    else if (span < 5400) words = Math.round(span / 60) + " min";
    else if (span < 129600) words = Math.round(span / 3600) + " h";
    else words = Math.round(span / 86400) + " days";
    return seconds > 0 ? "in " + words : words + " ago";
  }

  function refreshTimes() {
    document.querySelectorAll("time[data-relative]").forEach(function (t) {
      var words = relative(t.getAttribute("datetime"));
      if (words && t.textContent !== words) t.textContent = words;
    });
  }

  // -- the overview of the queues -----------------------------------------------------

  // Rows by id, and in a row that stays, cells by id: only what changed is replaced, so
  // the Pause/Resume button under a keyboard user's focus stays put while its queue is busy.
  function applyOverview(html) {
    var cur = byId("overview");
    if (!cur || !html) return;
    var fresh = parse(html).querySelector("#overview");
    if (!fresh) return;
    var body = byId("overview-rows"), freshBody = fresh.querySelector("#overview-rows");
    if (!body || !freshBody) { replacePreserving(cur, fresh); return; }
    var rows = Array.prototype.slice.call(freshBody.children).map(function (row) {
      var old = byId(row.id);
      if (!old || old.parentNode !== body) return row;
      patchChildren(old, Array.prototype.slice.call(row.children));
      return old;
    });
    patchChildren(body, rows);
    var help = byId("overview-help"), freshHelp = fresh.querySelector("#overview-help");
    if (help && freshHelp) replacePreserving(help, freshHelp);
  }

  // After a Pause or Resume, or a chart window's choice, the page comes back with the
  // control's id as its fragment: focus it, where the keyboard user left it.
  function focusFragment() {
    var m = location.hash.match(/^#(queue-(?:toggle|limit)-.+|scheme-(?:light|dark|system)|chart-(?:hour|day|week))$/);
    var el = m && byId(decodeURIComponent(m[1]));
    if (el) el.focus();
  }

  // -- the drawer --------------------------------------------------------------------

  function applyDrawer(html, gone) {
    var d = drawer();
    if (!d || !d.open) return;
    if (gone) {
      var head = d.querySelector("#drawer-head");
      if (head && !byId("drawer-gone")) {
        var p = document.createElement("p");
        p.id = "drawer-gone";
        p.className = "flash flash-error";
        p.setAttribute("role", "alert");
        p.textContent = "This todo no longer exists.";
        head.after(p);
      }
      return;
    }
    var fresh = parse(html).querySelector("dialog");
    if (!fresh || fresh.dataset.todo !== d.dataset.todo) return;
    fresh.querySelectorAll("[data-patch]").forEach(function (el) {
      var cur = d.querySelector("#" + CSS.escape(el.id));
      // One shown with an error next to its field has no data-patch: it stays as it is.
      if (cur && cur.hasAttribute("data-patch")) replacePreserving(cur, el);
    });
    var list = d.querySelector("#attempts-list"), freshList = fresh.querySelector("#attempts-list");
    if (!list || !freshList) return;
    var wasOpen = {}, hadNote = {};
    Array.prototype.slice.call(list.children).forEach(function (li) {
      wasOpen[li.id] = li.classList.contains("attempt-open");
    });
    list.querySelectorAll(".notes > li").forEach(function (li) { hadNote[li.id] = true; });
    var attempts = Array.prototype.slice.call(freshList.children);
    patchChildren(list, attempts);
    var said = state.saidBy[d.dataset.todo];
    // Each attempt that opened or closed, and each new note on an attempt already shown, is
    // one short line in the log, oldest first.
    attempts.slice().reverse().forEach(function (li) {
      var before = wasOpen[li.id];
      if (before !== undefined) {
        Array.prototype.slice.call(li.querySelectorAll(".notes > li")).reverse().forEach(function (note) {
          if (!hadNote[note.id]) announceAttempt(d, note.dataset.announce);
        });
      }
      if (before === undefined || (before && !li.classList.contains("attempt-open"))) {
        announceAttempt(d, li.dataset.announce);
      }
    });
    if (said) { clearTimeout(said); delete state.saidBy[d.dataset.todo]; }
  }

  function announceAttempt(d, text) {
    if (state.saidBy[d.dataset.todo]) return;  // its change was said already, naming who made it
    sayIn(d.querySelector("#attempts-news"), text);
  }

  // Another member's action, said once naming them ("Bob canceled todo 42"): in the drawer's
  // log while it is open (the page behind a modal dialog is inert), else the page's. The
  // drawer's next update for that todo is the same change: its attempt lines are not said.
  var SAID_BY_MS = 5000;

  function announceActivity(data) {
    var d = drawer(), open = d && d.open;
    sayIn(open ? d.querySelector("#attempts-news") : byId("activity-news"), data.text);
    if (open && (data.todos || []).indexOf(d.dataset.todo) >= 0) {
      var id = d.dataset.todo;
      clearTimeout(state.saidBy[id]);
      state.saidBy[id] = setTimeout(function () { delete state.saidBy[id]; }, SAID_BY_MS);
    }
  }

  function sayIn(log, text) {
    if (!log || !text) return;
    var line = document.createElement("p");
    line.textContent = text;
    log.appendChild(line);
    while (log.children.length > 5) log.firstElementChild.remove();
  }

  // The drawer's head sticks to its top: scroll padding of its height keeps a focused
  // element from landing under it (WCAG 2.2, 2.4.11). The head's height changes with the
  // title's lines and the width, and a live patch replaces the head, so it is read on focus.
  function fitDrawerPadding(d) {
    var head = d.querySelector("#drawer-head");
    if (head) d.style.setProperty("--drawer-head", head.getBoundingClientRect().height + "px");
  }

  // The page's title names the open todo and the view under it; closing restores the view's.
  function viewTitle() {
    var board = byId("board");
    return (board && board.dataset.title) || document.title;
  }

  function showDrawer(d) {
    if (d.hasAttribute("open")) d.removeAttribute("open"); // the no-JS page renders it open
    var heading = d.querySelector("#drawer-title");
    if (heading) document.title = heading.textContent + " · " + viewTitle();
    d.showModal();
    fitDrawerPadding(d);
    d.addEventListener("focusin", function () { fitDrawerPadding(d); });
    state.drawerId = d.dataset.todo;
    // A field the server refused (the note) takes focus, with its message beside it.
    // The result of an action just taken is read first.
    var title = d.querySelector("[aria-invalid=true]") || d.querySelector(".flash[tabindex]")
      || d.querySelector("#drawer-title");
    (title || d).focus();
    d.addEventListener("close", onDrawerClosed);
  }

  function onDrawerClosed(event) {
    var d = event.currentTarget;
    if (d.open) return;
    d.removeEventListener("close", onDrawerClosed);
    var id = state.drawerId;
    state.drawerId = null;
    if (state.pushed) {
      state.pushed = false;
      state.ignorePop = true;
      history.back();
    } else if (/^\/todos\//.test(location.pathname)) {
      history.replaceState(null, "", "/" + location.search);
    }
    d.remove();
    document.title = viewTitle();
    var back = state.opener && document.contains(state.opener) ? state.opener
      : byId("todo-link-" + id) || byId("board-heading");
    state.opener = null;
    if (back) back.focus();
    connect(true);
  }

  function openDrawer(id, opener, push, href, replace) {
    var url = "/todos/" + encodeURIComponent(id);
    fetch(url + "/drawer", { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (resp) {
        if (!resp.ok) throw new Error("status " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        var d = parse(html).querySelector("dialog");
        if (!d) throw new Error("no dialog");
        var old = drawer();
        if (old) old.remove();
        byId("main").appendChild(d);
        state.opener = opener;
        if (push) {
          history.pushState({ drawer: id }, "", url + location.search);
          state.pushed = true;
        } else if (replace) {  // a step along a chain: the drawer stays one history entry
          history.replaceState({ drawer: id }, "", url + location.search);
        }
        showDrawer(d);
        connect(true);
      })
      .catch(function () { location.assign(href || url); });
  }

  // A form of the drawer carries the list's view (its filters and sort) along, so acting on a
  // todo and closing the drawer returns to the same view.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!location.search || !form.closest || !form.closest("dialog.drawer")) return;
    var el = e.submitter && e.submitter.hasAttribute("formaction") ? e.submitter : form;
    var attr = el === form ? "action" : "formaction";
    var target = el.getAttribute(attr);
    if (target && target.indexOf("?") < 0 && /^\/todos\//.test(target)) el.setAttribute(attr, target + location.search);
  }, true);

  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.todo-link");
    if (link && e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey) {
      e.preventDefault();
      openDrawer(link.closest("tr").dataset.id, link, true, link.href);
      return;
    }
    // A link of the drawer's continuation chain opens that todo's drawer in its place; closing
    // it returns focus to where the first drawer was opened from.
    var hop = e.target.closest && e.target.closest("a.chain-link");
    if (hop && e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey) {
      e.preventDefault();
      if (hop.getAttribute("aria-current") !== "page") {
        openDrawer(hop.dataset.id, state.opener, false, hop.href, /^\/todos\//.test(location.pathname));
      }
      return;
    }
    // An error summary's link moves focus to its field itself (and shows the field's label):
    // a fragment navigation would keep pulling focus back to the field while the page settles.
    var fix = e.target.closest && e.target.closest(".error-summary a[href^='#']");
    if (fix && byId(fix.getAttribute("href").slice(1))) {
      e.preventDefault();
      var field = byId(fix.getAttribute("href").slice(1));
      var label = document.querySelector("label[for='" + field.id + "']");
      (label || field).scrollIntoView({ block: "start" });  // instant: nothing here scrolls smoothly
      field.focus({ preventScroll: true });
      return;
    }
    var close = e.target.closest && e.target.closest("[data-close-drawer]");
    if (close) {
      e.preventDefault();
      var d = drawer();
      if (d && d.open) d.close();
    }
  });

  window.addEventListener("popstate", function () {
    if (state.ignorePop) { state.ignorePop = false; return; }
    var d = drawer();
    var m = location.pathname.match(/^\/todos\/([^/]+)$/);
    if (d && d.open && !m) { state.pushed = false; d.close(); return; }
    if (m && !(d && d.open)) openDrawer(decodeURIComponent(m[1]), null, false, location.href);
  });

  // -- live updates ------------------------------------------------------------------

  function setLive(which, text) {
    var el = byId("live-status");
    if (!el || el.dataset.state === which) return;
    el.dataset.state = which;
    el.textContent = text;
  }

  // The list's URL parameters (board/web/context.py, Filters), which the stream takes too.
  var FILTERS = ["title", "claimant", "payload_key", "payload_value", "state", "queue", "start", "dead_letter", "sort",
                 "cursor", "page_size"];

  // quiet: a deliberate switch of stream (the drawer opened or closed) is not news for the
  // status region; only a real loss or recovery of the connection is announced.
  function connect(quiet) {
    var board = byId("board");
    if (!board || !window.EventSource || state.paused) return;
    if (state.source) state.source.close();
    clearTimeout(state.retry);
    var params = new URLSearchParams();
    var here = new URLSearchParams(location.search);
    FILTERS.forEach(function (k) { if (here.get(k)) params.set(k, here.get(k)); });
    if (state.drawerId) params.set("todo", state.drawerId);
    var qs = params.toString();
    var es = new EventSource("/events" + (qs ? "?" + qs : ""));
    state.source = es;
    if (!quiet) setLive("connecting", "Live updates: connecting");
    // Every (re)connection starts with a full snapshot, so nothing is missed.
    es.addEventListener("snapshot", function (ev) {
      var data = JSON.parse(ev.data);
      applyRows(data.rows, data.has_more);
      applyOverview(data.overview);
      if (data.watched && data.watched === state.drawerId) applyDrawer(data.drawer, data.gone);
      setLive("on", "Live updates: on");
      byId("live-status").dataset.watching = data.watched || "";
    });
    es.addEventListener("todo", function (ev) {
      var data = JSON.parse(ev.data);
      applyRow(data);
      if (data.id === state.drawerId && (data.drawer || data.gone)) applyDrawer(data.drawer, data.gone);
    });
    es.addEventListener("activity", function (ev) {
      announceActivity(JSON.parse(ev.data));
    });
    // Removed from the team this Board shows: its stream ended; nothing more comes of it.
    es.addEventListener("removed", function (ev) {
      es.close();
      state.source = null;
      var team = JSON.parse(ev.data).team;
      setLive("removed", "Live updates: stopped. You are no longer a member of " + (team || "this team")
        + "; reload the page to see your own space.");
    });
    es.addEventListener("overview", function (ev) {
      applyOverview(JSON.parse(ev.data).overview);
    });
    // The database is away: the server ends the stream and the browser reconnects by
    // itself after the stream's retry time, so the Board catches up as soon as it is back.
    es.addEventListener("unavailable", function () {
      setLive("unavailable", "Live updates: the database is unavailable, retrying");
    });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        setLive("off", "Live updates: stopped, retrying");
        state.retry = setTimeout(connect, 2000);
      } else if (byId("live-status").dataset.state !== "unavailable") {
        setLive("connecting", "Live updates: reconnecting");
      }
    });
  }

  // The pause control: a toggle button; the status line announces the change.
  function setUpPause() {
    var button = byId("live-pause");
    if (!button || !window.EventSource) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      state.paused = !state.paused;
      // The button says what pressing it will do next.
      button.textContent = state.paused ? "Resume live updates" : "Pause live updates";
      if (state.paused) {
        if (state.source) state.source.close();
        state.source = null;
        clearTimeout(state.retry);
        setLive("paused", "Live updates: paused");
      } else {
        connect();
      }
    });
  }

  // The search form is a plain GET; this leaves its empty fields (and the default sort and page size) out
  // of the URL, so a search is a short link to bookmark or share.
  function setUpSearch() {
    var form = document.querySelector("form.filters");
    if (!form || !window.URLSearchParams || !window.FormData) return;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var params = new URLSearchParams();
      new FormData(form).forEach(function (value, key) {
        if (value !== "" && !(key === "sort" && value === "created") && !(key === "page_size" && value === "50")) {
          params.append(key, value);
        }
      });
      var qs = params.toString();
      location.assign(form.getAttribute("action") + (qs ? "?" + qs : ""));
    });
  }

  // -- folds ---------------------------------------------------------------------------
  // On a narrow screen the overview and the search fold away (the CSS hides a folded one's
  // content below 40rem only): a button with aria-expanded opens and closes each. Folded at
  // first unless the page says open (a search made); a link or the address pointing inside
  // one opens it, so a skip link still lands.

  function setFold(fold, open) {
    fold.querySelector(".fold-toggle").setAttribute("aria-expanded", open ? "true" : "false");
    fold.classList.toggle("folded", !open);
  }

  function openFoldAround(target) {
    var fold = target && target.closest && target.closest(".fold.folded");
    if (fold) setFold(fold, true);
  }

  function setUpFolds() {
    document.querySelectorAll(".fold").forEach(function (fold) {
      var button = fold.querySelector(".fold-toggle");
      setFold(fold, fold.hasAttribute("data-open"));
      button.hidden = false;
      button.addEventListener("click", function () {
        setFold(fold, button.getAttribute("aria-expanded") !== "true");
      });
    });
    document.addEventListener("click", function (e) {
      var link = e.target.closest && e.target.closest('a[href^="#"]');
      if (link) openFoldAround(document.getElementById(link.getAttribute("href").slice(1)));
    });
    if (location.hash) openFoldAround(document.getElementById(location.hash.slice(1)));
  }

  // -- tables that scroll sideways -----------------------------------------------------
  // A table's region is focusable in the HTML, so a keyboard can scroll it without this
  // script; here it stays a tab stop only while its table is wider than it (a narrow
  // screen, high zoom), not an extra stop on the way to the rows where everything fits.

  function fitScrollRegion(region) {
    if (region.scrollWidth > region.clientWidth + 1) region.tabIndex = 0;
    else if (document.activeElement !== region) region.tabIndex = -1;  // still the "Skip to the list" target
  }

  function setUpScrollRegions() {
    if (!window.ResizeObserver) return;
    var seen = new ResizeObserver(function (entries) {
      entries.forEach(function (e) { fitScrollRegion(e.target.closest(".table-scroll")); });
    });
    document.querySelectorAll(".table-scroll").forEach(function (region) {
      seen.observe(region);
      if (region.firstElementChild) seen.observe(region.firstElementChild); // the table grows with its rows
    });
  }

  // -- the colour scheme --------------------------------------------------------------
  // The toggle is a form that works alone (a post, then the page again); here it posts in
  // the background and switches <html data-scheme> in place, so focus, typed text and a
  // just-vended token stay. The cookie comes with the post's answer either way.

  function setUpScheme() {
    var form = document.querySelector("form.scheme-form");
    if (!form || !window.fetch || !window.FormData) return;
    form.addEventListener("submit", function (e) {
      var button = e.submitter;
      if (!button || button.name !== "scheme" || form.dataset.plain) return;
      e.preventDefault();
      var body = new FormData(form);
      body.set("scheme", button.value);
      fetch(form.action, { method: "POST", body: body, credentials: "same-origin", redirect: "manual" })
        .then(function (resp) {
          if (resp.type !== "opaqueredirect" && !resp.ok) throw new Error("status " + resp.status);
          var root = document.documentElement, meta = document.querySelector("meta[name=color-scheme]");
          if (button.value === "system") delete root.dataset.scheme; else root.dataset.scheme = button.value;
          if (meta) meta.content = button.value === "system" ? "light dark" : button.value;
          form.querySelectorAll("button[name=scheme]").forEach(function (b) {
            b.setAttribute("aria-pressed", b === button ? "true" : "false");
          });
        })
        .catch(function () { form.dataset.plain = "1"; form.requestSubmit(button); });
    });
  }

  // -- the add form's start time -----------------------------------------------------
  // A datetime-local field has no zone: the server reads it with start_offset beside it,
  // +00:00 (UTC) unless this puts the browser's offset for the chosen date there.

  function offsetOf(local) {
    var at = local ? new Date(local) : new Date();
    if (isNaN(at.getTime())) at = new Date();
    var minutes = -at.getTimezoneOffset(), sign = minutes < 0 ? "-" : "+";
    minutes = Math.abs(minutes);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return sign + two(Math.floor(minutes / 60)) + ":" + two(minutes % 60);
  }

  function setUpStartTime() {
    var field = byId("add-start_at"), offset = byId("add-start_offset"), zone = byId("add-start_at-zone");
    if (!field || !offset) return;
    var name = "";
    try { name = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { name = ""; }
    if (zone) zone.textContent = "your browser's time zone" + (name ? " (" + name + ")" : "");
    function set() { offset.value = offsetOf(field.value); }
    set();
    field.addEventListener("change", set);
    field.form.addEventListener("submit", set);
  }

  // -- the Schedules page's preview: the next three runs as the fields change -----------

  function setUpSchedulePreview() {
    var form = byId("schedule-form"), region = byId("schedule-preview");
    if (!form || !region) return;
    var timer = null, asked = 0;
    function show(times, problem) {
      var old = byId("schedule-preview-times"), el;
      if (times) {
        el = document.createElement("ol");
        times.forEach(function (t) {
          var li = document.createElement("li");
          li.textContent = t;
          el.appendChild(li);
        });
      } else {
        el = document.createElement("p");
        el.textContent = problem;
      }
      el.id = "schedule-preview-times";
      if (old) old.replaceWith(el); else region.appendChild(el);
    }
    function ask() {
      var q = new URLSearchParams();
      ["cron", "timezone", "every"].forEach(function (name) { q.set(name, form.elements[name].value); });
      if (!form.elements.cron.value.trim() && !form.elements.every.value.trim()) return;
      var mine = ++asked;
      fetch("/schedules/preview?" + q.toString(), {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (body) {
          if (!body || mine !== asked) return;
          if (body.times) show(body.times, null); else show(null, "No preview: " + body.error);
        })
        .catch(function () { /* the Preview button still works */ });
    }
    ["cron", "timezone", "every"].forEach(function (name) {
      form.elements[name].addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(ask, 300);
      });
    });
  }

  // -- start -------------------------------------------------------------------------

  setUpSearch();
  setUpFolds();
  setUpShowHeld();
  setUpPause();
  setInterval(refreshTimes, 30000);
  setUpSelectPage();
  setUpBulkBar();
  setUpCopy();
  setUpPresets();
  setUpScheme();
  setUpStartTime();
  setUpSchedulePreview();
  setUpScrollRegions();
  var d = drawer();
  if (d) showDrawer(d);
  var focusTarget = document.querySelector("[data-focus-on-load]");
  if (focusTarget && !d) focusTarget.focus();
  if (!d) focusFragment();
  connect();
})();
