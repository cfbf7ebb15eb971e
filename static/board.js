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
    retry: null
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

  function applyRows(html, hasMore) {
    var body = rowsBody();
    if (!body) return;
    var fresh = parse("<table><tbody>" + html + "</tbody></table>").querySelector("tbody");
    patchChildren(body, Array.prototype.slice.call(fresh.children));
    body.dataset.hasMore = hasMore ? "true" : "false";
    updateEmpty();
  }

  function newer(a, b) { // does row a sort before row b (newest first)?
    var ca = a.dataset.created, cb = b.dataset.created;
    return ca > cb || (ca === cb && a.dataset.id > b.dataset.id);
  }

  function applyRow(data) {
    var body = rowsBody();
    if (!body) return;
    var existing = byId("todo-" + data.id);
    if (data.gone || !data.matches) {
      if (existing) existing.remove();
    } else {
      var fresh = parse("<table><tbody>" + data.row + "</tbody></table>").querySelector("tr");
      if (existing) {
        replacePreserving(existing, fresh);
      } else {
        var before = null;
        for (var r = body.firstElementChild; r; r = r.nextElementSibling) {
          if (newer(fresh, r)) { before = r; break; }
        }
        // Past the last row of a page that has more: it belongs to a later page.
        if (before || body.dataset.hasMore !== "true") body.insertBefore(fresh, before);
      }
    }
    updateEmpty();
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

  // After a Pause or Resume the page comes back with the control's id as its fragment:
  // focus it, where the keyboard user left it.
  function focusFragment() {
    var m = location.hash.match(/^#(queue-toggle-.+)$/);
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
      if (cur) replacePreserving(cur, el);
    });
    var list = d.querySelector("#attempts-list"), freshList = fresh.querySelector("#attempts-list");
    if (list && freshList) patchChildren(list, Array.prototype.slice.call(freshList.children));
  }

  function showDrawer(d) {
    if (d.hasAttribute("open")) d.removeAttribute("open"); // the no-JS page renders it open
    d.showModal();
    state.drawerId = d.dataset.todo;
    var title = d.querySelector("#drawer-title");
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
    var back = state.opener && document.contains(state.opener) ? state.opener
      : byId("todo-link-" + id) || byId("board-heading");
    state.opener = null;
    if (back) back.focus();
    connect(true);
  }

  function openDrawer(id, opener, push, href) {
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
        }
        showDrawer(d);
        connect(true);
      })
      .catch(function () { location.assign(href || url); });
  }

  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.todo-link");
    if (link && e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey) {
      e.preventDefault();
      openDrawer(link.closest("tr").dataset.id, link, true, link.href);
      return;
    }
    // An error summary's link moves focus to its field itself (and shows the field's label):
    // a fragment navigation would keep pulling focus back to the field while the page settles.
    var fix = e.target.closest && e.target.closest(".error-summary a[href^='#']");
    if (fix && byId(fix.getAttribute("href").slice(1))) {
      e.preventDefault();
      var field = byId(fix.getAttribute("href").slice(1));
      var label = document.querySelector("label[for='" + field.id + "']");
      (label || field).scrollIntoView({ block: "start" });
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

  // quiet: a deliberate switch of stream (the drawer opened or closed) is not news for the
  // status region; only a real loss or recovery of the connection is announced.
  function connect(quiet) {
    var board = byId("board");
    if (!board || !window.EventSource) return;
    if (state.source) state.source.close();
    clearTimeout(state.retry);
    var params = new URLSearchParams();
    var here = new URLSearchParams(location.search);
    ["state", "queue", "dead", "cursor"].forEach(function (k) { if (here.get(k)) params.set(k, here.get(k)); });
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
    es.addEventListener("overview", function (ev) {
      applyOverview(JSON.parse(ev.data).overview);
    });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        setLive("off", "Live updates: stopped, retrying");
        state.retry = setTimeout(connect, 5000);
      } else {
        setLive("connecting", "Live updates: reconnecting");
      }
    });
  }

  // -- start -------------------------------------------------------------------------

  setUpSelectPage();
  setUpCopy();
  var d = drawer();
  if (d) showDrawer(d);
  var focusTarget = document.querySelector("[data-focus-on-load]");
  if (focusTarget) focusTarget.focus();
  if (!d) focusFragment();
  connect();
})();
