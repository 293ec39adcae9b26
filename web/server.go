package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"duration": func(s float64) string {
		return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
	},
}).ParseFS(templateFS, "templates/*.html"))

// ContentSecurityPolicy is sent with every response. Reports and the live
// page are self-contained pages with inline scripts and styles (the
// vendored ECharts is inlined), so inline code is allowed but nothing may
// be loaded from anywhere; connect-src 'self' lets the live page open its
// event stream.
const ContentSecurityPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// setSecurityHeaders sets the headers every response carries, errors
// included.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// secure wraps h so that every response carries the security headers and
// only GET and HEAD are served: the web UI is read-only.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: this server is read-only (GET and HEAD only)", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether addr (host:port) binds only loopback
// interfaces. An empty host binds every interface and is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Renderers are what the server and the live view need from the report
// packages. Each may be nil; the page that needs it then answers 501.
type Renderers struct {
	// Report writes the HTML report of the recording r holds (the same
	// HTML as 'cacheheat report'), reading it as a stream.
	Report func(w io.Writer, r io.Reader) error
	// Diff writes the HTML diff report of newRec against base; it may
	// read each from its start more than once.
	Diff func(w io.Writer, base, newRec io.ReadSeeker) error
	// Analyze returns the findings of the recording r holds, read as a
	// stream: the index's count.
	Analyze func(r io.ReadSeeker) ([]attribution.Finding, error)
	// Findings analyzes a model (attribution.Analyze): the live view
	// grows its model window by window and finds the root causes in it
	// every few windows, as the report and the CLI find them.
	Findings func(m *model.Model) attribution.Result
}

// Server browses the recordings in one directory. It implements
// http.Handler:
//
//	GET /                        index of recordings, with the diff form
//	GET /report?f=NAME           NAME's report
//	GET /diff?base=NAME&new=NAME the diff report of new against base
//
// NAME is a path relative to the directory.
type Server struct {
	dir     string // as given, for messages
	realDir string // dir with symlinks resolved
	root    *os.Root
	r       Renderers
	handler http.Handler

	mu    sync.Mutex
	cache map[string]cachedRow
	// pages bounds concurrent reads and renders and keeps rendered pages.
	pages *renderCache
}

// maxDepth bounds how deep the index looks below the directory.
const maxDepth = 4

type cachedRow struct {
	modTime time.Time
	size    int64
	row     IndexRow
}

// IndexRow is one recording in the index.
type IndexRow struct {
	Name      string // relative to the directory, slash-separated
	Target    string
	Host      string
	Start     time.Time
	DurationS float64
	Mode      string
	Windows   int
	Findings  int // -1 when no analyzer is configured
	State     string
	Err       string // why the file cannot be read; other fields are then empty
}

// NewServer serves the recordings in dir. Close releases the directory.
func NewServer(dir string, r Renderers) (*Server, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving recordings directory: %w", err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return nil, fmt.Errorf("resolving recordings directory: %w", err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("opening recordings directory: %w", err)
	}
	s := &Server{dir: dir, realDir: real, root: root, r: r, cache: map[string]cachedRow{}, pages: newRenderCache(0, defaultCacheBytes, DefaultMemoryBudget)}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.serveIndex)
	mux.HandleFunc("/report", s.serveReport)
	mux.HandleFunc("/diff", s.serveDiff)
	s.handler = secure(mux)
	return s, nil
}

// Close releases the directory handle.
func (s *Server) Close() error { return s.root.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Errors of name resolution; the handlers map them to status codes.
var (
	errBadName  = errors.New("bad recording name")
	errNotFound = errors.New("no such recording")
)

// resolve checks that name is a relative path naming a regular file inside
// the directory and returns its slash-separated clean form. Names with
// "..", absolute names and symlinks that lead out of the directory are
// refused; the actual open goes through os.Root as well, so a symlink
// swapped in after this check still cannot escape.
func (s *Server) resolve(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || len(name) > 4096 {
		return "", fmt.Errorf("%w %q: want a file name from the index", errBadName, name)
	}
	if filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || filepath.VolumeName(name) != "" {
		return "", fmt.Errorf("%w %q: absolute paths are not served", errBadName, name)
	}
	for _, elem := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if elem == ".." {
			return "", fmt.Errorf("%w %q: '..' is not allowed", errBadName, name)
		}
	}
	clean := filepath.Clean(filepath.FromSlash(name))
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%w %q: not inside the recordings directory", errBadName, name)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(s.realDir, clean))
	if err != nil {
		return "", fmt.Errorf("%w: %s", errNotFound, filepath.ToSlash(clean))
	}
	if !within(s.realDir, real) {
		// Said as "not found" so that the server does not reveal what
		// lies outside its directory.
		return "", fmt.Errorf("%w: %s", errNotFound, filepath.ToSlash(clean))
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s", errNotFound, filepath.ToSlash(clean))
	}
	return filepath.ToSlash(clean), nil
}

// within reports whether path lies inside dir (both absolute and clean).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// open opens a resolved name through the os.Root.
func (s *Server) open(name string) (*os.File, error) {
	f, err := s.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errNotFound, name)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", errNotFound, name)
	}
	return f, nil
}

// source is a recording to serve: resolved and opened, read on demand.
type source struct {
	name string
	f    *os.File
	key  string // fileKey
	size int64
}

// openSource resolves and opens one recording.
func (s *Server) openSource(name string) (*source, error) {
	clean, err := s.resolve(name)
	if err != nil {
		return nil, err
	}
	f, err := s.open(clean)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s", errNotFound, clean)
	}
	return &source{name: clean, f: f, key: fileKey(clean, fi), size: fi.Size()}, nil
}

// errorf names the recording in a read error.
func (src *source) errorf(err error) error { return fmt.Errorf("%s: %w", src.name, err) }

// httpError answers err with the status its kind calls for.
func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		code = http.StatusServiceUnavailable
	case errors.Is(err, errBadName):
		code = http.StatusBadRequest
	case errors.Is(err, errNotFound):
		code = http.StatusNotFound
	case errors.Is(err, profile.ErrFormat):
		code = http.StatusUnprocessableEntity
	}
	http.Error(w, err.Error(), code)
}

// Rows lists the recordings in the directory, newest first.
func (s *Server) Rows(ctx context.Context) []IndexRow {
	var rows []IndexRow
	seen := map[string]bool{}
	_ = filepath.WalkDir(s.realDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable subdirectory: skip it, list the rest
		}
		rel, rerr := filepath.Rel(s.realDir, path)
		if rerr != nil {
			return nil
		}
		if d.IsDir() {
			if rel != "." && (strings.Count(rel, string(filepath.Separator)) >= maxDepth-1 || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		name := filepath.ToSlash(rel)
		if _, err := s.resolve(name); err != nil {
			return nil // symlink out of the directory, or not a regular file
		}
		if row, ok := s.row(ctx, name); ok && !seen[name] {
			seen[name] = true
			rows = append(rows, row)
		}
		return nil
	})
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].Start.Equal(rows[j].Start) {
			return rows[i].Start.After(rows[j].Start)
		}
		return rows[i].Name < rows[j].Name
	})
	return rows
}

// row reads one recording's index row, from the cache when the file's
// size and modification time are unchanged. Files that do not start with
// the recording magic are not recordings and are left out.
func (s *Server) row(ctx context.Context, name string) (IndexRow, bool) {
	f, err := s.open(name)
	if err != nil {
		return IndexRow{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return IndexRow{}, false
	}
	s.mu.Lock()
	c, ok := s.cache[name]
	s.mu.Unlock()
	if ok && c.size == fi.Size() && c.modTime.Equal(fi.ModTime()) {
		return c.row, true
	}
	var magic [8]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != "CHEATREC" {
		return IndexRow{}, false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return IndexRow{}, false
	}
	row := IndexRow{Name: name, Findings: -1}
	if berr := s.pages.limited(ctx, renderCost(fi.Size()), func() { err = s.fillRow(&row, f) }); berr != nil {
		// Busy, or the client left: not cached, so a later index reads it.
		row.Err, row.State = berr.Error(), "not read (server busy)"
		return row, true
	}
	if err != nil {
		row = IndexRow{Name: name, Findings: -1, Err: err.Error(), State: "unreadable"}
	}
	s.mu.Lock()
	s.cache[name] = cachedRow{modTime: fi.ModTime(), size: fi.Size(), row: row}
	s.mu.Unlock()
	return row, true
}

// fillRow reads a recording's row as a stream, keeping no window, and
// its findings in a second pass.
func (s *Server) fillRow(row *IndexRow, f *os.File) error {
	st, err := profile.NewStream(f)
	if err != nil {
		return err
	}
	h := st.Header
	row.Target = h.Target.String()
	row.Host = h.Host.Hostname
	row.Start = h.StartTime
	row.Mode = h.Host.Mode
	var first, last int64
	for w := range st.Windows() {
		if row.Windows == 0 {
			first = w.StartNS
		}
		last = w.EndNS
		row.Windows++
	}
	if err := st.Err(); err != nil {
		return err
	}
	if row.Windows > 0 {
		row.DurationS = float64(last-first) / 1e9
	}
	switch {
	case st.Trailer != nil:
		row.State = st.Trailer.EndReason
	case strings.HasSuffix(row.Name, profile.PartialSuffix):
		row.State = "in progress or unfinished"
	default:
		row.State = "truncated"
	}
	if s.r.Analyze != nil {
		fs, err := s.r.Analyze(f)
		if err != nil {
			return err
		}
		row.Findings = len(fs)
	}
	return nil
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	data := struct {
		Dir  string
		Rows []IndexRow
	}{s.dir, s.Rows(r.Context())}
	render(w, "index.html", data)
}

// render executes a template into a buffer first, so that a template
// error becomes a 500 instead of half a page.
func render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, fmt.Sprintf("rendering %s: %v", name, err), http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// errRender marks a renderer's failure (500), as opposed to a recording
// that cannot be read (422).
var errRender = errors.New("rendering")

// renderError is a renderer's error: a recording that cannot be read
// keeps its ErrFormat (422), anything else is a failure to render.
func renderError(page string, err error) error {
	if errors.Is(err, profile.ErrFormat) {
		return err
	}
	return fmt.Errorf("%w %s: %w", errRender, page, err)
}

func (s *Server) serveReport(w http.ResponseWriter, r *http.Request) {
	src, err := s.openSource(r.URL.Query().Get("f"))
	if err != nil {
		httpError(w, err)
		return
	}
	defer src.f.Close()
	if s.r.Report == nil {
		http.Error(w, "this build has no report renderer", http.StatusNotImplemented)
		return
	}
	body, err := s.pages.get(r.Context(), "report\x00"+src.key, renderCost(src.size), func() ([]byte, error) {
		var buf bytes.Buffer
		if err := s.r.Report(&buf, src.f); err != nil {
			return nil, renderError("report", src.errorf(err))
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		httpError(w, err)
		return
	}
	writeHTML(w, body)
}

// writeHTML sends a page: every HTML response of the server and the live
// view goes out here.
func writeHTML(w http.ResponseWriter, page []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
}

func (s *Server) serveDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	base, err := s.openSource(q.Get("base"))
	if err != nil {
		httpError(w, fmt.Errorf("base: %w", err))
		return
	}
	defer base.f.Close()
	newSrc, err := s.openSource(q.Get("new"))
	if err != nil {
		httpError(w, fmt.Errorf("new: %w", err))
		return
	}
	defer newSrc.f.Close()
	if s.r.Diff == nil {
		http.Error(w, "this build has no diff renderer", http.StatusNotImplemented)
		return
	}
	body, err := s.pages.get(r.Context(), "diff\x00"+base.key+"\x00"+newSrc.key, renderCost(base.size, newSrc.size), func() ([]byte, error) {
		var buf bytes.Buffer
		if err := s.r.Diff(&buf, base.f, newSrc.f); err != nil {
			return nil, renderError("diff", fmt.Errorf("%s against %s: %w", newSrc.name, base.name, err))
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		httpError(w, err)
		return
	}
	writeHTML(w, body)
}
