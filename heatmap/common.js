// Helpers shared by the report's and the diff report's scripts, placed
// before each of them in the page. esc is the one escaper for strings from
// a recording that reach HTML (ECharts inserts tooltip formatters' return
// values as HTML).
var cacheheatCommon = (function () {
  'use strict';
  function esc(s) {
    return String(s).replace(/[&<>"'\u2028\u2029]/g, function (c) {
      return '&#' + c.charCodeAt(0) + ';';
    });
  }
  function clone(o) { return JSON.parse(JSON.stringify(o)); }
  // fmt writes a value with about four significant digits and a suffix.
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) { return 'n/a'; }
    var a = Math.abs(v);
    if (a >= 1e12) { return (v / 1e12).toPrecision(4) + 'T'; }
    if (a >= 1e9) { return (v / 1e9).toPrecision(4) + 'G'; }
    if (a >= 1e6) { return (v / 1e6).toPrecision(4) + 'M'; }
    if (a >= 1e4) { return (v / 1e3).toPrecision(4) + 'k'; }
    if (a === 0 || a >= 1) { return String(Math.round(v * 1000) / 1000); }
    return v.toPrecision(4);
  }
  return { esc: esc, clone: clone, fmt: fmt };
}());
