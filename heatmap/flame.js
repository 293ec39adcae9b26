// A flame graph of div boxes, for any event's stacks (on-CPU samples,
// off-CPU time, ...): the outermost frame at the bottom, width in
// proportion to the value. Click a frame to zoom into it, a grey
// ancestor below to zoom back out, Reset to see everything; the search
// box highlights the frames whose name matches (a regexp, or plain text
// when it is not one) and says what share of the whole they hold.
// Names reach the page only through textContent and title.
var cacheheatFlame = (function () {
  'use strict';
  var rowH = 18;
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
  function matcher(q) {
    if (!q) { return null; }
    try { var re = new RegExp(q, 'i'); return function (s) { return re.test(s); }; } catch (e) {
      var low = q.toLowerCase();
      return function (s) { return s.toLowerCase().indexOf(low) >= 0; };
    }
  }
  // matched sums the value under the outermost matching frames, so a
  // recursive match is not counted twice.
  function matched(n, m) {
    if (m(n.n)) { return n.v; }
    var s = 0;
    (n.c || []).forEach(function (c) { s += matched(c, m); });
    return s;
  }

  // diffHue colours a differential flame graph's frame by the change of
  // its share, d (points of the whole, NEW minus BASE): red where it
  // grew, blue where it shrank, white where it held, at full colour from
  // dmax on.
  function diffHue(d, dmax) {
    var a = Math.min(1, Math.abs(d || 0) / (dmax || 1));
    var l = 97 - 45 * a;
    return d > 0 ? 'hsl(0,75%,' + l + '%)' : 'hsl(215,75%,' + l + '%)';
  }
  function maxDelta(n) {
    var m = Math.abs(n.d || 0);
    (n.c || []).forEach(function (c) { m = Math.max(m, maxDelta(c)); });
    return m;
  }

  // draw builds the flame graph of root into el; box (an ancestor of el,
  // may be null) holds the search field, the reset button and the match
  // note. unit names what the values count. diff: root is a differential
  // flame graph whose nodes carry d, their share's change.
  function draw(el, root, box, unit, diff) {
    var dmax = diff ? Math.max(maxDelta(root), 0.005) : 0;
    var top = root, path = [], match = null;
    var search = box && box.querySelector('.flame-search');
    var reset = box && box.querySelector('.flame-reset');
    var note = box && box.querySelector('.flame-match');
    var fmt = cacheheatCommon.exact;
    function render() {
      while (el.firstChild) { el.removeChild(el.firstChild); }
      el.className = 'flame' + (match ? ' searching' : '');
      el.style.height = ((depth(top) + path.length) * rowH) + 'px';
      var lvl = 0;
      path.forEach(function (a) { box1(a, 0, 100, lvl++, true); });
      walk(top, 0, 100, lvl);
      function walk(n, x, w, d) {
        box1(n, x, w, d, false);
        var cx = x;
        (n.c || []).forEach(function (c) {
          var cw = w * c.v / (n.v || 1);
          if (cw >= 0.05) { walk(c, cx, cw, d + 1); }
          cx += cw;
        });
      }
      function box1(n, x, w, d, ancestor) {
        var b = document.createElement('div');
        b.className = 'fr' + (ancestor ? ' anc' : '') + (match && match(n.n) ? ' hit' : '');
        b.style.left = x + '%';
        b.style.width = w + '%';
        b.style.bottom = (d * rowH) + 'px';
        b.style.background = ancestor ? '#ddd' : (diff ? diffHue(n.d, dmax) : hue(n.n));
        b.textContent = n.n;
        b.title = n.n + '\n' + fmt(n.v) + ' ' + unit + ' (' + (100 * n.v / (root.v || 1)).toFixed(2) + '% of all)' +
          (diff ? '\n' + ((n.d || 0) >= 0 ? '+' : '') + (100 * (n.d || 0)).toFixed(2) + ' points of the whole against BASE' : '');
        b.addEventListener('click', function () { zoom(n, ancestor); });
        el.appendChild(b);
      }
    }
    function zoom(n, ancestor) {
      if (n === root) { top = root; path = []; } else if (ancestor) {
        var i = path.indexOf(n);
        top = n; path = path.slice(0, i);
      } else if (n !== top) {
        path = path.concat([top], pathBetween(top, n));
        top = n;
      }
      render();
    }
    function pathBetween(from, target) {
      var out = [];
      (function rec(n, acc) {
        if (n === target) { out = acc.slice(1); return true; }
        return (n.c || []).some(function (c) { return rec(c, acc.concat([c])); });
      })(from, [from]);
      return out.slice(0, -1);
    }
    function find() {
      var q = search ? search.value.trim() : '';
      match = matcher(q);
      if (note) {
        if (!match) { note.textContent = ''; } else {
          var v = matched(root, match);
          note.textContent = 'matched: ' + (100 * v / (root.v || 1)).toFixed(1) + '% of ' + unit + ' (' + fmt(v) + ' of ' + fmt(root.v) + ')';
        }
      }
      render();
    }
    if (search) { search.addEventListener('input', find); }
    if (reset) { reset.addEventListener('click', function () { top = root; path = []; render(); }); }
    render();
    return { search: function (q) { if (search) { search.value = q; } find(); return note ? note.textContent : ''; } };
  }
  return { draw: draw };
}());
