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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
	"github.com/cacheheat/cacheheat/web"
)

func init() {
	register(command{name: "serve", summary: "browse the recordings in a directory, with reports and diffs, in a web browser", run: runServe})
}

// webRenderers connect the web pages to the report packages: the same
// HTML as 'cacheheat report' and 'cacheheat diff -o', read the same way
// (streamed, no window kept).
func webRenderers() web.Renderers {
	// One line resolver for the server's life: each binary's debug
	// information is read once.
	lines := symbolize.NewLines()
	return web.Renderers{
		Report: func(w io.Writer, r io.Reader) error {
			s, err := profile.NewStream(r)
			if err != nil {
				return err
			}
			var rb reportBuilder
			if err := readStream(s, rb.start); err != nil {
				return err
			}
			// A saved probe of the recording's host, if any (one that
			// cannot be read is left out: the page is still served).
			p, _ := loadProbe("", s.Header.Host.Hostname)
			return rb.render(w, heatmap.Options{Lines: lines, Probe: p})
		},
		Diff: func(w io.Writer, base, newRec io.ReadSeeker) error {
			opts := compare.DefaultOptions()
			var sides [2]diffSide
			for i, r := range []io.ReadSeeker{base, newRec} {
				side, err := readDiffStreams(rewound(r), opts.Warmup, true)
				if err != nil {
					return err
				}
				sides[i] = side
			}
			res := compare.CompareReduced(sides[0].reduced, sides[1].reduced, opts)
			return heatmap.WriteDiffModels(w, sides[0].model, sides[1].model, &res, sides[0].findings, sides[1].findings)
		},
		Analyze: func(r io.ReadSeeker) ([]attribution.Finding, error) {
			res, err := analyzeStream(rewound(r))
			if err != nil {
				return nil, err
			}
			return res.Findings, nil
		},
		Findings: attribution.Analyze,
	}
}

// rewound opens r from its start, each time it is called.
func rewound(r io.ReadSeeker) func() (*profile.Stream, error) {
	return func() (*profile.Stream, error) {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return profile.NewStream(r)
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
	// The renders' budget (web.DefaultMemoryBudget) and the page cache
	// keep serve under 1 GiB; the runtime's soft limit makes the
	// collector keep the heap there too, rather than let garbage grow
	// to twice the live data between collections.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
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
// It is one of the recorder's sinks: the header and windows come in
// memory; the final report is rendered from the file, when it is done.
type liveView struct {
	live   *web.Live
	srv    *http.Server
	addr   string
	output string
	target string
}

// startLive serves the live view of the recording being written to output.
func startLive(addr, output string) (*liveView, error) {
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	lv := &liveView{
		live:   web.NewLive(web.LiveOptions{Renderers: webRenderers()}),
		addr:   ln.Addr().String(),
		output: output,
	}
	lv.srv = &http.Server{Handler: web.CheckHost(lv.live, addr, ln.Addr()), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
	go lv.srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "cacheheat: live view at http://%s/\n", lv.addr)
	return lv, nil
}

// liveStatus is the status line's numbers as the live page shows them.
type liveStatus struct {
	Target   string  `json:"target"`
	Output   string  `json:"output"`
	ElapsedS float64 `json:"elapsed_s"`
	Windows  int     `json:"windows"`
	Samples  uint64  `json:"samples"`
	Drops    uint64  `json:"drops"`
}

// Header, Window and Close make the live view a collector.Sink; none
// waits for a viewer. They run on the recorder's goroutine, so target
// needs no lock.
func (lv *liveView) Header(h profile.Header) error {
	lv.target = h.Target.String()
	lv.live.SetHeader(h)
	return nil
}

func (lv *liveView) Window(w *profile.Window, _ *collector.WindowExtras, s collector.Status) error {
	lv.live.Publish(w, liveStatus{Target: lv.target, Output: lv.output, ElapsedS: s.Elapsed.Seconds(), Windows: s.Windows, Samples: s.Samples, Drops: s.Drops})
	return nil
}

// Close leaves the page up: finish shows the report once the file is
// complete.
func (lv *liveView) Close(*profile.Trailer) error { return nil }

// finish renders the final report from the finished file, as report
// does (or shows the error), and keeps the page up, linking to it, until
// ctx ends (Ctrl-C or --linger), then stops the server.
func (lv *liveView) finish(ctx context.Context, runErr error) {
	var r io.Reader
	if runErr == nil {
		f, err := os.Open(lv.output)
		if err != nil {
			runErr = err
		} else {
			defer f.Close()
			r = f
		}
	}
	lv.live.Finish(r, runErr)
	if runErr == nil {
		fmt.Fprintf(os.Stderr, "cacheheat: the report is at http://%s/report until the live view stops\n", lv.addr)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := lv.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(os.Stderr, "cacheheat: stopping the live view: %v\n", err)
	}
}
