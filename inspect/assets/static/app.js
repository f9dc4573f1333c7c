// The inspector page's script: follows the server-sent events of
// api/events (view=html: the page's own fragments, rendered by the
// server) and posts fault injections without leaving the page. Without
// it the page refreshes itself.
"use strict";
(function () {
  var session = document.body.getAttribute("data-session") || "";
  var note = document.getElementById("note");
  var ids = ["status", "tree", "sessions", "session", "feed", "tools"];

  function say(text, bad) {
    note.textContent = text;
    note.className = bad ? "bad" : "ok";
  }

  function connect() {
    var url = "api/events?view=html" + (session ? "&session=" + encodeURIComponent(session) : "");
    var es = new EventSource(url);
    es.addEventListener("view", function (ev) {
      var parts = JSON.parse(ev.data);
      ids.forEach(function (id) {
        var el = document.getElementById(id);
        if (el && typeof parts[id] === "string" && el.innerHTML !== parts[id]) {
          el.innerHTML = parts[id];
        }
      });
      document.body.setAttribute("data-live", "true");
    });
    es.addEventListener("error", function () {
      document.body.setAttribute("data-live", "false");
    });
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.classList || !form.classList.contains("fault")) {
      return;
    }
    ev.preventDefault();
    var body = new URLSearchParams(new FormData(form));
    fetch(form.getAttribute("action"), {
      method: "POST",
      body: body,
      headers: { "Accept": "application/json" },
      credentials: "same-origin"
    }).then(function (res) {
      return res.json().then(function (out) { say(out.text, !out.ok); });
    }).catch(function (err) { say("fault post failed: " + err, true); });
  });

  connect();
})();
