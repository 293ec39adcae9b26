package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// LiveOptions tune a Live view; the zero value is usable.
type LiveOptions struct {
	// Renderers render the findings while recording and the final report.
	Renderers Renderers
	// AnalyzeEvery is how many windows pass between two runs of the
	// findings analysis (default 3): it reads every window so far, so it
	// does not run on each one.
	AnalyzeEvery int
	// ClientQueue is how many updates wait for a slow client before newer
	// ones are dropped for it (default 4).
	ClientQueue int
	// MaxCells bounds each heatmap's cells (default: the report's).
	MaxCells int
	// WriteTimeout ends a client's stream when one update cannot be
	// written for this long (default 10 s), so a stuck client does not
	// hold a goroutine and a socket for the rest of the recording.
	WriteTimeout time.Duration
}

// Live is the live view of a recording in progress. The recorder hands it
// the header (SetHeader) and each window as it closes (Publish), in
// memory; Publish only appends the window and wakes a builder goroutine,
// which turns the windows so far into the report's heatmaps (with the
// report's own code, heatmap.BuildCharts) and hands the update to each
// client's queue without waiting. The page is the report's heatmap
// sections and script (heatmap.WriteLivePage), redrawn with each update. A client whose queue is full loses that update (counted and
// shown to it); since every update carries the whole state so far, the
// next one it receives is complete again. The recording's own data path
// never waits for a client.
//
// Live implements http.Handler:
//
//	GET /        the live page
//	GET /events  the update stream (text/event-stream)
//	GET /report  the final report, once Finish was called
//
// After Finish the page says the recording ended and links to the
// report; the view keeps serving both until the caller stops its server.
type Live struct {
	opts    LiveOptions
	handler http.Handler
	wake    chan struct{}
	done    chan struct{} // closed by Finish
	stopped chan struct{} // closed when the builder has exited
	ended   chan struct{} // closed after the builder's last update: streams end

	mu        sync.Mutex
	header    *profile.Header
	windows   []profile.Window
	status    any
	published uint64 // windows given to Publish
	clients   map[*liveClient]struct{}
	latest    []byte // the last update, for clients that connect late
	report    []byte // the final report, after Finish
	finalErr  string
	finished  bool
	totalDrop atomic.Uint64
}

type liveClient struct {
	ch      chan []byte
	dropped atomic.Uint64
}

// NewLive starts a live view's builder goroutine; Finish stops it.
func NewLive(opts LiveOptions) *Live {
	if opts.AnalyzeEvery <= 0 {
		opts.AnalyzeEvery = 3
	}
	if opts.ClientQueue <= 0 {
		opts.ClientQueue = 4
	}
	if opts.MaxCells <= 0 {
		opts.MaxCells = heatmap.DefaultMaxCells
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	l := &Live{
		opts:    opts,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		ended:   make(chan struct{}),
		clients: map[*liveClient]struct{}{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", l.servePage)
	mux.HandleFunc("/events", l.serveEvents)
	mux.HandleFunc("/report", l.serveReport)
	l.handler = secure(mux)
	go l.build()
	return l
}

func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.handler.ServeHTTP(w, r) }

// SetHeader gives the view the recording's header (host topology, events),
// which the heatmaps' rows come from. Windows published before it are kept
// and shown once it arrives.
func (l *Live) SetHeader(h profile.Header) {
	l.mu.Lock()
	l.header = &h
	l.mu.Unlock()
	l.poke()
}

// Publish adds a closed window and the recorder's status (any value that
// encodes to a JSON object of numbers and strings; shown as the status
// line). It never blocks on clients or on the builder. The window is kept,
// so the caller must not modify it afterwards; the slices it points to
// are only read.
func (l *Live) Publish(w *profile.Window, status any) {
	l.mu.Lock()
	if !l.finished {
		win := *w
		win.Index = len(l.windows)
		l.windows = append(l.windows, win)
		l.status = status
		l.published++
	}
	l.mu.Unlock()
	l.poke()
}

func (l *Live) poke() {
	select {
	case l.wake <- struct{}{}:
	default: // the builder is already due to run and will see this window
	}
}

// Dropped is the number of updates dropped for slow clients so far.
func (l *Live) Dropped() uint64 { return l.totalDrop.Load() }

// Finish ends the live view: it renders the final report of the finished
// recording r holds (the file, read as report reads it), or shows failure
// when err is not nil, tells every client to load it, and stops the
// builder.
func (l *Live) Finish(r io.Reader, err error) {
	var report []byte
	var msg string
	switch {
	case err != nil:
		msg = err.Error()
	case r == nil:
		msg = "the recording produced no file"
	case l.opts.Renderers.Report == nil:
		msg = "this build has no report renderer"
	default:
		var buf bytes.Buffer
		if rerr := l.opts.Renderers.Report(&buf, r); rerr != nil {
			msg = fmt.Sprintf("rendering the final report: %v", rerr)
		} else {
			report = buf.Bytes()
		}
	}
	l.mu.Lock()
	if l.finished {
		l.mu.Unlock()
		return
	}
	l.finished = true
	l.report, l.finalErr = report, msg
	l.mu.Unlock()
	close(l.done)
	<-l.stopped
	close(l.ended)
}

// update is one event on the stream: the whole state so far.
type update struct {
	Windows int             `json:"windows"`
	StartNS int64           `json:"start_ns"`
	EndNS   int64           `json:"end_ns"`
	Status  any             `json:"status,omitempty"`
	Charts  *heatmap.Charts `json:"charts,omitempty"`
	// Banner says the recording is simulated or synthetic, as the
	// report's banner does.
	Banner   string                `json:"banner,omitempty"`
	Findings []attribution.Finding `json:"findings"`
	// Evidence is each finding's evidence as the CLI and the report
	// write it (attribution.Evidence.String), so the page formats no
	// number itself.
	Evidence  [][]string    `json:"evidence"`
	Analyzed  int           `json:"findings_windows"` // windows the findings cover
	Drops     profile.Drops `json:"drops"`
	HeaderSet bool          `json:"header"`
}

// build runs off the recorder's goroutine: it turns the windows so far into
// an update whenever Publish wakes it, coalescing windows that arrive while
// it works.
func (l *Live) build() {
	defer close(l.stopped)
	stacks := map[uint64]profile.Stack{}
	seen := 0
	// The model grows window by window once the header is known; each
	// update renders it as it stands.
	var mb *model.Builder
	added := 0
	var findings []attribution.Finding
	analyzed := 0
	lastN, lastHeader := -1, false
	for final := false; !final; {
		select {
		case <-l.wake:
		case <-l.done:
			// One last update when a window arrived just before the end.
			final = true
			select {
			case <-l.wake:
			default:
				return
			}
		}
		l.mu.Lock()
		wins := l.windows[:len(l.windows):len(l.windows)]
		status := l.status
		var h profile.Header
		hasHeader := l.header != nil
		if hasHeader {
			h = *l.header
		}
		l.mu.Unlock()
		if len(wins) == lastN && hasHeader == lastHeader {
			continue // woken twice for the same state (SetHeader, coalescing)
		}
		lastN, lastHeader = len(wins), hasHeader
		for _, w := range wins[seen:] {
			for _, s := range w.NewStacks {
				stacks[s.ID] = s
			}
		}
		seen = len(wins)
		u := update{Windows: len(wins), Status: status, HeaderSet: hasHeader, Findings: []attribution.Finding{}, Evidence: [][]string{}}
		for _, w := range wins {
			u.Drops.Add(w.Drops)
		}
		if len(wins) > 0 {
			u.StartNS, u.EndNS = wins[0].StartNS, wins[len(wins)-1].EndNS
		}
		if hasHeader {
			if mb == nil {
				mb = model.NewBuilder(h, stacks)
			}
			for i := added; i < len(wins); i++ {
				mb.Add(&wins[i])
			}
			added = len(wins)
			m := mb.Model(nil, false, "")
			c := heatmap.BuildCharts(m, l.opts.MaxCells, nil)
			u.Charts = &c
			u.Banner = heatmap.Banner(&h)
			if an := l.opts.Renderers.Findings; an != nil && len(wins) > 0 && (analyzed == 0 || len(wins)-analyzed >= l.opts.AnalyzeEvery) {
				findings = an(m).Findings
				analyzed = len(wins)
			}
		}
		if findings != nil {
			u.Findings, u.Evidence = findings, evidenceText(findings)
		}
		u.Analyzed = analyzed
		b, err := json.Marshal(u)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": fmt.Sprintf("encoding update: %v", err)})
		}
		l.broadcast(b)
	}
}

// broadcast queues b for every client without waiting: a full queue drops
// b for that client and counts it.
func (l *Live) broadcast(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latest = b
	for c := range l.clients {
		select {
		case c.ch <- b:
		default:
			c.dropped.Add(1)
			l.totalDrop.Add(1)
		}
	}
}

func (l *Live) subscribe() *liveClient {
	c := &liveClient{ch: make(chan []byte, l.opts.ClientQueue)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.latest != nil {
		c.ch <- l.latest
	}
	l.clients[c] = struct{}{}
	return c
}

func (l *Live) unsubscribe(c *liveClient) {
	l.mu.Lock()
	delete(l.clients, c)
	l.mu.Unlock()
}

func (l *Live) serveEvents(w http.ResponseWriter, r *http.Request) {
	c := l.subscribe()
	defer l.unsubscribe(c)
	l.serveEventsFor(w, r, c)
}

// serveEventsFor streams c's queue to w until the recording ends, the
// client goes away, or a write stalls for WriteTimeout.
func (l *Live) serveEventsFor(w http.ResponseWriter, r *http.Request, c *liveClient) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(event string, data []byte) bool {
		// Not every ResponseWriter supports deadlines (tests' recorders);
		// without one a stuck client only costs its own goroutine.
		_ = rc.SetWriteDeadline(time.Now().Add(l.opts.WriteTimeout))
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "event: %s\ndata: ", event)
		buf.Write(data) // JSON or a number: one line, no raw newlines
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var shownDropped uint64
	send := func(b []byte) bool {
		if d := c.dropped.Load(); d != shownDropped {
			shownDropped = d
			if !write("dropped", []byte(fmt.Sprint(d))) {
				return false
			}
		}
		return write("window", b)
	}
	if !write("hello", []byte(`{}`)) {
		return
	}
	for {
		select {
		case b := <-c.ch:
			if !send(b) {
				return
			}
		case <-l.ended:
			// The end is not an update that can be dropped: every client
			// still connected hears it, after the last state it can take.
			var lastB []byte
			for drained := false; !drained; {
				select {
				case b := <-c.ch:
					lastB = b
				default:
					drained = true
				}
			}
			if lastB != nil && !send(lastB) {
				return
			}
			l.mu.Lock()
			end, _ := json.Marshal(map[string]any{"report": l.report != nil, "error": l.finalErr, "dropped": c.dropped.Load()})
			l.mu.Unlock()
			write("end", end)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (l *Live) serveReport(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	report, finished, msg := l.report, l.finished, l.finalErr
	l.mu.Unlock()
	switch {
	case !finished:
		http.Error(w, "the recording is still running: the report is written when it ends", http.StatusNotFound)
	case report == nil:
		http.Error(w, "no final report: "+msg, http.StatusNotFound)
	default:
		writeHTML(w, report)
	}
}

func (l *Live) servePage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := heatmap.WriteLivePage(&buf); err != nil {
		http.Error(w, fmt.Sprintf("rendering the live page: %v", err), http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// evidenceText writes each finding's evidence lines.
func evidenceText(fs []attribution.Finding) [][]string {
	out := make([][]string, len(fs))
	for i, f := range fs {
		out[i] = []string{}
		for _, e := range f.Evidence {
			out[i] = append(out[i], e.String())
		}
	}
	return out
}
