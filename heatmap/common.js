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
  // selftest serves the browser tests (only with #selftest in the URL):
  // it counts each chart's non-blank canvas pixels and reports them, the
  // page's errors and extra into a DOM element that headless Chromium's
  // --dump-dom prints.
  function selftest(charts, extra) {
    if (location.hash.indexOf('selftest') < 0) { return; }
    setTimeout(function () {
      var res = { charts: [], errors: window.__cacheheatErrors || [], pwned: typeof window.__pwned };
      var more = extra();
      Object.keys(more).forEach(function (k) { res[k] = more[k]; });
      charts.forEach(function (c) {
        var cv = c.el.querySelector('canvas'), n = 0;
        if (cv) {
          var px = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
          for (var i = 0; i < px.length; i += 4) {
            if (px[i + 3] > 0 && (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250)) { n++; }
          }
        }
        res.charts.push({ id: c.id, nonblank: n });
      });
      var out = document.getElementById('cacheheat-selftest');
      out.textContent = JSON.stringify(res);
      out.setAttribute('data-done', '1');
    }, 300);
  }
  return { esc: esc, clone: clone, fmt: fmt, selftest: selftest };
}());
