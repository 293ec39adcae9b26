// Package heatmap writes a recording as one self-contained, offline HTML
// report: per-core, per-node and latency heatmaps, processes, stacks and a
// flame graph per sampled event, the host's topology and the data's
// quality. The live view's page (WriteLivePage) is the same heatmap
// sections and script, redrawn from BuildCharts of the windows so far; the
// diff report shares the page shell, the helpers in common.js and the
// colour bars.
//
// The work is split in two so that each half can be tested on its own. The
// transforms (Build and the functions it calls) turn a *profile.Recording
// into plain data structs; they are pure and golden-tested under testdata.
// The page (WritePage) places that data, JSON-encoded with every '<', '>',
// '&', U+2028 and U+2029 escaped, in a <script type="application/json">
// block of the project's own html/template page, beside the vendored
// ECharts build (assets/echarts.min.js, inlined) and the page's script,
// which reads the block and draws the charts. Nothing is fetched: a
// Content-Security-Policy meta tag forbids every external load.
//
// go-echarts builds each chart's static option skeleton (axes, visual map,
// tooltip, zoom); its RenderSnippet output is parsed back as JSON and
// carried in the data block. Recording data (names, symbols, command
// lines, counts) never passes through go-echarts, whose option JSON is
// inserted unescaped by design.
package heatmap
