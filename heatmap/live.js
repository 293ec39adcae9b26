// The live view's script, after the report's: it follows the recorder's
// event stream (GET /events) and redraws the report's heatmaps with each
// update, which carries the charts of all windows so far. Everything from
// the stream is parsed with JSON.parse and reaches the page as chart data
// or through textContent, never as HTML.
(function () {
  'use strict';
  var C = cacheheatCommon;
  var last = null, updates = 0;
  function $(id) { return document.getElementById(id); }
  function text(id, s) { $(id).textContent = s; }
  function render() {
    var u = last;
    if (!u) { return; }
    text('live-state', 'Recording: ' + (u.windows === 1 ? '1 window' : u.windows + ' windows') + ', ' + C.fmtTime((u.end_ns - u.start_ns) / 1e9));
    var st = u.status || {}, parts = [];
    if (st.target) { parts.push('target: ' + st.target); }
    if (st.output) { parts.push('recording to ' + st.output); }
    if (st.samples !== undefined) { parts.push(C.exact(st.samples) + ' stack samples'); }
    var drops = 0, dt = u.drops || {};
    Object.keys(dt).forEach(function (k) { drops += dt[k]; });
    parts.push(drops ? C.exact(drops) + ' data drops (see the report\'s data quality section)' : 'no data lost');
    text('live-status', parts.join(' · '));
    var ul = $('live-findings');
    ul.textContent = '';
    (u.findings || []).forEach(function (f, i) {
      var li = document.createElement('li');
      li.className = 'sev-' + (f.severity === 'high' ? 'high' : 'other');
      var ev = ((u.evidence || [])[i] || []).join(', ');
      li.textContent = '[' + f.severity + '] ' + f.title + (ev ? ': ' + ev : '');
      ul.appendChild(li);
    });
    if (!(u.findings || []).length) {
      var li = document.createElement('li');
      li.textContent = 'none so far';
      ul.appendChild(li);
    }
    text('live-findings-note', u.findings_windows ? '(analysed over the first ' + u.findings_windows + ' windows)' : '');
    var banner = $('live-banner');
    banner.hidden = !u.banner;
    banner.textContent = u.banner || '';
    if (u.charts) { cacheheatReport.draw(u.charts); }
  }
  // cacheheatLive is the hook the browser tests read.
  window.cacheheatLive = {
    updates: function () { return updates; },
    inspect: function () { return C.inspect(cacheheatReport.charts); },
    errors: function () { return window.__cacheheatErrors || []; }
  };
  var es = new EventSource('/events');
  es.addEventListener('open', function () { if (!last) { text('live-state', 'Waiting for the first window…'); } });
  es.addEventListener('window', function (e) { last = JSON.parse(e.data); updates++; render(); });
  es.addEventListener('dropped', function (e) {
    var el = $('live-dropped');
    el.hidden = false;
    el.textContent = JSON.parse(e.data) + ' updates dropped: this page could not keep up (the recording is not affected).';
  });
  es.addEventListener('end', function (e) {
    es.close();
    var end = JSON.parse(e.data);
    if (end.report) {
      text('live-state', 'Recording finished' + (last ? ': ' + (last.windows === 1 ? '1 window' : last.windows + ' windows') : ''));
      $('live-report').hidden = false;
    } else {
      text('live-state', 'Recording finished without a report');
      var er = $('live-error');
      er.hidden = false;
      er.textContent = end.error;
    }
  });
  es.addEventListener('error', function () {
    if (es.readyState === EventSource.CLOSED && $('live-report').hidden) { text('live-state', 'Disconnected from the recorder'); }
  });
}());
