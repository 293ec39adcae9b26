package heatmap

// EChartsJS returns the vendored ECharts build, for pages outside this
// package that inline it too (the web package's live view), so the tree
// holds one copy.
func EChartsJS() string { return echartsJS }
