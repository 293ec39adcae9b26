// Helpers shared by the report's, the live view's and the diff report's
// scripts, placed before each of them in the page. esc is the one escaper
// for strings from a recording that reach HTML (ECharts inserts tooltip
// formatters' return values as HTML).
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
    if (a >= 1e12) { return trim((v / 1e12).toPrecision(3)) + 'T'; }
    if (a >= 1e9) { return trim((v / 1e9).toPrecision(3)) + 'G'; }
    if (a >= 1e6) { return trim((v / 1e6).toPrecision(3)) + 'M'; }
    if (a >= 1e4) { return trim((v / 1e3).toPrecision(3)) + 'k'; }
    if (a === 0 || a >= 1) { return String(Math.round(v * 100) / 100); }
    return trim(v.toPrecision(3));
  }
  function trim(s) { return s.indexOf('e') < 0 && s.indexOf('.') >= 0 ? s.replace(/\.?0+$/, '') : s; }
  // exact writes a value in full for tooltips.
  function exact(v) {
    if (!isFinite(v)) { return 'n/a'; }
    if (Math.abs(v) >= 1000) { return Math.round(v).toLocaleString('en-US'); }
    return String(Math.round(v * 1000) / 1000);
  }
  // fmtNS writes a duration in ns with a human unit, as the CLI does.
  function fmtNS(ns) {
    if (ns < 0 || !isFinite(ns)) { return 'n/a'; }
    if (ns >= 1e9) { return trim((ns / 1e9).toPrecision(3)) + 's'; }
    if (ns >= 1e6) { return trim((ns / 1e6).toPrecision(3)) + 'ms'; }
    if (ns >= 1e3) { return trim((ns / 1e3).toPrecision(3)) + 'µs'; }
    return Math.round(ns) + 'ns';
  }
  // fmtTime writes a time since the start: 12.5s, 1:05, 1:02:03.
  function fmtTime(s) {
    if (s < 60) { return (Math.round(s * 100) / 100) + 's'; }
    var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = Math.floor(s % 60);
    var mm = (h > 0 && m < 10 ? '0' : '') + m, ss = (r < 10 ? '0' : '') + r;
    return (h > 0 ? h + ':' : '') + mm + ':' + ss;
  }
  // chartHeight gives a heatmap enough height for its rows, within reason.
  function chartHeight(rows) { return Math.min(900, Math.max(260, 120 + rows * 14)); }

  // timeAxis labels heatmap columns at round times (1s, 2s, 5s, 10s, 30s,
  // 1m...): each round time labels the column that starts nearest to it,
  // and the step keeps labels about 80 px apart. starts are the columns'
  // start times in seconds; end is the last column's end.
  var steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];
  function timeAxis(starts, end, widthPx) {
    var n = starts.length, labels = [], i;
    for (i = 0; i < n; i++) { labels.push(''); }
    if (!n) { return { data: [], labels: labels }; }
    var span = Math.max(end - starts[0], 1e-9), most = Math.max(2, Math.floor(widthPx / 80));
    var colW = span / n, step = steps[steps.length - 1];
    for (i = 0; i < steps.length; i++) {
      if (span / steps[i] <= most && steps[i] >= colW * 0.999) { step = steps[i]; break; }
    }
    var used = {};
    for (var t = Math.ceil(starts[0] / step) * step; t <= end + 1e-9; t += step) {
      var best = -1, bd = Infinity;
      for (i = 0; i < n; i++) {
        var d = Math.abs(starts[i] - t);
        if (d < bd) { bd = d; best = i; }
      }
      if (best >= 0 && bd <= colW / 2 + 1e-9 && !used[best]) {
        used[best] = true;
        labels[best] = fmtTime(Math.round(t / step) * step);
      }
    }
    var data = labels.map(function (_, k) { return String(k); });
    return {
      data: data, labels: labels,
      axisLabel: { interval: function (k) { return labels[k] !== ''; }, formatter: function (v, k) { return labels[k]; }, hideOverlap: true }
    };
  }

  var heatColours = ['#f7fbff', '#fdd49e', '#fc8d59', '#d7301f', '#7f0000'];
  // percentile of finite values (sorted copy), p in [0, 1].
  function percentile(vals, p) {
    var s = [];
    for (var i = 0; i < vals.length; i++) { if (isFinite(vals[i])) { s.push(vals[i]); } }
    if (!s.length) { return NaN; }
    s.sort(function (a, b) { return a - b; });
    return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))];
  }
  // colourScale picks a heatmap's colour range: the metric's natural top
  // when it has one (100 for % busy), else the largest cell unless a few
  // outliers dwarf the rest: then the 99th percentile, and clipped says
  // so (cells above it are drawn in the darkest colour).
  function colourScale(vals, naturalMax) {
    var max = 0, n = 0;
    for (var i = 0; i < vals.length; i++) {
      if (isFinite(vals[i])) { n++; if (vals[i] > max) { max = vals[i]; } }
    }
    if (naturalMax) { return { min: 0, max: naturalMax, clipped: false, top: max }; }
    var p99 = percentile(vals, 0.99);
    if (n >= 50 && p99 > 0 && max > 1.5 * p99) { return { min: 0, max: p99, clipped: true, top: max }; }
    return { min: 0, max: max > 0 ? max : 1, clipped: false, top: max };
  }
  // colourBar sets a visualMap's range, colours and legend: the unit is
  // written above the bar, with "(p99)" when the scale is clipped, and
  // values on its handles.
  function colourBar(vm, unit, scale, colours) {
    vm.min = scale.min;
    vm.max = scale.max;
    vm.text = [scale.clipped ? unit + ' (p99)' : unit, ''];
    vm.textGap = 14;
    vm.itemHeight = 120;
    // On a clipped scale the top value reads "and above": 4021+.
    vm.formatter = function (v) { return fmt(v) + (scale.clipped && v >= scale.max ? '+' : ''); };
    vm.inRange = { color: colours || heatColours };
    vm.outOfRange = { color: [(colours || heatColours)[(colours || heatColours).length - 1]] };
    vm.unit = unit;
    return vm;
  }

  // texts lists the text a component of a chart drew, with its box in
  // the chart's pixels: what the reader sees, read back from ECharts'
  // own scene (getModel, getViewOfComponentModel), not from the options.
  function texts(chart, mainType, idx) {
    var model = chart.getModel().getComponent(mainType, idx || 0);
    if (!model) { return []; }
    var view = chart.getViewOfComponentModel(model), out = [];
    if (!view || !view.group) { return out; }
    view.group.traverse(function (el) {
      if (el.type !== 'text' || el.ignore || el.invisible || !el.style || !el.style.text) { return; }
      var anc = el.parent, hidden = false;
      while (anc) { if (anc.ignore || anc.invisible) { hidden = true; } anc = anc.parent; }
      if (hidden) { return; }
      el.updateTransform && el.updateTransform();
      var r = el.getBoundingRect().clone();
      if (el.transform) { r.applyTransform(el.transform); }
      if (r.width < 0.5) { return; }
      // zrender's box of a one-line label can be tighter than its glyphs;
      // the font size is the height a reader sees.
      var px = /(\d+(?:\.\d+)?)px/.exec(el.style.font || '');
      var fs = parseFloat(el.style.fontSize) || (px ? parseFloat(px[1]) : 12);
      if (r.height < fs) { r.y -= (fs - r.height) / 2; r.height = fs; }
      out.push({ text: String(el.style.text), x: r.x, y: r.y, w: r.width, h: r.height, c: mainType });
    });
    return out;
  }
  function overlaps(a) {
    var bad = [];
    for (var i = 0; i < a.length; i++) {
      for (var j = i + 1; j < a.length; j++) {
        var p = a[i], q = a[j];
        var ox = Math.min(p.x + p.w, q.x + q.w) - Math.max(p.x, q.x);
        var oy = Math.min(p.y + p.h, q.y + q.h) - Math.max(p.y, q.y);
        if (ox > 1 && oy > 1) { bad.push(p.c + ' "' + p.text + '" / ' + q.c + ' "' + q.text + '"'); }
      }
    }
    return bad;
  }
  // inspect describes every chart for the browser tests: its rows and
  // cells, the colour bar's unit and text, and the texts that overlap.
  function inspect(charts) {
    return charts.map(function (c) {
      var opt = c.chart.getOption(), vm = (opt.visualMap || [])[0] || {};
      var all = [];
      ['xAxis', 'yAxis', 'visualMap', 'legend'].forEach(function (t) {
        var n = (opt[t] || []).length;
        for (var i = 0; i < n; i++) { all = all.concat(texts(c.chart, t, i)); }
      });
      var bar = texts(c.chart, 'visualMap', 0).map(function (t) { return t.text; });
      var yData = opt.yAxis && opt.yAxis[0] ? opt.yAxis[0].data || [] : [];
      var series = opt.series && opt.series[0] ? opt.series[0].data || [] : [];
      return {
        id: c.id, unit: c.unit || vm.unit || '', bar: bar, overlaps: overlaps(all),
        labels: all.length, rows: yData, cells: series.length,
        values: c.values ? c.values() : null
      };
    });
  }

  // selftest serves the browser tests (only with #selftest in the URL):
  // it counts each chart's non-blank canvas pixels and reports them, the
  // page's errors, inspect's findings and extra into a DOM element that
  // headless Chromium's --dump-dom prints.
  function selftest(charts, extra) {
    if (location.hash.indexOf('selftest') < 0) { return; }
    setTimeout(function () {
      var res = { charts: [], errors: window.__cacheheatErrors || [], pwned: typeof window.__pwned };
      var more = extra();
      Object.keys(more).forEach(function (k) { res[k] = more[k]; });
      var info = inspect(charts);
      charts.forEach(function (c, i) {
        var cv = c.el.querySelector('canvas'), n = 0;
        if (cv) {
          var px = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
          for (var k = 0; k < px.length; k += 4) {
            if (px[k + 3] > 0 && (px[k] < 250 || px[k + 1] < 250 || px[k + 2] < 250)) { n++; }
          }
        }
        var r = info[i];
        res.charts.push({ id: c.id, nonblank: n, unit: r.unit, bar: r.bar, overlaps: r.overlaps, labels: r.labels, rows: r.rows, values: r.values });
      });
      var out = document.getElementById('cacheheat-selftest');
      out.textContent = JSON.stringify(res);
      out.setAttribute('data-done', '1');
    }, 300);
  }
  return {
    esc: esc, clone: clone, fmt: fmt, exact: exact, fmtNS: fmtNS, fmtTime: fmtTime, chartHeight: chartHeight,
    timeAxis: timeAxis, colourScale: colourScale, colourBar: colourBar, heatColours: heatColours,
    inspect: inspect, selftest: selftest, texts: texts
  };
}());
