// The console's only script (served from the binary): the live tail. It adds a row to a
// table with `data-events` for each record event of that URL's server-sent events, every field
// set as text (never as HTML), and keeps the last `data-rows` rows.
(function () {
  "use strict";
  var table = document.querySelector("table[data-events]");
  if (!table) { return; }
  var body = table.tBodies[0];
  var status = document.getElementById("tail-status");
  var keep = parseInt(table.getAttribute("data-rows"), 10) || 500;
  var seen = 0;

  function cell(row, text, numeric) {
    var td = row.insertCell(-1);
    if (numeric) { td.className = "num"; }
    if (text === null || text === undefined) {
      var span = document.createElement("span");
      span.className = "null";
      span.textContent = "null";
      td.appendChild(span);
    } else {
      var pre = document.createElement("pre");
      pre.textContent = text;
      td.appendChild(pre);
    }
    return td;
  }

  var source = new EventSource(table.getAttribute("data-events"));
  source.addEventListener("live", function (e) {
    status.textContent = "Live from offset " + e.data + ": " + seen + " record(s) so far.";
  });
  source.addEventListener("record", function (e) {
    var r = JSON.parse(e.data);
    var row = body.insertRow(-1);
    row.insertCell(-1).textContent = String(r.offset);
    row.cells[0].className = "num";
    row.insertCell(-1).textContent = r.timestamp;
    cell(row, r.key, false);
    var headers = row.insertCell(-1);
    r.headers.forEach(function (h) {
      var div = document.createElement("div");
      var b = document.createElement("b");
      b.textContent = h[0];
      div.appendChild(b);
      div.appendChild(document.createTextNode(": " + (h[1] === null ? "null" : h[1])));
      headers.appendChild(div);
    });
    cell(row, r.value, false);
    while (body.rows.length > keep) { body.deleteRow(0); }
    seen += 1;
    status.textContent = "Live: " + seen + " record(s) so far, the last at offset " + r.offset + ".";
  });
  source.addEventListener("problem", function (e) {
    status.textContent = "Problem: " + e.data + " (retrying)";
  });
  source.onerror = function () {
    status.textContent = "Disconnected; reconnecting…";
  };
}());
