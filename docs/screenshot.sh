#!/bin/sh
# Refreshes a report screenshot from a real recording: the whole host
# (record -a) for 10 s while the rcu workload's bad variant runs on every
# CPU, rendered with 'cacheheat report' and photographed by headless
# Chromium (offline, as a reader would see the page).
#
#   sudo docs/screenshot.sh                         # docs/report.png
#   sudo docs/screenshot.sh docs/report-16cpu.png   # on a 16-CPU host
#
# Needs root (or CAP_BPF and CAP_PERFMON), Go and /usr/bin/chromium.
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/report.png}
chromium=${CHROMIUM:-/usr/bin/chromium}
make build >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The load outlives the recording, so every window sees it.
bin/cacheheat workload run rcu --variant bad -t "$(nproc)" -d 13s >/dev/null &
load=$!
sleep 1
bin/cacheheat record -q -a -i 500ms -d 10s -o "$tmp/host.rec"
wait "$load"
bin/cacheheat report "$tmp/host.rec" -o "$tmp/host.html" >/dev/null
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--disable-background-networking --host-resolver-rules='MAP * ~NOTFOUND' \
	--user-data-dir="$tmp/profile" --window-size=1280,3600 --virtual-time-budget=10000 \
	--screenshot="$PWD/$out" "file://$tmp/host.html" 2>/dev/null
echo "wrote $out from a $(nproc)-CPU recording"
