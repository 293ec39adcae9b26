package profile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// fill sets every exported field of v, recursively, to a non-zero value
// that differs from field to field. Slices get two elements and maps two
// entries. A kind it does not know fails the test: a field of a new kind
// must be taught to fill before it can be checked.
func fill(t testing.TB, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(*n) * 1e6)
			return
		}
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, n)
			fill(t, e, n)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	default:
		t.Fatalf("fill: %s has kind %s; teach fill (and the v2 codec) about it", v.Type(), v.Kind())
	}
}

// zeroFields lists the paths of exported fields that are zero, so the test
// proves fill reached every field.
func zeroFields(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			*out = append(*out, path)
			return
		}
		zeroFields(v.Elem(), path, out)
	case reflect.Slice:
		if v.Len() == 0 {
			*out = append(*out, path)
		}
		for i := range v.Len() {
			zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			break
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				zeroFields(v.Field(i), path+"."+f.Name, out)
			}
		}
	default:
		if v.IsZero() {
			*out = append(*out, path)
		}
	}
}

// everyField is a recording of two windows whose every exported field is
// set (fill), checked so: fill left nothing zero.
func everyField(t testing.TB) (Header, []Window, Trailer) {
	t.Helper()
	n := 0
	var h Header
	fill(t, reflect.ValueOf(&h).Elem(), &n)
	h.FormatVersion = fmt.Sprintf("%d.%d", FormatMajor, FormatMinor) // the writer sets it
	wins := make([]Window, 2)
	for i := range wins {
		fill(t, reflect.ValueOf(&wins[i]).Elem(), &n)
		wins[i].Index = i // the writer numbers windows
	}
	// The second window refers to a stack the first defined, and to its
	// own; its first host array equals the target's (-a), which has its
	// own encoding.
	wins[1].Samples[0].UserStack = wins[0].NewStacks[0].ID
	wins[1].Samples[1].KernelStack = wins[1].NewStacks[1].ID
	wins[1].Counters[0].HostPerCPU = append(Counts(nil), wins[1].Counters[0].PerCPU...)
	var tr Trailer
	fill(t, reflect.ValueOf(&tr).Elem(), &n)
	tr.Windows = len(wins)

	var zero []string
	zeroFields(reflect.ValueOf(h), "Header", &zero)
	zeroFields(reflect.ValueOf(wins[1]), "Window", &zero) // window 0's Index is 0
	zeroFields(reflect.ValueOf(tr), "Trailer", &zero)
	if len(zero) > 0 {
		t.Fatalf("fill left fields zero: %v", zero)
	}
	return h, wins, tr
}

// TestV2EveryFieldRoundTrips fills every exported field of Header, Window
// and Trailer and checks that the v2 codec gives them back unchanged. A
// field added to the model without a way through the codec fails here
// (docs/FORMAT.md, "Adding a field").
func TestV2EveryFieldRoundTrips(t *testing.T) {
	h, wins, tr := everyField(t)
	path := filepath.Join(t.TempDir(), "all.rec")
	w, err := Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range wins {
		win := wins[i] // WriteWindow sets Index, which is already right
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(tr); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := NewDecoder(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Header, h) {
		t.Errorf("header differs:\n got %+v\nwant %+v", d.Header, h)
	}
	for i := 0; ; i++ {
		win, gotTr, err := d.Next()
		if err == io.EOF {
			if i != len(wins)+1 {
				t.Fatalf("stream ended after %d records (%s)", i, d.Warning)
			}
			break
		}
		switch {
		case win != nil:
			if !reflect.DeepEqual(*win, wins[i]) {
				t.Errorf("window %d differs:\n got %+v\nwant %+v", i, *win, wins[i])
			}
		case !reflect.DeepEqual(*gotTr, tr):
			t.Errorf("trailer differs:\n got %+v\nwant %+v", *gotTr, tr)
		}
	}
}

// TestV2WindowExtension checks the path a Window field without a binary
// encoding takes: it is written as JSON and read back into the window.
func TestV2WindowExtension(t *testing.T) {
	known := maps.Clone(windowFields)
	delete(known, "Drops")
	fields := extFields(known)
	win := testWindow(3)
	win.Drops = Drops{Throttled: 7, MapErrors: 9}
	ext, err := windowExt(&win, fields)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ext), `"drops"`) {
		t.Fatalf("extension %s does not carry drops", ext)
	}
	path := filepath.Join(t.TempDir(), "ext.rec")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	w.enc.ext = fields
	if err := w.WriteWindow(&win); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(Trailer{EndReason: EndDuration}); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Windows[0].Drops; got != win.Drops {
		t.Errorf("drops = %+v, want %+v", got, win.Drops)
	}
}

// TestV1FixturesStillRead reads files written by the v1 writer before
// version 2 existed.
func TestV1FixturesStillRead(t *testing.T) {
	rec, err := ReadFile("testdata/v1/complete.rec")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Header.FormatVersion != "1.0" || rec.Truncated || rec.Trailer == nil || *rec.Trailer.ExitStatus != 3 || len(rec.Windows) != 3 {
		t.Fatalf("complete.rec: version %s truncated=%v trailer=%+v windows=%d", rec.Header.FormatVersion, rec.Truncated, rec.Trailer, len(rec.Windows))
	}
	for i, got := range rec.Windows {
		want := testWindow(i)
		want.Index, want.NewStacks = i, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("complete.rec window %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	if len(rec.Stacks) != 5 {
		t.Errorf("complete.rec: %d stacks, want 5", len(rec.Stacks))
	}
	rec, err = ReadFile("testdata/v1/killed.rec")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Truncated || rec.Trailer != nil || len(rec.Windows) != 2 {
		t.Errorf("killed.rec: truncated=%v trailer=%v windows=%d", rec.Truncated, rec.Trailer, len(rec.Windows))
	}
}

// TestV1ToV2SameRecording rewrites each v1 fixture, a real recording
// among them, as v2 and checks that the two read back the same.
func TestV1ToV2SameRecording(t *testing.T) {
	paths, _ := filepath.Glob("testdata/v1/*.rec")
	if len(paths) < 3 {
		t.Fatalf("want at least 3 v1 fixtures, found %v", paths)
	}
	for _, p := range paths {
		v1, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "v2.rec")
		if err := WriteFile(out, v1, 2); err != nil {
			t.Fatal(err)
		}
		v2, err := ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		v2.Header.FormatVersion = v1.Header.FormatVersion
		if v1.Trailer == nil {
			v2.Trailer, v2.Truncated, v2.Warning = nil, v1.Truncated, v1.Warning
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Errorf("%s: v2 copy differs", p)
		}
		a, _ := os.Stat(p)
		b, _ := os.Stat(out)
		t.Logf("%s: v1 %d bytes, v2 %d bytes", p, a.Size(), b.Size())
	}
}

// TestV2SkipsUnknownSections: a section a newer minor version adds (an
// unknown tag) is skipped and the rest of the window reads as before.
func TestV2SkipsUnknownSections(t *testing.T) {
	win := testWindow(0)
	e := newEncoder2()
	if _, err := e.window(&win); err != nil {
		t.Fatal(err)
	}
	raw := bytes.Clone(e.out)
	if raw[len(raw)-1] != sectionEnd {
		t.Fatalf("window does not end with sectionEnd")
	}
	raw = append(raw[:len(raw)-1], 99, 3, 'a', 'b', 'c', sectionEnd)
	var file bytes.Buffer
	file.WriteString(magic)
	binary.Write(&file, binary.LittleEndian, [2]uint16{FormatMajor, FormatMinor + 1})
	h := testHeader()
	h.FormatVersion = fmt.Sprintf("%d.%d", FormatMajor, FormatMinor+1)
	hj, _ := json.Marshal(h)
	writeFramed(&file, recHeader, compress(hj))
	writeFramed(&file, recWindow, compress(raw))
	rec, err := Read(&file)
	if err != nil {
		t.Fatal(err)
	}
	want := testWindow(0)
	want.NewStacks = nil
	if len(rec.Windows) != 1 || !reflect.DeepEqual(rec.Windows[0], want) {
		t.Errorf("windows %+v, want %+v (%s)", rec.Windows, want, rec.Warning)
	}
}

// TestV20FixturesStillRead reads files written by the window layout of
// format 2.0 (testdata/v2.0, written before minor version 1 changed it).
// every-field.rec has every field set (everyField) and is checked against
// a v1 (JSON) copy written at the same time from the same values;
// falseshare-3s.rec is a real `record -a` of `workload run falseshare`,
// checked to read whole and valid and to come back unchanged from the
// current layout.
func TestV20FixturesStillRead(t *testing.T) {
	got := decodeAll(t, "testdata/v2.0/every-field.rec")
	want := decodeAll(t, "testdata/v2.0/every-field-v1.rec")
	if got.Header.FormatVersion != "2.0" {
		t.Fatalf("every-field.rec: format %s, want 2.0", got.Header.FormatVersion)
	}
	got.Header.FormatVersion = want.Header.FormatVersion
	if len(got.Windows) != 2 || got.Trailer == nil {
		t.Fatalf("every-field.rec: %d windows, trailer %v (%s)", len(got.Windows), got.Trailer, got.Warning)
	}
	for i := range got.Windows {
		if !reflect.DeepEqual(got.Windows[i], want.Windows[i]) {
			t.Errorf("every-field.rec: window %d differs:\n 2.0 %+v\n  v1 %+v", i, got.Windows[i], want.Windows[i])
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("every-field.rec reads differently from its v1 copy")
	}

	old, err := ReadFile("testdata/v2.0/falseshare-3s.rec")
	if err != nil {
		t.Fatal(err)
	}
	if old.Header.FormatVersion != "2.0" || len(old.Windows) != 3 || old.Trailer == nil || len(old.Stacks) == 0 {
		t.Fatalf("falseshare-3s.rec: format %s, %d windows, %d stacks, trailer %v (%s)",
			old.Header.FormatVersion, len(old.Windows), len(old.Stacks), old.Trailer, old.Warning)
	}
	path := filepath.Join(t.TempDir(), "now.rec")
	if err := WriteFile(path, old, FormatMajor); err != nil {
		t.Fatal(err)
	}
	now, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now.Header.FormatVersion = old.Header.FormatVersion
	if !reflect.DeepEqual(now, old) {
		t.Errorf("falseshare-3s.rec changes when rewritten in format %s", FormatVersion())
	}
}

// decodeAll reads a file record by record without Read's validity check
// (everyField's values are not a valid recording).
func decodeAll(t *testing.T, path string) *Recording {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := NewDecoder(f)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recording{Header: d.Header}
	for {
		w, tr, err := d.Next()
		if err == io.EOF {
			break
		}
		if tr != nil {
			rec.Trailer = tr
		} else {
			rec.Windows = append(rec.Windows, *w)
		}
	}
	rec.Truncated, rec.Warning = d.Truncated, d.Warning
	return rec
}

// TestHashStackIsTheRecordersID: format 2.1 leaves out a stack's ID when
// HashStack gives it, which is only worth it while the recorder computes
// ids the same way; testdata/v2.0/falseshare-3s.rec was recorded by it.
func TestHashStackIsTheRecordersID(t *testing.T) {
	rec, err := ReadFile("testdata/v2.0/falseshare-3s.rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Stacks) == 0 {
		t.Fatal("the fixture has no stacks")
	}
	for id, s := range rec.Stacks {
		if h := HashStack(s.Kernel, s.Frames); h != id {
			t.Errorf("stack %d: HashStack gives %d", id, h)
		}
	}
	// A stack whose ID is not its hash is written with its ID.
	odd := Stack{ID: 12345, Frames: []Frame{{Function: "f", Module: "m"}}}
	e := newEncoder2()
	win := Window{NewStacks: []Stack{odd}, Samples: []Sample{{Event: "cpu-clock", PID: 1, TID: 1, UserStack: odd.ID, Count: 1}}}
	if _, err := e.window(&win); err != nil {
		t.Fatal(err)
	}
	d := dec2{b: e.out, budget: windowBudget(len(e.out)), minor: FormatMinor}
	var tb tables2
	if got := d.defs(&tb); d.err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], odd) {
		t.Errorf("stack read back as %+v (%v), want %+v", got, d.err, odd)
	}
}

// TestV2SmallRows: processes and threads of the smallest encodings in
// numbers large enough that a reader bounding their count by a larger
// minimum size per row would refuse the window.
func TestV2SmallRows(t *testing.T) {
	win := Window{Index: 0, EndNS: 1}
	// 3 bytes a process, 2 a thread (a reference and a nil map).
	for range 1000 {
		win.Processes = append(win.Processes, Process{PID: 1})
	}
	win.Processes = append(win.Processes, Process{PID: 2, Threads: make([]Thread, 1000)})
	e := newEncoder2()
	if _, err := e.window(&win); err != nil {
		t.Fatal(err)
	}
	d := dec2{b: e.out, budget: windowBudget(len(e.out)), minor: FormatMinor}
	var tb tables2
	var got Window
	got.NewStacks = d.defs(&tb)
	d.body(&tb, &got)
	if d.err != nil {
		t.Fatal(d.err)
	}
	if !reflect.DeepEqual(got, win) {
		t.Errorf("window read back differs")
	}
}

// TestStoredFrame: a small payload is stored uncompressed in a zstd frame
// that the zstd decoder (and so every reader) takes as any other, and a
// payload at the threshold is compressed.
func TestStoredFrame(t *testing.T) {
	for _, n := range []int{0, 1, 300, storeBelow - 1} {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i * 7)
		}
		frame := compress(raw)
		if len(frame) != n+12 {
			t.Errorf("%d bytes: a frame of %d bytes, want stored (%d)", n, len(frame), n+12)
		}
		got, err := decompress(frame, 1<<20)
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%d bytes: decompressed %d bytes, err %v", n, len(got), err)
		}
		d, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		if all, err := d.DecodeAll(frame, nil); err != nil || !bytes.Equal(all, raw) {
			t.Errorf("%d bytes: DecodeAll: %d bytes, err %v", n, len(all), err)
		}
		d.Close()
	}
	if raw := make([]byte, storeBelow); len(compress(raw)) >= storeBelow {
		t.Errorf("%d zero bytes were not compressed", storeBelow)
	}
}

// TestWindowExtIsJSON: the extension written field by field is the JSON
// object encoding/json makes of those fields (keys sorted, strings
// escaped), an empty slice kept as [] (Waits: the account was kept and
// nothing waited) and a nil one left out (no account).
func TestWindowExtIsJSON(t *testing.T) {
	for _, win := range []Window{
		{},
		{Waits: []Wait{}},
		{Waits: []Wait{}, Peers: []Peer{{PID: 7, WakerComm: "<script>&\u2028", Reason: OffCPULock, NS: 9}}, Runs: []RunTotal{{Index: 1}}},
		{Functions: []FunctionWindow{{ID: 2}}, Peers: []Peer{}},
	} {
		m := map[string]any{}
		if win.Waits != nil {
			m["waits"] = win.Waits
		}
		if win.Peers != nil {
			m["peers"] = win.Peers
		}
		if win.Runs != nil {
			m["runs"] = win.Runs
		}
		if win.Functions != nil {
			m["functions"] = win.Functions
		}
		var want []byte
		if len(m) > 0 {
			var err error
			if want, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		got, err := windowExt(&win, windowExtFields())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("extension\n got %s\nwant %s", got, want)
		}
	}
}
