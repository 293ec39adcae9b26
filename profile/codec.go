package profile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cacheheat/cacheheat/internal/outfile"
)

// File layout (docs/FORMAT.md):
//
//	magic    8 bytes  "CHEATREC"
//	major    uint16 little-endian
//	minor    uint16 little-endian
//	records  until EOF, each:
//	    kind     1 byte   'H' header, 'W' window, 'T' trailer
//	    length   uint32 little-endian, payload bytes
//	    crc      uint32 little-endian, CRC-32C of kind byte + payload
//	    payload  v1: a JSON object; v2: a zstd frame (v2.go)
//
// Every record is self-delimiting and checksummed, so a file cut anywhere
// reads back up to its last complete record.
const (
	magic         = "CHEATREC"
	recHeader     = 'H'
	recWindow     = 'W'
	recTrailer    = 'T'
	recHeadLen    = 9
	maxPayloadLen = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrFormat is wrapped by every error that means "this is not a readable
// recording": garbage, an unknown major version, a corrupt header. Callers
// test it with errors.Is to pick exit code 4.
var ErrFormat = errors.New("not a readable cacheheat recording")

type formatError struct{ msg string }

func (e *formatError) Error() string { return e.msg }
func (e *formatError) Unwrap() error { return ErrFormat }

func formatErr(format string, args ...any) error {
	return &formatError{msg: fmt.Sprintf(format, args...)}
}

// PartialSuffix ends a recording's temporary name while it is being
// written (FILE.<random>.partial, beside FILE; see PartialFiles);
// Writer.Close renames the file to its final name.
const PartialSuffix = ".partial"

// PartialFiles lists the unfinished recordings of path: the temporary
// files a recorder writing path left or is writing.
func PartialFiles(path string) []string {
	m, _ := filepath.Glob(globEscape(path) + ".*" + PartialSuffix)
	return m
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(s)
}

// Writer streams a recording to disk. Each window is written with one
// write(2) as it closes, so a recorder killed at any point leaves a file
// readable up to its last complete window.
type Writer struct {
	f       *outfile.File
	major   int
	windows int
	seen    map[uint64]bool // v1: stacks written
	enc     *encoder2       // v2: interning tables
	buf     []byte
}

// Create starts a recording at path in the current format. Until Close,
// the data lives in a temporary file beside it (internal/outfile: never a
// planted symlink, and an existing recording is kept as path.old at the
// end).
func Create(path string, h Header) (*Writer, error) {
	return CreateVersion(path, h, FormatMajor)
}

// CreateVersion starts a recording in format major version 1 or 2. Only
// benchmarks and tests write version 1, to compare and to keep fixtures.
func CreateVersion(path string, h Header, major int) (*Writer, error) {
	if major != 1 && major != 2 {
		return nil, fmt.Errorf("cannot write format version %d", major)
	}
	f, err := outfile.Create(path, PartialSuffix)
	if err != nil {
		return nil, fmt.Errorf("creating recording: %w", err)
	}
	w := &Writer{f: f, major: major, seen: map[uint64]bool{}, enc: newEncoder2()}
	minor := formatMinor[major]
	h.FormatVersion = fmt.Sprintf("%d.%d", major, minor)
	pre := make([]byte, 0, 12)
	pre = append(pre, magic...)
	pre = binary.LittleEndian.AppendUint16(pre, uint16(major))
	pre = binary.LittleEndian.AppendUint16(pre, uint16(minor))
	// A disk full already: nothing to keep, so no empty .partial stays.
	if _, err := f.Write(pre); err != nil {
		f.Discard()
		return nil, fmt.Errorf("%w: writing the recording's preamble to %s: %w", outfile.ErrWrite, f.TempPath(), err)
	}
	if err := w.writeJSON(recHeader, h); err != nil {
		f.Discard()
		return nil, fmt.Errorf("%w: writing the recording's header to %s: %w", outfile.ErrWrite, f.TempPath(), err)
	}
	return w, nil
}

// FormatVersion is the "MAJOR.MINOR" this build writes in a header.
func FormatVersion() string { return fmt.Sprintf("%d.%d", FormatMajor, FormatMinor) }

// Path is the final name of the recording.
func (w *Writer) Path() string { return w.f.Path() }

// TempPath is where the recording is until Close.
func (w *Writer) TempPath() string { return w.f.TempPath() }

// Windows is the number of windows written so far.
func (w *Writer) Windows() int { return w.windows }

// WriteWindow appends a window. Stacks referenced by its samples must be
// listed in win.NewStacks unless an earlier window defined them; stacks
// already written are dropped from NewStacks.
func (w *Writer) WriteWindow(win *Window) error {
	win.Index = w.windows
	if w.major == 2 {
		payload, err := w.enc.window(win)
		if err != nil {
			return err
		}
		if err := w.writeRecord(recWindow, payload); err != nil {
			return err
		}
		w.windows++
		return nil
	}
	kept := win.NewStacks[:0:0]
	for _, s := range win.NewStacks {
		if !w.seen[s.ID] {
			w.seen[s.ID] = true
			kept = append(kept, s)
		}
	}
	win.NewStacks = kept
	if err := w.writeJSON(recWindow, win); err != nil {
		return err
	}
	w.windows++
	return nil
}

// Close writes the trailer, syncs the file and renames it to its final name.
func (w *Writer) Close(t Trailer) error {
	t.Windows = w.windows
	if err := w.writeJSON(recTrailer, t); err != nil {
		w.f.Close()
		return err
	}
	return w.finish()
}

// Abort ends the recording without a trailer (readers warn that it is
// truncated) and still moves it to its final name: the path for a second
// Ctrl-C, which must exit at once but leave a readable file.
func (w *Writer) Abort() error { return w.finish() }

func (w *Writer) finish() error {
	if err := w.f.Commit(); err != nil {
		return fmt.Errorf("finishing recording: %w", err)
	}
	return nil
}

// writeJSON writes a header, a trailer or (in v1) a window as JSON; v2
// compresses it.
func (w *Writer) writeJSON(kind byte, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding record: %w", err)
	}
	if w.major == 2 {
		payload = compress(payload)
	}
	return w.writeRecord(kind, payload)
}

func (w *Writer) writeRecord(kind byte, payload []byte) error {
	if len(payload) > maxPayloadLen {
		return fmt.Errorf("record of %d bytes exceeds the %d byte limit", len(payload), maxPayloadLen)
	}
	b := w.buf[:0]
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum([]byte{kind}, castagnoli), castagnoli, payload)
	b = binary.LittleEndian.AppendUint32(b, crc)
	b = append(b, payload...)
	w.buf = b
	// One write per record: a kill between two writes never leaves half a
	// record followed by a valid one.
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("%w: writing record: %w", outfile.ErrWrite, err)
	}
	return nil
}

// Decoder reads a recording record by record.
type Decoder struct {
	r       *bufio.Reader
	buf     []byte
	pending []rawRecord
	major   int
	minor   int     // v2: the window layout (dec2.minor)
	tables  tables2 // v2: strings, lists, frames and stacks so far
	Header  Header
	windows int
	done    bool
	// compressed and inflated count a v2 recording's record bytes as
	// stored and as decompressed, for its decompression budget.
	compressed, inflated int64
	// Truncated and Warning are set when the stream ends before a trailer.
	Truncated bool
	Warning   string
}

// NewDecoder reads the preamble and header. An error wraps ErrFormat when
// the stream is not a recording this version can read.
func NewDecoder(r io.Reader) (*Decoder, error) {
	d := &Decoder{r: bufio.NewReaderSize(r, 1<<16)}
	pre := make([]byte, 12)
	if n, err := io.ReadFull(d.r, pre); err != nil {
		if n == 0 {
			return nil, formatErr("empty file: not a cacheheat recording")
		}
		return nil, formatErr("file too short (%d bytes): not a cacheheat recording", n)
	}
	if string(pre[:8]) != magic {
		return nil, formatErr("bad magic %q: not a cacheheat recording (was it written by 'cacheheat record'?)", pre[:8])
	}
	major := binary.LittleEndian.Uint16(pre[8:])
	minor := binary.LittleEndian.Uint16(pre[10:])
	if _, ok := formatMinor[int(major)]; !ok {
		return nil, formatErr("recording format version %d.%d is not supported by this cacheheat (reads major versions 1 and %d): use a matching cacheheat release", major, minor, FormatMajor)
	}
	d.major, d.minor = int(major), int(minor)
	kind, payload, err := d.readRecord()
	if err != nil {
		return nil, formatErr("reading header: %v", err)
	}
	if kind != recHeader {
		return nil, formatErr("first record is %q, want a header", kind)
	}
	if d.major == 2 {
		if payload, err = d.inflate(payload); err != nil {
			return nil, formatErr("decoding header: %v", err)
		}
	}
	if err := json.Unmarshal(payload, &d.Header); err != nil {
		return nil, formatErr("decoding header: %v", err)
	}
	if err := d.Header.check(d.major); err != nil {
		return nil, formatErr("invalid header: %v", err)
	}
	return d, nil
}

// Next returns the next window, or the trailer at the end. Both are nil
// with io.EOF when the stream ends; a stream that ends before its trailer
// sets Truncated and Warning instead of failing.
func (d *Decoder) Next() (*Window, *Trailer, error) {
	if d.done {
		return nil, nil, io.EOF
	}
	if len(d.pending) == 0 {
		d.fill()
	}
	r := d.pending[0]
	d.pending = d.pending[1:]
	if r.err != nil {
		d.done = true
		d.Truncated = true
		if errors.Is(r.err, io.EOF) {
			d.Warning = fmt.Sprintf("recording ends after %d complete windows without a trailer: the recorder did not finish (killed or crashed)", d.windows)
		} else {
			d.Warning = fmt.Sprintf("recording is damaged after %d complete windows (%v): read up to there", d.windows, r.err)
		}
		return nil, nil, io.EOF
	}
	if errors.Is(r.decodeErr, ErrInflate) {
		// Not damage to read up to: a file built to exhaust the reader.
		d.done = true
		return nil, nil, fmt.Errorf("window %d: %w", d.windows, r.decodeErr)
	}
	switch r.kind {
	case recWindow:
		if r.decodeErr != nil {
			d.done, d.Truncated = true, true
			d.Warning = fmt.Sprintf("window %d cannot be decoded (%v): read %d complete windows", d.windows, r.decodeErr, d.windows)
			return nil, nil, io.EOF
		}
		d.windows++
		return r.window, nil, nil
	case recTrailer:
		var t Trailer
		d.done = true
		payload, err := r.payload, error(nil)
		if d.major == 2 {
			payload, err = d.inflate(payload)
			if errors.Is(err, ErrInflate) {
				return nil, nil, fmt.Errorf("trailer: %w", err)
			}
		}
		if err == nil {
			err = json.Unmarshal(payload, &t)
		}
		if err != nil {
			d.Truncated = true
			d.Warning = fmt.Sprintf("trailer cannot be decoded (%v): read %d complete windows", err, d.windows)
			return nil, nil, io.EOF
		}
		// A trailer ends a recording; anything after it (two files
		// concatenated, a damaged copy) is reported, never read silently.
		if n, _ := io.Copy(io.Discard, d.r); n > 0 {
			d.Warning = fmt.Sprintf("%d bytes after the trailer were ignored (the file goes on after its end: two recordings concatenated, or damaged)", n)
		}
		return nil, &t, nil
	default:
		d.done, d.Truncated = true, true
		d.Warning = fmt.Sprintf("unknown record kind %q after %d windows: read up to there", r.kind, d.windows)
		return nil, nil, io.EOF
	}
}

// decodeBatch is how many records the decoder reads ahead. Decoding is
// what reading a recording costs, so windows are decoded on every CPU at
// once; the batch bounds the memory read ahead, and so does
// decodeBatchInflate: a batch's records may inflate to at most that much
// together (inflateLimit each).
const (
	decodeBatch        = 64
	decodeBatchInflate = 256 << 20
)

// inflate decompresses one v2 record within the recording's budget.
func (d *Decoder) inflate(payload []byte) ([]byte, error) {
	d.compressed += int64(len(payload))
	out, err := decompress(payload, inflateLimit(len(payload)))
	if err != nil {
		return nil, err
	}
	return out, d.account(len(out))
}

// account adds n inflated bytes to the recording's total, an error
// wrapping ErrInflate once the total passes the budget.
func (d *Decoder) account(n int) error {
	d.inflated += int64(n)
	if budget := inflateFloor + inflateRatio*d.compressed; d.inflated > budget {
		return fmt.Errorf("%w: %d MB decompressed from %d MB of records, past %d MB (%dx plus %d MB; recordings compress about 1-4x): a zstd bomb or a damaged file",
			ErrInflate, d.inflated>>20, d.compressed>>20, budget>>20, inflateRatio, inflateFloor>>20)
	}
	return nil
}

// rawRecord is a record read ahead, with its window decoded.
type rawRecord struct {
	kind      byte
	payload   []byte
	err       error // reading the record failed: the stream ends here
	window    *Window
	decodeErr error
	tables    tables2 // v2: the tables as of this window's definitions
	budget    int
}

// fill reads up to decodeBatch records, stopping after the first that is
// not a window, and decodes the windows in parallel. Next consumes them in
// order, so a failure still ends the recording at the first bad record.
func (d *Decoder) fill() {
	batch := d.pending[:0]
	allowed := 0
	for len(batch) < decodeBatch && allowed < decodeBatchInflate {
		kind, payload, err := d.readRecord()
		batch = append(batch, rawRecord{kind: kind, payload: bytes.Clone(payload), err: err})
		if err != nil || kind != recWindow {
			break
		}
		allowed += inflateLimit(len(payload))
	}
	if d.major == 1 {
		parallel(len(batch), func(i int) {
			r := &batch[i]
			if r.err == nil && r.kind == recWindow {
				r.window = new(Window)
				r.decodeErr = json.Unmarshal(r.payload, r.window)
				r.payload = nil
			}
		})
		d.pending = batch
		return
	}
	// v2: decompress in parallel, read the definitions in file order (a
	// window may use what any earlier window defined), then decode the
	// bodies in parallel against the tables as each window saw them.
	for i := range batch {
		if r := &batch[i]; r.err == nil && r.kind == recWindow {
			d.compressed += int64(len(r.payload))
		}
	}
	parallel(len(batch), func(i int) {
		r := &batch[i]
		if r.err == nil && r.kind == recWindow {
			r.payload, r.decodeErr = decompress(r.payload, inflateLimit(len(r.payload)))
		}
	})
	for i := range batch {
		r := &batch[i]
		if r.err != nil || r.kind != recWindow || r.decodeErr != nil {
			break
		}
		if r.decodeErr = d.account(len(r.payload)); r.decodeErr != nil {
			break
		}
		dd := dec2{b: r.payload, budget: windowBudget(len(r.payload)), minor: d.minor}
		r.window = &Window{NewStacks: dd.defs(&d.tables)}
		if dd.err != nil {
			r.decodeErr = dd.err
			break // later windows may refer to what this one failed to define
		}
		r.payload, r.tables, r.budget = dd.b, d.tables, dd.budget
	}
	parallel(len(batch), func(i int) {
		r := &batch[i]
		if r.err == nil && r.kind == recWindow && r.decodeErr == nil && r.window != nil {
			dd := dec2{b: r.payload, budget: r.budget, minor: d.minor}
			dd.body(&r.tables, r.window)
			r.decodeErr, r.payload, r.tables = dd.err, nil, tables2{}
		}
	})
	d.pending = batch
}

// parallel runs f(0..n-1) on every CPU.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// errShort marks a record cut off by the end of the stream.
var errShort = io.EOF

func (d *Decoder) readRecord() (byte, []byte, error) {
	var head [recHeadLen]byte
	n, err := io.ReadFull(d.r, head[:])
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return 0, nil, io.EOF
		}
		return 0, nil, errShort
	}
	kind := head[0]
	length := binary.LittleEndian.Uint32(head[1:])
	crc := binary.LittleEndian.Uint32(head[5:])
	if length > maxPayloadLen {
		return 0, nil, fmt.Errorf("record length %d exceeds the %d byte limit", length, maxPayloadLen)
	}
	// The buffer is reused from record to record (decoding copies what it
	// keeps). It grows in bounded steps, so a garbage length does not
	// allocate hundreds of megabytes before the stream runs out.
	payload := d.buf[:0]
	for remaining := int(length); remaining > 0; {
		chunk := min(remaining, 1<<20)
		start := len(payload)
		if cap(payload)-start < chunk {
			grown := make([]byte, start, start+chunk)
			copy(grown, payload)
			payload = grown
		}
		payload = payload[:start+chunk]
		if _, err := io.ReadFull(d.r, payload[start:]); err != nil {
			return 0, nil, errShort
		}
		remaining -= chunk
	}
	d.buf = payload
	if got := crc32.Update(crc32.Checksum([]byte{kind}, castagnoli), castagnoli, payload); got != crc {
		return 0, nil, fmt.Errorf("checksum mismatch in %q record", kind)
	}
	return kind, payload, nil
}

// Read reads a whole recording and checks its invariants.
func Read(r io.Reader) (*Recording, error) {
	s, err := NewStream(r)
	if err != nil {
		return nil, err
	}
	return s.Recording()
}

// ReadFile reads the recording at path. When path does not exist but an
// unfinished path+PartialSuffix does, the error says so.
func ReadFile(path string) (*Recording, error) {
	s, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rec, err := s.Recording()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// Recording reads the rest of the stream into memory.
func (s *Stream) Recording() (*Recording, error) {
	rec := &Recording{Header: s.Header}
	for w := range s.Windows() {
		rec.Windows = append(rec.Windows, *w)
	}
	if s.err != nil {
		return nil, s.err
	}
	rec.Stacks, rec.Trailer, rec.Truncated, rec.Warning = s.Stacks, s.Trailer, s.Truncated, s.Warning
	return rec, nil
}

func (h *Header) check(fileMajor int) error {
	major, _, ok := strings.Cut(h.FormatVersion, ".")
	if !ok {
		return fmt.Errorf("format_version %q is not MAJOR.MINOR", h.FormatVersion)
	}
	if m, err := strconv.Atoi(major); err != nil || m != fileMajor {
		return fmt.Errorf("format_version %q does not match the file's major version %d", h.FormatVersion, fileMajor)
	}
	return nil
}

// Major is the format major version of the file the header came from.
func (h *Header) Major() string {
	m, _, _ := strings.Cut(h.FormatVersion, ".")
	return m
}

// WriteFile writes rec to path in format major (1 or 2), defining each
// stack in the first window that refers to it. It converts recordings
// between versions for benchmarks and tests; a recording without a
// trailer stays one.
func WriteFile(path string, rec *Recording, major int) error {
	w, err := CreateVersion(path, rec.Header, major)
	if err != nil {
		return err
	}
	defined := map[uint64]bool{}
	for _, win := range rec.Windows {
		win.NewStacks = nil
		define := func(ids ...uint64) {
			for _, id := range ids {
				if st, ok := rec.Stacks[id]; ok && !defined[id] {
					defined[id] = true
					win.NewStacks = append(win.NewStacks, st)
				}
			}
		}
		for _, s := range win.Samples {
			define(s.UserStack, s.KernelStack)
		}
		if win.OffCPU != nil {
			for _, s := range win.OffCPU.Stacks {
				define(s.UserStack, s.KernelStack)
			}
		}
		if err := w.WriteWindow(&win); err != nil {
			w.Abort()
			return err
		}
	}
	if rec.Trailer == nil {
		return w.Abort()
	}
	return w.Close(*rec.Trailer)
}
