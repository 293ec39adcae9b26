// The report's script: reads the JSON data block and draws the heatmaps
// and flame graphs. Every string from the recording reaches the page
// through textContent, ECharts' canvas text, or esc() in tooltip
// formatters (whose return value ECharts inserts as HTML).
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cacheheat-data').textContent);
  var charts = [];

  var esc = cacheheatCommon.esc, clone = cacheheatCommon.clone, fmt = cacheheatCommon.fmt;

  // exact writes a value in full for tooltips.
  function exact(v) {
    if (!isFinite(v)) { return 'n/a'; }
    if (Math.abs(v) >= 1000) { return Math.round(v).toLocaleString('en-US'); }
    return String(Math.round(v * 1e6) / 1e6);
  }
  function fmtTime(ns) {
    var s = ns / 1e9;
    if (s < 60) { return (Math.round(s * 100) / 100) + 's'; }
    var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = Math.floor(s % 60);
    var mm = (h > 0 && m < 10 ? '0' : '') + m, ss = (r < 10 ? '0' : '') + r;
    return (h > 0 ? h + ':' : '') + mm + ':' + ss;
  }
  function fmtNS(ns) {
    if (ns < 0) { return 'n/a'; }
    if (ns >= 1e9) { return (ns / 1e9).toPrecision(3) + 's'; }
    if (ns >= 1e6) { return (ns / 1e6).toPrecision(3) + 'ms'; }
    if (ns >= 1e3) { return (ns / 1e3).toPrecision(3) + 'us'; }
    return Math.round(ns) + 'ns';
  }

  // values returns one number per cell (row-major), NaN where undefined.
  function values(g, m) {
    var nb = g.bins.length, n = g.rows.length * nb, out = new Float64Array(n), i;
    if (m.kind === 'derived') {
      var num = find(g, m.num), den = find(g, m.den);
      for (i = 0; i < n; i++) {
        out[i] = den && den.values[i] > 0 ? m.scale * num.values[i] / den.values[i] : NaN;
      }
      return out;
    }
    for (i = 0; i < n; i++) {
      var d = g.bins[i % nb].dur_ns;
      out[i] = d > 0 ? m.values[i] / (d / 1e9) : NaN;
    }
    return out;
  }
  function find(g, name) {
    for (var i = 0; i < g.metrics.length; i++) {
      if (g.metrics[i].name === name) { return g.metrics[i]; }
    }
    return null;
  }

  // drawGrid sets up a heatmap with a metric selector; it returns the
  // function that shows metric mi, optionally marking a finding's range.
  function drawGrid(id, g) {
    var el = document.getElementById('chart-' + id);
    var sel = document.getElementById(id + '-metric');
    if (!el || !sel || !g.metrics.length) { return null; }
    var chart = echarts.init(el, null, { renderer: 'canvas' });
    charts.push({ id: id, chart: chart, el: el });
    g.metrics.forEach(function (m, i) {
      var o = document.createElement('option');
      o.value = String(i);
      o.textContent = m.name + ' (' + m.unit + ')';
      sel.appendChild(o);
    });
    var xs = g.bins.map(function (b) { return fmtTime(b.start_ns); });
    var ys = g.rows.map(function (r) { return r.label; });
    var nb = g.bins.length;
    function show(mi, mark) {
      var m = g.metrics[mi], vals = values(g, m), data = [], max = 0;
      for (var r = 0; r < g.rows.length; r++) {
        for (var c = 0; c < nb; c++) {
          var v = vals[r * nb + c];
          if (isFinite(v)) {
            data.push([c, r, v]);
            if (v > max) { max = v; }
          } else {
            data.push([c, r, '-']);
          }
        }
      }
      var opt = clone(D.skeletons.heat);
      opt.xAxis[0].data = xs;
      opt.yAxis[0].data = ys;
      opt.yAxis[0].inverse = true;
      opt.visualMap[0].min = 0;
      opt.visualMap[0].max = max > 0 ? max : 1;
      opt.visualMap[0].formatter = function (v) { return fmt(v); };
      opt.series[0].data = data;
      opt.series[0].progressive = 0;
      opt.tooltip.formatter = function (p) {
        var row = g.rows[p.value[1]], b = g.bins[p.value[0]];
        var where = row.cpus.length === 1 ? 'CPU ' + row.cpus[0] : 'CPUs ' + row.cpus.join(',');
        if (row.l3 >= 0) { where += ', L3 ' + row.l3 + ', core ' + row.core; }
        return esc(m.name) + ': <b>' + esc(exact(p.value[2])) + '</b> ' + esc(m.unit) +
          '<br>' + esc(where) + ', node ' + esc(row.node) +
          '<br>' + esc(fmtTime(b.start_ns)) + ' to ' + esc(fmtTime(b.end_ns)) +
          (b.windows > 1 ? ' (average of ' + b.windows + ' windows)' : '');
      };
      if (mark) {
        opt.series[0].markArea = { silent: true, itemStyle: { color: 'rgba(0,90,255,0.12)', borderColor: '#05f', borderWidth: 2 }, data: mark };
      }
      chart.setOption(opt, true);
      sel.value = String(mi);
    }
    sel.addEventListener('change', function () { show(Number(sel.value)); });
    show(0);
    return { show: show, grid: g };
  }

  function drawLatency(i, l) {
    var el = document.getElementById('chart-latency-' + i);
    if (!el) { return; }
    var chart = echarts.init(el, null, { renderer: 'canvas' });
    charts.push({ id: 'latency-' + i, chart: chart, el: el });
    var nb = l.bins.length, nr = l.hi - l.lo + 1, data = [], max = 0;
    for (var r = 0; r < nr; r++) {
      for (var c = 0; c < nb; c++) {
        var v = l.counts[r * nb + c];
        data.push([c, r, v > 0 ? v : '-']);
        if (v > max) { max = v; }
      }
    }
    var opt = clone(D.skeletons.latency);
    opt.xAxis[0].data = l.bins.map(function (b) { return fmtTime(b.start_ns); });
    opt.yAxis[0].data = l.labels;
    opt.yAxis.push({ type: 'value', min: -0.5, max: nr - 0.5, show: false });
    opt.visualMap[0].max = max > 0 ? max : 1;
    opt.visualMap[0].seriesIndex = 0;
    opt.visualMap[0].formatter = function (v) { return fmt(v); };
    opt.series[0].data = data;
    opt.series[0].progressive = 0;
    function line(name, pos, color) {
      return {
        type: 'line', name: name, yAxisIndex: 1, showSymbol: false, connectNulls: false, animation: false,
        lineStyle: { color: color, width: 2 }, itemStyle: { color: color },
        data: pos.map(function (p) { return p < 0 ? null : p; })
      };
    }
    opt.series.push(line('p50', l.p50_pos, '#1a7f37'), line('p99', l.p99_pos, '#6639ba'));
    opt.legend = { show: true, data: ['p50', 'p99'], top: 0 };
    opt.tooltip.formatter = function (p) {
      var c = p.dataIndex % nb, b = l.bins[c];
      var when = esc(fmtTime(b.start_ns)) + ' to ' + esc(fmtTime(b.end_ns));
      if (p.seriesType === 'line') {
        var ns = p.seriesName === 'p50' ? l.p50_ns[c] : l.p99_ns[c];
        return esc(p.seriesName) + ': <b>' + esc(fmtNS(ns)) + '</b><br>' + when;
      }
      var row = p.value[1], lo = l.labels[row], hi = row + 1 < l.labels.length ? l.labels[row + 1] : 'and more';
      return esc(l.name) + ' ' + esc(lo) + ' to ' + esc(hi) + ': <b>' + esc(exact(p.value[2])) + '</b> events<br>' + when;
    };
    chart.setOption(opt, true);
  }

  function hue(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) { h = (h * 31 + name.charCodeAt(i)) >>> 0; }
    return 'hsl(' + (10 + h % 40) + ',' + (70 + h % 20) + '%,' + (58 + h % 12) + '%)';
  }
  function depth(n) {
    var d = 0;
    (n.c || []).forEach(function (c) { d = Math.max(d, depth(c)); });
    return d + 1;
  }
  // drawFlame draws a flame graph of div boxes: the outermost frame at the
  // bottom, width proportional to samples. Names go in with textContent.
  function drawFlame(el, root, unit) {
    unit = unit || 'samples';
    var rowH = 18, top = root, path = [];
    function render() {
      while (el.firstChild) { el.removeChild(el.firstChild); }
      var levels = depth(top) + path.length;
      el.style.height = (levels * rowH) + 'px';
      var total = top.v || 1, lvl = 0;
      path.forEach(function (a) { box(a, 0, 100, lvl++, a.v, true); });
      walk(top, 0, 100, lvl);
      function walk(n, x, w, d) {
        box(n, x, w, d, total, false);
        var cx = x;
        (n.c || []).forEach(function (c) {
          var cw = w * c.v / n.v;
          if (cw >= 0.05) { walk(c, cx, cw, d + 1); }
          cx += cw;
        });
      }
      function box(n, x, w, d, tot, ancestor) {
        var b = document.createElement('div');
        b.className = 'fr' + (ancestor ? ' anc' : '');
        b.style.left = x + '%';
        b.style.width = w + '%';
        b.style.bottom = (d * rowH) + 'px';
        b.style.background = ancestor ? '#ddd' : hue(n.n);
        b.textContent = n.n;
        b.title = n.n + '\n' + n.v + ' ' + unit + ' (' + (100 * n.v / (root.v || 1)).toFixed(2) + '% of all)';
        b.addEventListener('click', function () {
          if (ancestor || n === top) {
            var i = path.indexOf(n);
            if (n === top || i < 0) { top = root; path = []; } else { top = n; path = path.slice(0, i); }
          } else {
            path.push(top);
            var p = findPath(top, n);
            path = path.concat(p);
            top = n;
          }
          render();
        });
        el.appendChild(b);
      }
    }
    function findPath(from, target) {
      var out = [];
      (function rec(n, acc) {
        if (n === target) { out = acc.slice(1); return true; }
        return (n.c || []).some(function (c) { return rec(c, acc.concat([c])); });
      })(from, [from]);
      return out.slice(0, -1);
    }
    render();
  }

  var grids = { cpu: drawGrid('cpu', D.cpu), node: drawGrid('node', D.node) };
  (D.latency || []).forEach(function (l, i) { drawLatency(i, l); });
  (D.flames || []).forEach(function (f, i) {
    var el = document.getElementById('flame-' + i);
    if (el) { drawFlame(el, f); }
  });
  if (D.offcpu_flame) {
    var offEl = document.getElementById('flame-offcpu');
    if (offEl) { drawFlame(offEl, D.offcpu_flame, 'us blocked'); }
  }

  // Findings link to the per-core heatmap: select the metric the finding
  // is about and mark its CPUs and time range.
  function showFinding(f) {
    var g = grids.cpu;
    if (!g) { return; }
    var mi = 0;
    g.grid.metrics.forEach(function (m, i) { if (m.name === f.metric) { mi = i; } });
    var bins = g.grid.bins, c0 = 0, c1 = bins.length - 1;
    if (f.end_ns > f.start_ns) {
      bins.forEach(function (b, i) {
        if (b.end_ns <= f.start_ns) { c0 = i + 1; }
        if (b.start_ns < f.end_ns) { c1 = i; }
      });
    }
    c0 = Math.min(c0, c1);
    var rows = [];
    g.grid.rows.forEach(function (r, i) {
      var hit = (!f.cpus || !f.cpus.length) && (!f.nodes || !f.nodes.length);
      r.cpus.forEach(function (c) { if (f.cpus && f.cpus.indexOf(c) >= 0) { hit = true; } });
      if (f.nodes && f.nodes.indexOf(r.node) >= 0) { hit = true; }
      if (hit) { rows.push(i); }
    });
    var areas = [];
    rows.forEach(function (r) {
      areas.push([{ xAxis: c0, yAxis: r }, { xAxis: c1, yAxis: r }]);
    });
    g.show(mi, areas);
    var note = document.getElementById('cpu-mark');
    if (note) { note.textContent = 'Marked: ' + f.title; }
  }
  Array.prototype.forEach.call(document.querySelectorAll('.show-finding'), function (a) {
    a.addEventListener('click', function () {
      var f = D.findings && D.findings.items[Number(a.getAttribute('data-finding'))];
      if (f) { showFinding(f); }
    });
  });

  window.addEventListener('resize', function () {
    charts.forEach(function (c) { c.chart.resize(); });
  });

  cacheheatCommon.selftest(charts, function () { return { flames: document.querySelectorAll('.fr').length }; });
})();
