// Follows the log of a running execution (execution.html): the server-sent events of
// the REST API, one "line" event per log line, a "progress" event when its handler's
// progress changed, and an "end" event when it has ended; a
// "revoked" event when the session ended meanwhile (signed out, revoked, expired).
// Lines already on the page (up to data-after = "attempt:seq") are not added twice.
(function () {
  "use strict";
  var log = document.getElementById("log");
  if (!log || !log.dataset.stream || !window.EventSource) { return; }
  var after = (log.dataset.after || "0:0").split(":").map(Number);
  var source = new EventSource(log.dataset.stream);

  source.addEventListener("line", function (event) {
    var line = JSON.parse(event.data);
    if (line.attempt < after[0] || (line.attempt === after[0] && line.seq <= after[1])) { return; }
    after = [line.attempt, line.seq];
    var row = document.createElement("span");
    row.className = "line " + line.stream;
    var time = document.createElement("span");
    time.className = "ts";
    time.textContent = String(line.logged_at).substr(11, 12);
    row.appendChild(time);
    row.appendChild(document.createTextNode(" " + line.line + "\n"));
    log.appendChild(row);
    log.scrollTop = log.scrollHeight;
  });

  source.addEventListener("progress", function (event) {
    var report = JSON.parse(event.data);  // the handler's latest ctx.progress
    var row = document.getElementById("progress-row");
    if (!row) { return; }
    row.hidden = false;
    document.getElementById("progress").value = report.progress;
    document.getElementById("progress-pct").textContent = Math.round(report.progress * 100) + "%";
    document.getElementById("progress-message").textContent = report.message || "";
  });

  source.addEventListener("end", function (event) {
    source.close();
    var state = JSON.parse(event.data).state;
    var live = document.getElementById("live");
    if (live) { live.textContent = "ended"; live.className = "live ended"; }
    var badge = document.querySelector("#state .state");
    if (badge) { badge.textContent = state; badge.className = "state state-" + state; }
    var cancel = document.querySelector("form[action$='/cancel']");
    if (cancel) { cancel.remove(); }  // it has ended: nothing is left to cancel
    var end = document.getElementById("log-end");
    end.hidden = false;
    end.dataset.state = state;
    end.textContent = "The execution ended " + state + ". ";
    var again = document.createElement("a");
    again.href = window.location.pathname;
    again.textContent = "Reload for its attempts and result";
    end.appendChild(again);
  });

  source.addEventListener("revoked", function () {
    source.close();  // reconnecting would be refused: the session is over
    var live = document.getElementById("live");
    if (live) { live.textContent = "signed out"; live.className = "live ended"; }
    var end = document.getElementById("log-end");
    end.hidden = false;
    end.textContent = "Your session ended (signed out, revoked or expired). ";
    var again = document.createElement("a");
    again.href = "/login?next=" + encodeURIComponent(window.location.pathname);
    again.textContent = "Sign in again";
    end.appendChild(again);
  });
})();
