#!/usr/bin/env bash
# Where the cpu-clock sampler's time goes: builds three variants of the
# current BPF source (no kernel stack, no user stack, neither) beside the
# real one and measures them side by side with bench/cost.py at 999 Hz
# (BENCHMARKS.md, "Recording cost"). A diagnostic: the variants are never
# committed. Needs root, clang and go (make generate), python3.
# Usage: bench/sampler-parts.sh [ROUNDS] (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
out=$(mktemp -d)
cp bpf/cacheheat.c "$out/orig.c"
restore() { cp "$out/orig.c" bpf/cacheheat.c; go generate ./bpf/... >/dev/null; rm -rf "$out"; }
trap restore EXIT
nok='s/^\tif (in_kernel(ctx)) {$/\tif (in_kernel(ctx) \&\& 0) {/'
nou='s/^\tulen = bpf_get_stack(ctx, (void \*)r->frames + klen, MAX_STACK_DEPTH \* sizeof(u64), BPF_F_USER_STACK);$/\tulen = -EFAULT;/'
for v in full nokstack noustack nostacks; do
  cp "$out/orig.c" bpf/cacheheat.c
  case $v in
    nokstack) sed -i "$nok" bpf/cacheheat.c ;;
    noustack) sed -i "$nou" bpf/cacheheat.c ;;
    nostacks) sed -i "$nok; $nou" bpf/cacheheat.c ;;
  esac
  # A variant that is the real program measures nothing: the edits must
  # still find the code they change.
  if [ "$v" != full ] && cmp -s bpf/cacheheat.c "$out/orig.c"; then
    echo "sampler-parts.sh: the $v edit no longer matches bpf/cacheheat.c" >&2
    exit 1
  fi
  [ "$v" != nostacks ] || [ "$(diff "$out/orig.c" bpf/cacheheat.c | grep -c '^>')" = 2 ] || {
    echo "sampler-parts.sh: the nostacks edits no longer both match bpf/cacheheat.c" >&2; exit 1; }
  go generate ./bpf/... >/dev/null
  go build -o "$out/$v" ./cmd/cacheheat
done
python3 bench/cost.py --rounds "$ROUNDS" --seconds 6 --scenarios rcu-bad-999,falseshare-good-999 \
  --bin "full=$out/full,nokstack=$out/nokstack,noustack=$out/noustack,nostacks=$out/nostacks" | grep -E '^\| (scenario|---|.*sample_clock)'
