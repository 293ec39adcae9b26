module github.com/cacheheat/cacheheat

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/go-echarts/go-echarts/v2 v2.6.7
	github.com/hodgesds/perf-utils v0.7.0
	github.com/spf13/pflag v1.1.0
	golang.org/x/arch v0.33.0
	golang.org/x/sys v0.50.0
)

require (
	go.uber.org/atomic v1.7.0 // indirect
	go.uber.org/multierr v1.6.0 // indirect
)
