// The report page's only script (inlined by report/html/page.py): sort a table by a click on its header,
// fold long tables to their first rows, and say it has run (document.body.dataset.ready = "1").
(function () {
  "use strict";
  var UNITS = { ns: 1e-9, us: 1e-6, "\u00b5s": 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600, k: 1e3, K: 1e3, M: 1e6,
    G: 1e9, T: 1e12, KiB: 1024, MiB: 1048576, GiB: 1073741824, B: 1, "%": 1, x: 1 };
  function value(text) {
    var t = text.trim().replace(/,/g, "");
    var m = /^[-+~<>]?\s*(-?\d*\.?\d+(?:e[-+]?\d+)?)\s*([A-Za-z\u00b5%]*)/i.exec(t);
    if (!m) { return null; }
    var unit = UNITS[m[2]];
    return parseFloat(m[1]) * (unit === undefined ? 1 : unit);
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var down = th.getAttribute("aria-sort") === "ascending";
    var numeric = th.classList.contains("num");
    rows.sort(function (a, b) {
      var x = a.cells[col] ? a.cells[col].textContent : "", y = b.cells[col] ? b.cells[col].textContent : "";
      var r;
      if (numeric) {
        var vx = value(x), vy = value(y);
        r = (vx === null) - (vy === null) || (vx === null ? 0 : vx - vy);
      } else {
        r = x.localeCompare(y, undefined, { numeric: true });
      }
      return down ? -r : r;
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
    rows.forEach(function (row) { body.appendChild(row); });
    fold(table);
  }
  function fold(table) {
    if (!table.classList.contains("collapsible")) { return; }
    var limit = parseInt(table.dataset.fold, 10) || 25;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row, i) { row.classList.toggle("extra", i >= limit); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
    if (table.classList.contains("collapsible")) {
      var n = table.tBodies[0].rows.length;
      table.classList.add("collapsed");
      fold(table);
      var button = document.createElement("button");
      button.className = "more";
      button.type = "button";
      button.textContent = "show all " + n + " rows";
      button.addEventListener("click", function () {
        var folded = table.classList.toggle("collapsed");
        button.textContent = folded ? "show all " + n + " rows" : "show the first " + table.dataset.fold + " rows";
      });
      table.parentNode.parentNode.insertBefore(button, table.parentNode.nextSibling);
    }
  });
  document.body.dataset.ready = "1";
})();
