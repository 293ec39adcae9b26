// The report's script, which the live view runs too: reads the JSON data
// block and draws the heatmaps and flame graphs. draw() redraws the
// heatmaps from new chart data (the live view's stream) with the same
// code. Every string from the recording reaches the page through
// textContent, ECharts' canvas text, or esc() in tooltip formatters
// (whose return value ECharts inserts as HTML).
var cacheheatReport = (function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cacheheat-data').textContent);
  var C = cacheheatCommon, esc = C.esc, clone = C.clone, fmt = C.fmt, exact = C.exact;
  var charts = [];

  // values returns one number per cell (row-major), NaN where undefined.
  function values(g, m) {
    var nb = g.bins.length, n = g.rows.length * nb, out = new Array(n), i;
    if (m.kind === 'derived') {
      var num = find(g, m.num), den = find(g, m.den);
      for (i = 0; i < n; i++) {
        out[i] = den && den.values[i] > 0 ? m.scale * num.values[i] / den.values[i] : NaN;
      }
      return out;
    }
    for (i = 0; i < n; i++) {
      var d = g.bins[i % nb].dur_ns, per = m.per_cpu ? g.rows[Math.floor(i / nb)].cpus.length || 1 : 1;
      out[i] = d > 0 ? m.values[i] / (d / 1e9) * (m.scale || 1) / per : NaN;
    }
    return out;
  }
  function find(g, name) {
    for (var i = 0; i < g.metrics.length; i++) {
      if (g.metrics[i].name === name) { return g.metrics[i]; }
    }
    return null;
  }
  function metricLabel(m) { return m.unit.indexOf(m.name) === 0 ? m.unit : m.name + ' (' + m.unit + ')'; }
  function show(el, on) { if (el) { el.style.display = on ? '' : 'none'; } }
  function sections(id, on) {
    Array.prototype.forEach.call(document.querySelectorAll('.has-data[data-for="' + id + '"]'), function (e) { show(e, on); });
    Array.prototype.forEach.call(document.querySelectorAll('.no-data[data-for="' + id + '"]'), function (e) { show(e, !on); });
  }
  function register(id, el, unit) {
    for (var i = 0; i < charts.length; i++) {
      if (charts[i].id === id) { return charts[i]; }
    }
    var c = { id: id, el: el, chart: echarts.init(el, null, { renderer: 'canvas' }), unit: unit };
    charts.push(c);
    return c;
  }
  function timeOf(bins, width) {
    return C.timeAxis(bins.map(function (b) { return b.start_ns / 1e9; }), bins.length ? bins[bins.length - 1].end_ns / 1e9 : 0, width - 240);
  }

  // Per-core and per-node heatmaps: one chart each with a metric selector.
  // grid(id, g) draws g, keeping the metric the reader picked.
  var grids = {};
  function grid(id, g) {
    var el = document.getElementById('chart-' + id), sel = document.getElementById(id + '-metric');
    var has = !!(el && sel && g && g.metrics && g.metrics.length && g.rows.length);
    sections(id, has);
    if (!has) { return null; }
    var st = grids[id];
    if (!st) {
      st = grids[id] = { sel: sel, mark: null };
      sel.addEventListener('change', function () { st.mark = null; st.show(); });
    }
    var names = g.metrics.map(function (m) { return m.name; });
    if (st.names !== names.join('\n')) {
      var was = st.grid ? (st.grid.metrics[Number(sel.value)] || {}).name : null;
      sel.textContent = '';
      g.metrics.forEach(function (m, i) {
        var o = document.createElement('option');
        o.value = String(i);
        o.textContent = metricLabel(m);
        sel.appendChild(o);
      });
      sel.value = String(Math.max(0, names.indexOf(was)));
      st.names = names.join('\n');
    }
    el.style.height = C.chartHeight(g.rows.length) + 'px';
    var c = register(id, el, '');
    c.chart.resize();
    st.grid = g;
    st.show = function (mi, mark) {
      if (mi !== undefined) { sel.value = String(mi); }
      if (mark !== undefined) { st.mark = mark; }
      var m = g.metrics[Number(sel.value)] || g.metrics[0], vals = values(g, m), data = [], nb = g.bins.length;
      for (var r = 0; r < g.rows.length; r++) {
        for (var k = 0; k < nb; k++) {
          var v = vals[r * nb + k];
          data.push([k, r, isFinite(v) ? Math.round(v * 1e4) / 1e4 : '-']);
        }
      }
      var opt = clone(D.skeletons.heat), ta = timeOf(g.bins, el.clientWidth || 1000);
      var plotH = (parseInt(el.style.height, 10) || 300) - 100, every = Math.max(1, Math.ceil(14 / (plotH / g.rows.length)));
      opt.xAxis[0].data = ta.data;
      opt.xAxis[0].axisLabel = ta.axisLabel;
      opt.yAxis[0].data = g.rows.map(function (row) { return row.label; });
      opt.yAxis[0].inverse = true;
      opt.yAxis[0].axisLabel = { interval: function (i) { return i % every === 0; } };
      var scale = C.colourScale(vals, m.max);
      C.colourBar(opt.visualMap[0], m.unit, scale);
      var note = document.getElementById(id + '-scale-note');
      if (note) {
        var parts = [];
        if (scale.clipped) { parts.push('Colour scale clipped at the 99th percentile of the cells, ' + fmt(scale.max) + ' ' + m.unit + ' (the highest cell is ' + fmt(scale.top) + '); cells above it are drawn in the darkest colour.'); }
        if (g.bin_windows > 1) { parts.push('Each column averages ' + g.bin_windows + ' windows.'); }
        if (g.bin_rows > 1) { parts.push('Each row sums ' + g.bin_rows + ' adjacent CPUs.'); }
        if (every > 1) { parts.push('One row label in ' + every + ' is shown; hover a cell for its CPU.'); }
        note.textContent = parts.join(' ');
      }
      opt.series[0].data = data;
      opt.series[0].progressive = 0;
      // Lines between NUMA nodes and L3 domains, drawn on a hidden value
      // axis laid over the rows so that they fall between two rows.
      var cuts = [];
      for (var i = 1; i < g.rows.length; i++) {
        if (g.rows[i].node !== g.rows[i - 1].node || g.rows[i].l3 !== g.rows[i - 1].l3) { cuts.push({ yAxis: i - 0.5 }); }
      }
      if (cuts.length) {
        opt.yAxis.push({ type: 'value', min: -0.5, max: g.rows.length - 0.5, inverse: true, show: false });
        opt.series.push({ type: 'line', yAxisIndex: 1, data: [], silent: true,
          markLine: { silent: true, symbol: 'none', label: { show: false }, animation: false, lineStyle: { color: '#24292f', width: 1.5, type: 'solid' }, data: cuts } });
      }
      opt.tooltip.formatter = function (p) {
        if (p.seriesIndex !== 0) { return ''; }
        var row = g.rows[p.value[1]], b = g.bins[p.value[0]];
        var where = row.cpus.length === 1 ? 'CPU ' + row.cpus[0] : 'CPUs ' + row.cpus.join(',');
        if (row.l3 >= 0) { where += ', L3 ' + row.l3 + ', core ' + row.core; }
        return esc(m.name) + ': <b>' + esc(exact(p.value[2])) + '</b> ' + esc(m.unit) +
          '<br>' + esc(where) + ', node ' + esc(row.node) +
          '<br>' + esc(C.fmtTime(b.start_ns / 1e9)) + ' to ' + esc(C.fmtTime(b.end_ns / 1e9)) +
          (b.windows > 1 ? ' (average of ' + b.windows + ' windows)' : '');
      };
      if (st.mark) {
        opt.series[0].markArea = { silent: true, itemStyle: { color: 'rgba(0,90,255,0.12)', borderColor: '#05f', borderWidth: 2 }, data: st.mark };
      }
      c.unit = m.unit;
      c.values = function () { return vals.map(function (v) { return isFinite(v) ? v : null; }); };
      c.chart.setOption(opt, true);
    };
    st.show();
    return st;
  }

  // Latency heatmaps, one per histogram, made as the data names them.
  function latency(list) {
    var box = document.getElementById('latency-charts');
    if (!box) { return; }
    sections('latency', list.length > 0);
    list.forEach(function (l, i) { drawLatency(box, i, l); });
  }
  function drawLatency(box, i, l) {
    var el = document.getElementById('chart-latency-' + i);
    if (!el) {
      var h = document.createElement('h3');
      h.className = 'name';
      h.id = 'latency-title-' + i;
      box.appendChild(h);
      var note = document.createElement('p');
      note.className = 'note';
      note.id = 'latency-note-' + i;
      box.appendChild(note);
      el = document.createElement('div');
      el.className = 'chart';
      el.id = 'chart-latency-' + i;
      el.style.height = '420px';
      box.appendChild(el);
    }
    // A --func function's chart sits in the functions section, which
    // titles it itself: no title or note element there.
    var title = document.getElementById('latency-title-' + i);
    if (title) { title.textContent = l.name; }

    var c = register('latency-' + i, el, 'events');
    var nb = l.bins.length, nr = l.hi - l.lo + 1, data = [], vals = [];
    for (var r = 0; r < nr; r++) {
      for (var k = 0; k < nb; k++) {
        var v = l.counts[r * nb + k];
        data.push([k, r, v > 0 ? v : '-']);
        vals.push(v > 0 ? v : NaN);
      }
    }
    var opt = clone(D.skeletons.latency), ta = timeOf(l.bins, el.clientWidth || 1000);
    opt.xAxis[0].data = ta.data;
    opt.xAxis[0].axisLabel = ta.axisLabel;
    // The axes sit outside the data: the x axis on the bottom edge, not
    // at zero of the percentile lines' hidden axis.
    opt.xAxis[0].axisLine = { onZero: false };
    opt.yAxis[0].data = l.labels;
    opt.yAxis.push({ type: 'value', min: -0.5, max: nr - 0.5, show: false });
    var scale = C.colourScale(vals, 0), notes = [];
    C.colourBar(opt.visualMap[0], 'events', scale);
    if (scale.clipped) { notes.push('Colour scale clipped at the 99th percentile of the cells, ' + fmt(scale.max) + ' events (the highest cell has ' + fmt(scale.top) + '); cells above it are drawn in the darkest colour.'); }
    if (l.bin_windows > 1) { notes.push('Each column sums ' + l.bin_windows + ' windows.'); }
    var noteEl = document.getElementById('latency-note-' + i);
    if (noteEl) { noteEl.textContent = notes.join(' '); }
    opt.visualMap[0].seriesIndex = 0;
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
      var k = p.dataIndex % nb, b = l.bins[k];
      var when = esc(C.fmtTime(b.start_ns / 1e9)) + ' to ' + esc(C.fmtTime(b.end_ns / 1e9));
      if (p.seriesType === 'line') {
        var ns = p.seriesName === 'p50' ? l.p50_ns[k] : l.p99_ns[k];
        return esc(p.seriesName) + ': <b>' + esc(C.fmtNS(ns)) + '</b><br>' + when;
      }
      var row = p.value[1], lo = l.labels[row], hi = row + 1 < l.labels.length ? l.labels[row + 1] : 'and more';
      return esc(l.name) + ' ' + esc(lo) + ' to ' + esc(hi) + ': <b>' + esc(exact(p.value[2])) + '</b> events<br>' + when;
    };
    c.values = function () { return l.counts.slice(); };
    c.chart.setOption(opt, true);
  }

  // draw (re)draws every heatmap from chart data: the page's own, or a
  // live update.
  function draw(data) {
    grid('cpu', data.cpu);
    grid('node', data.node);
    latency(data.latency || []);
  }
  draw(D);

  // Flame graphs: flames[i] of the data block goes in #flame-i, whose
  // data-unit says what its widths count; any event's tree is one more.
  var flames = [];
  (D.flames || []).forEach(function (f, i) {
    var el = document.getElementById('flame-' + i);
    if (el) { flames.push(cacheheatFlame.draw(el, f, el.closest('.flame-box'), el.getAttribute('data-unit') || 'samples')); }
  });

  // "Top stacks" shows 20 rows; the button shows the rest.
  Array.prototype.forEach.call(document.querySelectorAll('button.expand'), function (b) {
    b.addEventListener('click', function () {
      var table = b.parentNode.previousElementSibling;
      Array.prototype.forEach.call(table.querySelectorAll('tr.more'), function (tr) { tr.hidden = false; });
      b.parentNode.hidden = true;
    });
  });
  // Hot lines: the search box shows the functions whose name or files
  // match, as a substring (case-insensitive).
  var ls = document.getElementById('lines-search');
  if (ls) {
    ls.addEventListener('input', function () {
      var q = ls.value.toLowerCase();
      Array.prototype.forEach.call(document.querySelectorAll('.hotfn'), function (d) {
        d.hidden = q !== '' && d.getAttribute('data-search').toLowerCase().indexOf(q) < 0;
      });
    });
  }
  if (D.offcpu_flame) {
    var offEl = document.getElementById('flame-offcpu');
    if (offEl) { flames.push(cacheheatFlame.draw(offEl, D.offcpu_flame, offEl.closest('.flame-box'), 'us blocked')); }
  }

  // Findings link to the per-core heatmap: select the metric the finding
  // is about and mark its CPUs and time range.
  function showFinding(f) {
    var g = grids.cpu;
    if (!g) { return; }
    var mi = 0;
    g.grid.metrics.forEach(function (m, i) { if (m.name === f.metric) { mi = i; } });
    var bins = g.grid.bins, c0 = 0, c1 = bins.length - 1;
    var sc = f.scope || {};
    if (sc.end_ns > sc.start_ns) {
      bins.forEach(function (b, i) {
        if (b.end_ns <= sc.start_ns) { c0 = i + 1; }
        if (b.start_ns < sc.end_ns) { c1 = i; }
      });
    }
    c0 = Math.min(c0, c1);
    var areas = [];
    g.grid.rows.forEach(function (r, i) {
      var hit = (!sc.cpus || !sc.cpus.length) && (!sc.nodes || !sc.nodes.length);
      r.cpus.forEach(function (cpu) { if (sc.cpus && sc.cpus.indexOf(cpu) >= 0) { hit = true; } });
      if (sc.nodes && sc.nodes.indexOf(r.node) >= 0) { hit = true; }
      if (hit) { areas.push([{ xAxis: c0, yAxis: i }, { xAxis: c1, yAxis: i }]); }
    });
    g.show(mi, areas);
    var note = document.getElementById('cpu-mark');
    if (note) { note.textContent = 'Marked: ' + f.title; }
  }
  Array.prototype.forEach.call(document.querySelectorAll('.show-finding'), function (a) {
    a.addEventListener('click', function () {
      var f = D.findings && D.findings.findings[Number(a.getAttribute('data-finding'))];
      if (f) { showFinding(f); }
    });
  });

  window.addEventListener('resize', function () {
    charts.forEach(function (c) { c.chart.resize(); });
  });

  if (!D.live) {
    C.selftest(charts, function () { return { flames: document.querySelectorAll('.fr').length }; });
  }
  return { draw: draw, charts: charts, flames: flames };
}());
