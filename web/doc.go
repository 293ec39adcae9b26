// Package web serves cacheheat recordings over HTTP: a browser for the
// recordings in one directory with their reports and diffs rendered on
// demand (Server), and the live view of a recording in progress (Live),
// whose page and charts are the report's own (heatmap.WriteLivePage and
// heatmap.BuildCharts), fed from memory as the recorder closes windows.
//
// Both are read-only and local by default. Every response carries a
// Content-Security-Policy and related headers; every string from a
// recording is escaped by html/template or sent as JSON and inserted with
// textContent. The Server opens only regular files inside its directory:
// names are relative, never contain "..", and after resolving symlinks
// must still lie inside the directory (a symlink that stays inside is
// served, one that points out is refused as not found). The Live view
// never blocks the recorder: each client has a small queue and a client
// that cannot keep up loses live updates (counted and shown to it), never
// the recording's data.
package web
