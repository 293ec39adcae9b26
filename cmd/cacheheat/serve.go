package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/web"
)

func init() {
	register(command{name: "serve", summary: "browse the recordings in a directory, with reports and diffs, in a web browser", run: runServe})
	web.EChartsJS = heatmap.EChartsJS()
}

// webRenderers connect the web pages to the report packages: the same
// HTML as 'cacheheat report' and 'cacheheat diff -o'.
func webRenderers() web.Renderers {
	return web.Renderers{
		Report: func(w io.Writer, rec *profile.Recording) error { return heatmap.Render(w, rec, heatmap.Options{}) },
		Diff: func(w io.Writer, base, newRec *profile.Recording) error {
			res := compare.Compare(base, newRec, compare.DefaultOptions())
			return heatmap.WriteDiff(w, base, newRec, &res)
		},
		Findings: func(rec *profile.Recording) []web.Finding {
			res := attribution.Analyze(rec)
			out := make([]web.Finding, 0, len(res.Findings))
			for _, f := range res.Findings {
				var ev []string
				for _, e := range f.Evidence {
					ev = append(ev, fmt.Sprintf("%s %.4g%s %s %.4g", e.Metric, e.Value, e.Unit, e.Op, e.Threshold))
				}
				out = append(out, web.Finding{Rule: f.Rule, Severity: f.Severity, Title: f.Title, Evidence: strings.Join(ev, ", ")})
			}
			return out
		},
	}
}

func runServe(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "[--dir DIR] [--addr HOST:PORT]", `  cacheheat serve                          recordings in ., at http://127.0.0.1:8080/
  cacheheat serve --dir runs --addr 127.0.0.1:9000
`, stdout)
	dir := fs.String("dir", ".", "directory whose recordings are served (and nothing outside it)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; a non-loopback address exposes the recordings to the network")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("serve: unexpected arguments %q; run 'cacheheat serve --help'", fs.Args())
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return usageErrorf("serve: --dir %s is not a directory", *dir)
	}
	s, err := web.NewServer(*dir, webRenderers())
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	defer s.Close()
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving the recordings in %s at http://%s/ (Ctrl-C to stop)\n", *dir, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return serveUntil(ctx, ln, web.CheckHost(s, *addr, ln.Addr()))
}

// listen opens addr, warning on stderr when it is reachable from other
// hosts: the pages show process names, command lines and symbols.
func listen(addr string) (net.Listener, error) {
	if !web.IsLoopback(addr) {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s is not a loopback address: anyone who can reach this host can read these recordings (process names, command lines, symbols)\n", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErrorf("listening on %s: %v (pick another address with a free port)", addr, err)
	}
	return ln, nil
}

// Timeouts of the servers: a client that sends its request slowly, reads
// its response slowly or keeps an idle connection open does not hold a
// goroutine and a socket for ever. The live view's event stream is long by
// design, so its server has no write timeout (web.Live ends a stream whose
// update cannot be written within its own WriteTimeout instead).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 5 * time.Minute // a large report takes a while to render
	idleTimeout       = 2 * time.Minute
)

// newServeServer is serve's HTTP server.
func newServeServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
}

// serveUntil serves h on ln until ctx ends.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := newServeServer(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// liveView is record --live: the live page's server beside a recording.
type liveView struct {
	live *web.Live
	srv  *http.Server
}

// liveLinger is how long a finished recording keeps its live page up for
// viewers to load the final report.
const liveLinger = 15 * time.Second

// startLive serves the live view of a recording; the recorder gives it the
// header (OnHeader) and each window.
func startLive(addr string) (*liveView, error) {
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	lv := &liveView{
		live: web.NewLive(web.LiveOptions{Renderers: webRenderers()}),
	}
	lv.srv = &http.Server{Handler: web.CheckHost(lv.live, addr, ln.Addr()), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
	go lv.srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "cacheheat: live view at http://%s/\n", ln.Addr())
	return lv, nil
}

// liveStatus is the status line's numbers as the live page shows them.
type liveStatus struct {
	ElapsedS float64 `json:"elapsed_s"`
	Windows  int     `json:"windows"`
	Samples  uint64  `json:"samples"`
	Drops    uint64  `json:"drops"`
}

// publish is the recorder's OnWindow: it never waits for a viewer.
func (lv *liveView) publish(w *profile.Window, s collector.Status) {
	lv.live.Publish(w, liveStatus{ElapsedS: s.Elapsed.Seconds(), Windows: s.Windows, Samples: s.Samples, Drops: s.Drops})
}

// finish shows the final report (or the error) to the viewers, waits a
// little for them to load it, and stops the server.
func (lv *liveView) finish(output string, runErr error) {
	var rec *profile.Recording
	if runErr == nil {
		rec, runErr = profile.ReadFile(output)
	}
	lv.live.Finish(rec, runErr)
	ctx, cancel := context.WithTimeout(context.Background(), liveLinger)
	defer cancel()
	lv.live.Linger(ctx)
	sctx, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := lv.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(os.Stderr, "cacheheat: stopping the live view: %v\n", err)
	}
}
