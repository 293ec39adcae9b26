// The diff report's script: reads the JSON data block and draws the
// per-window plot, the BASE/NEW/delta heatmaps and the latency overlays.
// Recording strings reach the page only through textContent, ECharts'
// canvas text, or esc() in tooltip formatters.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cacheheat-data').textContent);
  var charts = [];
  var esc = cacheheatCommon.esc, clone = cacheheatCommon.clone, fmt = cacheheatCommon.fmt;
  function init(el) {
    var c = echarts.init(el, null, { renderer: 'canvas' });
    charts.push({ id: el.id || 'latency-' + charts.length, chart: c, el: el });
    return c;
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
      grid: { left: 80, right: 30, top: 40, bottom: 40 },
      xAxis: { type: 'category', name: 'window', data: xs },
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
    var hb = init(document.getElementById('chart-heat-base'));
    var hn = init(document.getElementById('chart-heat-new'));
    var hd = init(document.getElementById('chart-heat-delta'));
    D.heat.forEach(function (h, i) {
      var o = document.createElement('option');
      o.value = String(i);
      o.textContent = h.event;
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
    var draw = function (chart, vals, lo, hi, colours, label) {
      var opt = clone(D.skeletons.heat);
      opt.xAxis = [{ type: 'category', data: cols, name: 'window' }];
      opt.yAxis = [{ type: 'category', data: D.rows }];
      opt.visualMap = [Object.assign(opt.visualMap ? opt.visualMap[0] || {} : {}, { min: lo, max: hi, inRange: { color: colours } })];
      opt.tooltip = { trigger: 'item', formatter: function (p) {
        return esc(label) + '<br>' + esc(D.rows[p.value[1]]) + ', window ' + esc(cols[p.value[0]]) + ': ' + esc(fmt(p.value[2])) + '/s';
      } };
      opt.series = [{ type: 'heatmap', name: 'cells', data: cells(vals), animation: false }];
      chart.setOption(opt, true);
    };
    var show = function (i) {
      var h = D.heat[i], hi = 0, dm = 0, k;
      for (k = 0; k < h.base.length; k++) {
        if (h.base[k] !== null) { hi = Math.max(hi, h.base[k]); }
        if (h.new[k] !== null) { hi = Math.max(hi, h.new[k]); }
        if (h.delta[k] !== null) { dm = Math.max(dm, Math.abs(h.delta[k])); }
      }
      var heat = ['#f7fbff', '#fdd49e', '#fc8d59', '#d7301f', '#7f0000'];
      draw(hb, h.base, 0, hi || 1, heat, 'BASE ' + h.event);
      draw(hn, h.new, 0, hi || 1, heat, 'NEW ' + h.event);
      draw(hd, h.delta, -(dm || 1), dm || 1, ['#2166ac', '#92c5de', '#f7f7f7', '#f4a582', '#b2182b'], 'NEW - BASE ' + h.event);
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
        grid: { left: 70, right: 30, top: 40, bottom: 50 },
        xAxis: { type: 'category', data: l.labels, name: 'latency' },
        yAxis: { type: 'value', axisLabel: { formatter: function (v) { return (100 * v).toFixed(0) + '%'; } } },
        series: [
          { name: 'BASE', type: 'bar', data: l.base, barGap: '-100%', itemStyle: { opacity: 0.55 } },
          { name: 'NEW', type: 'bar', data: l.new, itemStyle: { opacity: 0.55 } }
        ]
      });
    });
  }
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.chart.resize(); }); });

  cacheheatCommon.selftest(charts, function () { return { flames: 0 }; });
}());
