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
nok='s/\tbool kernel = in_kernel(ctx);/\tbool kernel = in_kernel(ctx) \&\& 0;/'
nou='s/k\.ustack = bpf_get_stackid(ctx, &stacks\([01]\), BPF_F_USER_STACK);/k.ustack = -14;/'
for v in full nokstack noustack nostacks; do
  cp "$out/orig.c" bpf/cacheheat.c
  case $v in
    nokstack) sed -i "$nok" bpf/cacheheat.c ;;
    noustack) sed -i "$nou" bpf/cacheheat.c ;;
    nostacks) sed -i "$nok; $nou" bpf/cacheheat.c ;;
  esac
  go generate ./bpf/... >/dev/null
  go build -o "$out/$v" ./cmd/cacheheat
done
python3 bench/cost.py --rounds "$ROUNDS" --seconds 6 --scenarios rcu-bad-999,falseshare-good-999 \
  --bin "full=$out/full,nokstack=$out/nokstack,noustack=$out/noustack,nostacks=$out/nostacks" | grep -E '^\| (scenario|---|.*sample_clock)'
