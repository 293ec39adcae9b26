#!/usr/bin/env bash
# Verdicts over repeated runs (issue 31's goals):
#   good   each O3 workload's good variant recorded RUNS times (default 10)
#          with the host's default events, findings of medium or high
#          severity counted (goal: none)
#   table  the graded set of programs nobody here tuned to (TestGradeVerdicts:
#          pipe ping-pong, stress-ng switch/sock/hdd/mutex/futex/sleep, many
#          sleepers, rcu, cold start, busy threads) run COUNT times (default
#          3), quiet and beside a 2-thread load; each case's passes counted
# Needs root; table needs go (or TEST_BIN, a `go test -c` binary of
# ./cmd/cacheheat, with CACHEHEAT_TEST_BIN and CACHEHEAT_TEST_PROGRAMS set,
# for a machine without a toolchain) and stress-ng.
# Usage: bench/verdicts.sh [good] [table]   (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
COUNT=${COUNT:-3}
if [ -z "${BIN:-}" ]; then
  make -s build
  BIN=$PWD/bin/cacheheat
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

good() {
  echo "| good variant | runs | runs with a medium/high finding | findings seen (any severity) |"
  echo "|---|---|---|---|"
  for w in falseshare align ffn kvcache rcu; do
    local bad=0 seen=""
    for _ in $(seq "$RUNS"); do
      "$BIN" record -q -o "$tmp/g.rec" -- "$BIN" workload run "$w" --variant good -t 2 -d 4s >/dev/null 2>&1 || { seen="$seen record-failed"; continue; }
      "$BIN" analyze --json "$tmp/g.rec" >"$tmp/g.json" 2>/dev/null
      # findings[].rule and .severity, one "rule severity" line each.
      local f
      f=$(tr -d '\n ' <"$tmp/g.json" | sed 's/"not_evaluated".*//' | grep -o '"rule":"[^"]*"\|"severity":"[^"]*"' | cut -d'"' -f4 | paste -d' ' - -)
      echo "$f" | grep -qE ' (medium|high)$' && bad=$((bad + 1))
      seen="$seen $(echo "$f" | tr '\n' ',' )"
    done
    seen=$(echo "$seen" | tr ' ,' '\n\n' | grep . | sort | uniq -c | awk '{ printf "%s%s x%d", s, $2 " " $3, $1; s = ", " }')
    echo "| $w | $RUNS | $bad | ${seen:-none} |"
  done
}

table() {
  local test=${TEST_BIN:-}
  if [ -z "$test" ]; then
    go test -c -o "$tmp/cacheheat.test" ./cmd/cacheheat || return 1
    test=$tmp/cacheheat.test
  fi
  (cd cmd/cacheheat && "$test" -test.run '^TestGradeVerdicts$' -test.count "$COUNT" -test.v -test.timeout 60m) >"$tmp/table.log" 2>&1
  echo "| case | quiet: pass/fail/skip | beside load: pass/fail/skip |"
  echo "|---|---|---|"
  grep -E '^ +--- (PASS|FAIL|SKIP): TestGradeVerdicts/[a-z-]+/' "$tmp/table.log" |
    awk '{ split($3, p, "/"); k = p[3]; if (!(k in order)) { order[k] = ++n; name[n] = k } c[k, p[2], $2]++ }
      END { for (i = 1; i <= n; i++) { k = name[i]
        printf "| %s | %d/%d/%d | %d/%d/%d |\n", k, c[k, "quiet", "PASS:"], c[k, "quiet", "FAIL:"], c[k, "quiet", "SKIP:"], c[k, "beside-load", "PASS:"], c[k, "beside-load", "FAIL:"], c[k, "beside-load", "SKIP:"] } }'
  grep -E -- '--- FAIL|    verdicts_test.go:[0-9]+: .*(must|never|fired)' "$tmp/table.log" | head -20
  [ -n "${TABLE_LOG:-}" ] && cp "$tmp/table.log" "$TABLE_LOG"
  return 0
}

for c in ${*:-good table}; do
  "$c"
  echo
done
