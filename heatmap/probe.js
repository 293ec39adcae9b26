// The machine page: fills the matrix, its summary table and the
// staircase from the data block. Every string from the data that reaches
// HTML goes through esc or textContent.
(function () {
  'use strict';
  var C = cacheheatCommon, esc = C.esc;
  var data = JSON.parse(document.getElementById('cacheheat-data').textContent);
  var p = data.probe, charts = [];

  function matrix() {
    var el = document.getElementById('c2c-chart');
    if (!el || !p.c2c) { return; }
    var m = p.c2c, names = m.cpus.map(String), idx = {};
    m.cpus.forEach(function (c, i) { idx[c] = i; });
    var cells = [], lo = Infinity, hi = 0, byRel = {};
    m.cells.forEach(function (c) {
      if (c.error) { return; }
      cells.push([idx[c.to], idx[c.from], c.median_ns, c.min_ns, c.max_ns, c.relation]);
      lo = Math.min(lo, c.median_ns); hi = Math.max(hi, c.median_ns);
      (byRel[c.relation] = byRel[c.relation] || []).push(c.median_ns);
    });
    el.style.height = C.chartHeight(names.length) + 'px';
    var opt = C.clone(data.heat);
    opt.xAxis[0].data = names; opt.xAxis[0].name = 'to CPU';
    opt.yAxis[0].data = names; opt.yAxis[0].name = 'from CPU'; opt.yAxis[0].inverse = true;
    opt.visualMap[0].min = isFinite(lo) ? Math.floor(lo) : 0;
    opt.visualMap[0].max = hi > 0 ? Math.ceil(hi) : 1;
    opt.visualMap[0].text = ['ns', ''];
    opt.visualMap[0].dimension = 2; // the median; later dimensions are for the tooltip
    opt.dataZoom = [];
    opt.grid[0].left = '70';
    opt.tooltip.formatter = function (q) {
      var d = q.data;
      return esc('CPU ' + names[d[1]] + ' → CPU ' + names[d[0]] + ' (' + d[5] + ')') + '<br>' +
        esc('median ' + C.fmtNS(d[2]) + ', rounds ' + C.fmtNS(d[3]) + '–' + C.fmtNS(d[4]));
    };
    opt.series[0].data = cells;
    var chart = echarts.init(el);
    chart.setOption(opt);
    // Outline each L3 domain (thin) and node or package (thick) on the
    // diagonal: rectangles around their cells, placed from the cells'
    // pixel centres (a markArea would run centre to centre).
    var outline = function () {
      var n = names.length, rects = [];
      if (n < 2) { return; }
      var c0 = chart.convertToPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [0, 0]);
      var c1 = chart.convertToPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [1, 1]);
      var hw = Math.abs(c1[0] - c0[0]) / 2, hh = Math.abs(c1[1] - c0[1]) / 2;
      (p.groups || []).forEach(function (g) {
        if (g.kind === 'smt') { return; }
        var at = g.cpus.map(function (c) { return idx[c]; }).filter(function (i) { return i !== undefined; });
        if (!at.length) { return; }
        var i0 = Math.min.apply(null, at), i1 = Math.max.apply(null, at);
        var a = chart.convertToPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [i0, i0]);
        var b = chart.convertToPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [i1, i1]);
        rects.push({
          type: 'rect', silent: true, z: 100,
          shape: { x: Math.min(a[0], b[0]) - hw, y: Math.min(a[1], b[1]) - hh, width: Math.abs(b[0] - a[0]) + 2 * hw, height: Math.abs(b[1] - a[1]) + 2 * hh },
          style: { fill: 'rgba(0,0,0,0)', stroke: '#222', lineWidth: g.kind === 'l3' ? 1 : 3 }
        });
      });
      chart.setOption({ graphic: rects }, { replaceMerge: ['graphic'] });
    };
    outline();
    charts.push({ id: el.id, chart: chart, el: el, unit: 'ns' });

    var body = document.querySelector('#c2c-summary tbody');
    ['smt', 'l3', 'node', 'package', 'remote'].forEach(function (rel) {
      var v = byRel[rel];
      if (!v) { return; }
      v.sort(function (a, b) { return a - b; });
      var med = v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
      var labels = { smt: 'SMT siblings (one core)', l3: 'same L3', node: 'same node, other L3', package: 'same package, other node', remote: 'other package' };
      var tr = document.createElement('tr');
      [labels[rel], String(v.length), C.fmtNS(med), C.fmtNS(v[0]), C.fmtNS(v[v.length - 1])].forEach(function (t) {
        var td = document.createElement('td'); td.textContent = t; tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function sizeLabel(n) {
    if (n >= 1 << 30) { return (n / (1 << 30)) + ' GiB'; }
    if (n >= 1 << 20) { return (n / (1 << 20)) + ' MiB'; }
    return (n / 1024) + ' KiB';
  }

  function staircase() {
    var el = document.getElementById('stair-chart');
    if (!el || !p.staircase || !p.staircase.length) { return; }
    var sizes = [];
    p.staircase.forEach(function (s) {
      s.steps.forEach(function (st) { if (sizes.indexOf(st.size_bytes) < 0) { sizes.push(st.size_bytes); } });
    });
    sizes.sort(function (a, b) { return a - b; });
    var opt = C.clone(data.staircase);
    opt.xAxis[0].data = sizes.map(sizeLabel);
    opt.series = p.staircase.map(function (s, i) {
      var byS = {};
      s.steps.forEach(function (st) { byS[st.size_bytes] = st.ns_per_load; });
      var marks = [];
      if (i === 0) {
        (s.levels || []).forEach(function (l) {
          var at = sizes.indexOf(l.size_bytes);
          if (at >= 0) { marks.push({ xAxis: at, name: 'L' + l.level, label: { formatter: 'L' + l.level } }); }
        });
      }
      return {
        type: 'line', name: 'node ' + s.node + ' (CPU ' + s.cpu + ')', showSymbol: true,
        data: sizes.map(function (z) { return byS[z] === undefined ? null : Math.round(byS[z] * 100) / 100; }),
        markLine: { silent: true, symbol: 'none', lineStyle: { type: 'dashed' }, data: marks }
      };
    });
    opt.tooltip.formatter = function (qs) {
      return qs.map(function (q) { return esc(q.seriesName + ': ' + sizeLabel(sizes[q.dataIndex]) + ', ' + C.fmtNS(q.value)); }).join('<br>');
    };
    el.style.height = '360px';
    var chart = echarts.init(el);
    chart.setOption(opt);
    charts.push({ id: el.id, chart: chart, el: el, unit: 'ns' });
  }

  matrix();
  staircase();
  C.selftest(charts, function () { return { cells: p.c2c ? p.c2c.cells.length : 0 }; });
})();
