package promexporter

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Handler serves /metrics: the exporter's metrics and the process's own
// (process_cpu_seconds_total, process_resident_memory_bytes, go_*), which
// the dashboard's self-cost panels use.
func (e *Exporter) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(e,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(&sharedGather{g: reg, ttl: scrapeShare}, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: MaxScrapesInFlight,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "cacheheat exporter: metrics at /metrics")
	})
	return mux
}

// MaxScrapesInFlight is how many /metrics requests are answered at once;
// more get 503 at once (Prometheus scrapes again at its next interval).
// Concurrent scrapes share one gathering (sharedGather), so what each
// costs is writing the page out.
const MaxScrapesInFlight = 64

// scrapeShare is how long one gathering of the metrics answers scrapes:
// shorter than any window (the counts change once a window), long enough
// that a burst of scrapes gathers once.
const scrapeShare = 250 * time.Millisecond

// sharedGather answers every Gather within ttl of the last with that
// one's result; a Gather that comes while one runs waits for it. The
// metric families are only read by the handlers that encode them.
type sharedGather struct {
	g   prometheus.Gatherer
	ttl time.Duration

	mu  sync.Mutex
	at  time.Time
	mfs []*dto.MetricFamily
	err error
}

func (s *sharedGather) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || time.Since(s.at) >= s.ttl {
		s.mfs, s.err = s.g.Gather()
		s.at = time.Now()
	}
	return s.mfs, s.err
}
