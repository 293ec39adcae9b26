#!/usr/bin/env bash
# Names and lines, measured against perf on the same runs (issue 25):
#   named   share of a short-lived program's samples whose innermost frame
#           is named, cacheheat record -a and perf record -a -g running at
#           once over the same runs (10 x 170 ms and 100 x 20 ms, static
#           and dynamic builds of cmd/cacheheat/testdata/programs/crunch.c);
#           the top-5 functions' shares against perf report --sort sym and
#           the top-5 lines' against --sort srcline
#   lines   what resolving lines costs: a 60 s record -a beside stress-ng
#           --cpu 2 with lines resolved when it ends and with --no-lines,
#           then report and export --pprof of each (3 runs, interleaved)
#   binaries the recorder's peak RSS with 200 distinct binaries running,
#           against the same recording without them
# Needs root, cc (static libc for the static build), perf, stress-ng.
# Usage: bench/named.sh [named] [lines] [binaries]   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
make -s build
bin=$PWD/bin/cacheheat
tmp=$(mktemp -d)
trap '[ -z "${KEEP:-}" ] && rm -rf "$tmp"' EXIT
cases=${*:-named lines binaries}
hz=${HZ:-99} # both samplers' rate

# shares FILE: "name share" lines from "name count" lines, largest first.
shares() { awk '{c[$1] += $2; t += $2} END {for (k in c) printf "%s %.4f\n", k, c[k] / t}' "$1" | sort -k2 -gr; }

# top5diff A B: the largest difference, in points, between the shares of
# A's top 5 names and the same names in B.
top5diff() {
  if [ ! -s "$1" ] || [ ! -s "$2" ]; then
    printf 'n/a (no rows from %s)' "$([ -s "$1" ] && echo perf || echo cacheheat)"
    return
  fi
  awk 'FILENAME == ARGV[1] { b[$1] = $2; next } FNR <= 5 { d = 100 * ($2 - b[$1]); if (d < 0) d = -d; if (d > m) m = d } END { printf "%.1f", m }' "$2" "$1"
}

named() {
  local src=cmd/cacheheat/testdata/programs/crunch.c
  cc -O2 -g -o "$tmp/crunch-dyn" "$src"
  cc -O2 -g -static -o "$tmp/crunch-static" "$src"
  echo "| program | runs (both at $hz Hz) | cacheheat: samples named | perf: samples named | top-5 functions, most apart | top-5 lines, most apart |"
  echo "|---|---|---|---|---|---|"
  for prog in ${PROGS:-crunch-dyn crunch-static}; do
    for spec in ${SPECS:-10:170 100:20}; do
      local n=${spec%:*} ms=${spec#*:}
      perf record -q -a -g -F "$hz" -o "$tmp/p.data" >/dev/null 2>&1 &
      local pp=$!
      "$bin" record -q -a -F "$hz" -o "$tmp/c.rec" >/dev/null 2>&1 &
      local cp=$!
      sleep 2 # both attached
      for _ in $(seq "$n"); do "$tmp/$prog" "$ms" >/dev/null; done
      sleep 0.5
      kill -INT "$pp" "$cp"
      wait "$pp" "$cp" 2>/dev/null
      # cacheheat: the innermost frame of the program's folded stacks.
      "$bin" export "$tmp/c.rec" --folded 2>/dev/null | awk -v p="$prog" -F';' '$1 == p { n = split($NF, a, " "); print a[1], a[n] }' >"$tmp/c.leaf"
      "$bin" export "$tmp/c.rec" --folded --lines 2>/dev/null | awk -v p="$prog" -F';' '$1 == p { n = split($NF, a, " "); l = a[n - 1]; gsub(/[()]/, "", l); sub(/.*\//, "", l); print l, a[n] }' >"$tmp/c.line"
      local cnamed
      cnamed=$(awk '{ t += $2; if ($1 !~ /^\[/ && $1 !~ /^0x/ && $1 !~ /\+0x/) n += $2 } END { printf "%.1f%% of %d", 100 * n / t, t }' "$tmp/c.leaf")
      # perf: the leaf symbol of the program's samples.
      perf report -i "$tmp/p.data" --comm "$prog" --no-children --percentage relative --sort sym --stdio -g none 2>/dev/null |
        awk '/^ +[0-9.]+%/ { pct = $1; sub(/%/, "", pct); $1 = ""; $2 = ""; sub(/^ +/, ""); print $0, pct }' | awk '{ v = $NF; $NF = ""; gsub(/ +$/, ""); gsub(/ /, "_"); print $0, v }' >"$tmp/p.sym"
      local pnamed
      pnamed=$(awk '{ t += $2; if ($1 !~ /^0x/ && $1 !~ /unknown/) n += $2 } END { printf "%.1f%%", 100 * n / t }' "$tmp/p.sym")
      # perf's srcline report comes back empty now and then (its
      # addr2line child): tried up to three times.
      for _ in 1 2 3; do
        perf report -i "$tmp/p.data" --comm "$prog" --no-children --percentage relative --sort srcline --stdio -g none 2>/dev/null |
          awk '/^ +[0-9.]+%/ { pct = $1; sub(/%/, "", pct); l = $2; sub(/.*\//, "", l); print l, pct }' >"$tmp/p.line"
        [ -s "$tmp/p.line" ] && break
      done
      shares "$tmp/c.leaf" >"$tmp/c.fs"
      shares "$tmp/p.sym" >"$tmp/p.fs"
      shares "$tmp/c.line" >"$tmp/c.ls"
      shares "$tmp/p.line" >"$tmp/p.ls"
      echo "| $prog | $n x $ms ms | $cnamed | $pnamed | $(top5diff "$tmp/c.fs" "$tmp/p.fs") points ($(head -1 "$tmp/c.fs" | tr ' ' '=')) | $(top5diff "$tmp/c.ls" "$tmp/p.ls") points ($(head -1 "$tmp/c.ls" | tr ' ' '=')) |"
    done
  done
}

# timed NAME CMD...: "NAME seconds peakKB user sys" of one run.
timed() {
  local name=$1
  shift
  /usr/bin/time -f "$name %e %M %U %S" "$@" >/dev/null 2>>"$tmp/times" || true
}

lines() {
  stress-ng --cpu 2 --timeout 0 >/dev/null 2>&1 &
  local bg=$!
  : >"$tmp/times"
  # The same 60 s record -a twice: lines resolved when it ends (the
  # default), and left to the reader (--no-lines).
  timed "record -a -d 60s" "$bin" record -q -a -d 60s -o "$tmp/a.rec"
  timed "record -a -d 60s --no-lines" "$bin" record -q -a -d 60s --no-lines -o "$tmp/n.rec"
  for _ in 1 2 3; do
    timed "report (lines in the recording)" "$bin" report "$tmp/a.rec" -o "$tmp/a.html"
    timed "report (lines read from the binaries)" "$bin" report "$tmp/n.rec" -o "$tmp/n.html"
    timed "report --no-lines" "$bin" report --no-lines "$tmp/a.rec" -o "$tmp/a.html"
    timed "export --pprof (lines in the recording)" "$bin" export "$tmp/a.rec" --pprof -o "$tmp/a.pb.gz"
    timed "export --pprof (lines read from the binaries)" "$bin" export "$tmp/n.rec" --pprof -o "$tmp/n.pb.gz"
    timed "export --pprof --no-lines" "$bin" export "$tmp/a.rec" --pprof --no-lines -o "$tmp/a.pb.gz"
  done
  kill "$bg"
  wait "$bg" 2>/dev/null
  echo "recordings: $(du -h "$tmp/a.rec" | cut -f1) with lines, $(du -h "$tmp/n.rec" | cut -f1) without"
  echo "| command | median time | median peak RSS | CPU (user+sys) |"
  echo "|---|---|---|---|"
  grep -v '^Command' "$tmp/times" | awk '{ c = $NF + $(NF - 1); m = $(NF - 2); t = $(NF - 3); NF -= 4; k = $0; ts[k] = ts[k] " " t; ms[k] = ms[k] " " m; cs[k] = cs[k] " " c } END { for (k in ts) print k "|" ts[k] "|" ms[k] "|" cs[k] }' |
    while IFS='|' read -r k ts ms cs; do
      med() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
      echo "| $k | $(echo "$ts" | med) s | $(( $(echo "$ms" | med) / 1024 )) MB | $(echo "$cs" | med) s |"
    done
}

binaries() {
  mkdir -p "$tmp/bins"
  for i in $(seq 200); do
    printf '#include <unistd.h>\nint v = %d; int main(void) { volatile unsigned long x = v; for (long i = 0; i < 20000000; i++) x = x * 3 + 1; sleep(6); return (int)(x & 1); }\n' "$i" >"$tmp/bins/p$i.c"
    cc -O1 -o "$tmp/bins/p$i" "$tmp/bins/p$i.c" &
    [ $((i % 16)) -eq 0 ] && wait
  done
  wait
  : >"$tmp/times"
  timed "record -a -d 8s, idle host" "$bin" record -q -a -d 8s -o "$tmp/idle.rec"
  timed "record -a -d 8s, 200 distinct binaries starting" "$bin" record -q -a -d 8s -o "$tmp/200.rec" &
  local rp=$!
  sleep 1 # attached: the binaries start, sample and exit while it records
  for i in $(seq 200); do "$tmp/bins/p$i" & done
  wait
  local named
  named=$("$bin" export "$tmp/200.rec" --folded 2>/dev/null | awk -F';' '$1 ~ /^p[0-9]+$/ { n = split($NF, a, " "); t += a[n]; if (a[1] !~ /^\[/ && a[1] !~ /^0x/ && a[1] !~ /\+0x/) m += a[n]; if (a[1] == "main") mm += a[n] } END { printf "the 200 programs: %d samples, %d named (%d in main)", t, m, mm }')
  echo "$named" >&2
  echo "| recording | time | recorder peak RSS |"
  echo "|---|---|---|"
  grep -v '^Command' "$tmp/times" | awk '{ m = $(NF - 2); t = $(NF - 3); NF -= 4; printf "| %s | %s s | %d MB |\n", $0, t, m / 1024 }'
  echo
  echo "$named"
}

for c in $cases; do
  "$c"
  echo
done
