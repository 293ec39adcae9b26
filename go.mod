module github.com/cacheheat/cacheheat

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/go-echarts/go-echarts/v2 v2.6.7
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/grafana/grafana-foundation-sdk/go v0.0.22
	github.com/hodgesds/perf-utils v0.7.0
	github.com/klauspost/compress v1.20.4
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
	github.com/spf13/pflag v1.1.0
	golang.org/x/arch v0.33.0
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
	golang.org/x/sys v0.50.0
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.7.0 // indirect
	go.uber.org/multierr v1.6.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
