// The diff report's script: reads the JSON data block and draws the
// per-window plot, the BASE/NEW/delta heatmaps and the latency overlays.
// Recording strings reach the page only through textContent, ECharts'
// canvas text, or esc() in tooltip formatters.
var cacheheatDiff = (function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cacheheat-data').textContent);
  var charts = [];
  var C = cacheheatCommon, esc = C.esc, clone = C.clone, fmt = C.fmt;
  function init(el) {
    var c = echarts.init(el, null, { renderer: 'canvas' });
    charts.push({ id: el.id || 'latency-' + charts.length, chart: c, el: el });
    return c;
  }
  function chartOf(el) {
    for (var i = 0; i < charts.length; i++) { if (charts[i].el === el) { return charts[i]; } }
    return null;
  }

  // Per-window values of the metric whose table row was clicked.
  var seriesEl = document.getElementById('chart-series');
  var seriesChart = seriesEl ? init(seriesEl) : null;
  function showSeries(i) {
    var s = D.series[i];
    if (!s || !seriesChart) { return; }
    document.getElementById('series-name').textContent = s.name + (s.unit ? ' (' + s.unit + ')' : '');
    var n = Math.max(s.base.length, s.new.length), xs = [];
    for (var k = 0; k < n; k++) { xs.push(String(k)); }
    seriesChart.setOption({
      animation: false,
      tooltip: { trigger: 'axis', valueFormatter: fmt },
      legend: { data: ['BASE', 'NEW'] },
      grid: { left: 80, right: 30, top: 40, bottom: 50 },
      xAxis: { type: 'category', name: 'window', nameLocation: 'middle', nameGap: 26, data: xs },
      yAxis: { type: 'value', axisLabel: { formatter: fmt } },
      series: [
        { name: 'BASE', type: 'line', data: s.base, symbolSize: 6 },
        { name: 'NEW', type: 'line', data: s.new, symbolSize: 6 }
      ]
    }, true);
  }
  Array.prototype.forEach.call(document.querySelectorAll('tr.metric-row'), function (tr) {
    tr.addEventListener('click', function () { showSeries(Number(tr.getAttribute('data-series'))); });
  });
  if (D.series.length) { showSeries(0); }

  // Heatmaps: BASE and NEW share one colour scale; the delta diverges
  // around zero.
  var sel = document.getElementById('heat-event');
  if (sel && D.heat.length) {
    var els = ['chart-heat-base', 'chart-heat-new', 'chart-heat-delta'].map(function (id) {
      var el = document.getElementById(id);
      el.style.height = C.chartHeight(D.rows.length) + 'px';
      return el;
    });
    var hb = init(els[0]), hn = init(els[1]), hd = init(els[2]);
    D.heat.forEach(function (h, i) {
      var o = document.createElement('option');
      o.value = String(i);
      o.textContent = h.event + ' (' + h.unit + ')';
      sel.appendChild(o);
    });
    var cols = [];
    for (var c = 0; c < D.cols; c++) { cols.push(String(c * D.bin_windows)); }
    var cells = function (vals) {
      var out = [];
      for (var i = 0; i < vals.length; i++) {
        if (vals[i] !== null) { out.push([i % D.cols, Math.floor(i / D.cols), vals[i]]); }
      }
      return out;
    };
    var plotH = C.chartHeight(D.rows.length) - 100, every = Math.max(1, Math.ceil(14 / (plotH / Math.max(1, D.rows.length))));
    var draw = function (chart, vals, scale, colours, label, unit) {
      var opt = clone(D.skeletons.heat);
      opt.xAxis = [{ type: 'category', data: cols, name: 'window', nameLocation: 'middle', nameGap: 26, axisLabel: { hideOverlap: true } }];
      // Three maps side by side in time need no zoom slider, whose place
      // the axis name takes.
      delete opt.dataZoom;
      opt.grid = { left: 150, right: 110, top: 30, bottom: 50 };
      opt.yAxis = [{ type: 'category', data: D.rows, inverse: true, axisLabel: { interval: function (i) { return i % every === 0; } } }];
      opt.visualMap = [C.colourBar(opt.visualMap ? opt.visualMap[0] || {} : {}, unit, scale, colours)];
      opt.tooltip = { trigger: 'item', formatter: function (p) {
        return esc(label) + '<br>' + esc(D.rows[p.value[1]]) + ', window ' + esc(cols[p.value[0]]) + ': ' + esc(fmt(p.value[2])) + ' ' + esc(unit);
      } };
      opt.series = [{ type: 'heatmap', name: 'cells', data: cells(vals), animation: false }];
      chart.setOption(opt, true);
      var c = chartOf(chart.getDom());
      c.unit = unit;
      c.values = function () { return vals.slice(); };
    };
    var show = function (i) {
      var h = D.heat[i], dm = 0, k, both = [];
      for (k = 0; k < h.base.length; k++) {
        both.push(h.base[k] === null ? NaN : h.base[k], h.new[k] === null ? NaN : h.new[k]);
        // The delta's scale comes from the steady state: the first
        // column is each command's start-up, whose spikes would wash
        // every later difference out to white.
        if (h.delta[k] !== null && (k % D.cols !== 0 || D.cols < 3)) { dm = Math.max(dm, Math.abs(h.delta[k])); }
      }
      var scale = C.colourScale(both, h.unit === '% busy' ? 100 : 0);
      draw(hb, h.base, scale, null, 'BASE ' + h.event, h.unit);
      draw(hn, h.new, scale, null, 'NEW ' + h.event, h.unit);
      draw(hd, h.delta, { min: -(dm || 1), max: dm || 1, clipped: true }, ['#2166ac', '#92c5de', '#f7f7f7', '#f4a582', '#b2182b'], 'NEW - BASE ' + h.event, 'Δ ' + h.unit);
    };
    sel.addEventListener('change', function () { show(Number(sel.value)); });
    show(0);
  }

  // Latency histograms overlaid.
  var box = document.getElementById('latency-charts');
  if (box) {
    D.latency.forEach(function (l) {
      var h = document.createElement('h3');
      h.className = 'name';
      h.textContent = l.name + ' (BASE ' + l.base_count + ' events, NEW ' + l.new_count + ' events)';
      box.appendChild(h);
      var el = document.createElement('div');
      el.className = 'chart';
      el.style.height = '320px';
      box.appendChild(el);
      init(el).setOption({
        animation: false,
        tooltip: { trigger: 'axis', valueFormatter: function (v) { return (100 * v).toFixed(2) + '%'; } },
        legend: { data: ['BASE', 'NEW'] },
        grid: { left: 70, right: 30, top: 40, bottom: 56 },
        xAxis: { type: 'category', data: l.labels, name: 'latency (log2 bucket, lower bound)', nameLocation: 'middle', nameGap: 28, axisLabel: { hideOverlap: true } },
        yAxis: { type: 'value', axisLabel: { formatter: function (v) { return (100 * v).toFixed(0) + '%'; } } },
        series: [
          { name: 'BASE', type: 'bar', data: l.base, barGap: '-100%', itemStyle: { opacity: 0.55 } },
          { name: 'NEW', type: 'bar', data: l.new, itemStyle: { opacity: 0.55 } }
        ]
      });
    });
  }
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.chart.resize(); }); });

  // The differential flame graph: frames coloured by their share's change.
  var flames = 0;
  var fe = document.getElementById('flame-diff');
  if (fe && D.flame_event) {
    cacheheatFlame.draw(fe, D.flame, fe.closest('.flame-box'), 'samples', true);
    flames++;
  }

  C.selftest(charts, function () { return { flames: flames }; });
  return { charts: charts };
}());
