package symbolize

import (
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestRecordedLines: lines resolved when a recording ends answer every
// lookup a reader makes (innermost frames at their offset, callers at the
// call) with what the file itself gives, after the file is gone; a frame
// without a build id is left to the reader; addresses past the limit are
// counted, not kept.
func TestRecordedLines(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build a C test binary: not in PATH")
	}
	// A copy of the shared test binary: this test deletes it.
	b, err := os.ReadFile(build(t, "inline-g", inlineProgram, "c", nil, cc, "-O2", "-g"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "inline-g")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(buildIDOf(f))
	f.Close()
	if id == "" {
		t.Fatalf("%s has no GNU build id", bin)
	}
	offs := fileOffsets(t, bin, "outer")
	var stacks [][]profile.Frame
	// Offsets 8 bytes apart: a caller's lookup (its offset minus one)
	// is never another frame's.
	for i := 0; i+8 < len(offs); i += 16 {
		// innermost in outer, called from main's call of outer
		stacks = append(stacks, []profile.Frame{
			{Function: "outer", Module: bin, Offset: offs[i], BuildID: id},
			{Function: "outer", Module: bin, Offset: offs[i+8], BuildID: id},
			{Function: "main", Module: bin, Offset: offs[0] + 1, BuildID: "" /* left to the reader */},
		})
	}
	q := NewLineRequests()
	for _, s := range stacks {
		q.AddStack(s)
	}
	fromFile := NewLines()
	type lookup struct {
		f      profile.Frame
		caller bool
	}
	want := map[lookup][]Line{}
	withLines := 0
	for _, s := range stacks {
		for i, fr := range s[:2] {
			resolve := fromFile.Resolve
			if i > 0 {
				resolve = fromFile.ResolveCaller
			}
			lines, err := resolve(fr)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) > 0 {
				withLines++
			}
			want[lookup{fr, i > 0}] = lines
		}
	}
	if withLines == 0 {
		t.Fatalf("no address of outer in %s has lines", bin)
	}
	recorded := q.Resolve("/")
	if len(recorded) != 1 || recorded[0].Module != bin || recorded[0].BuildID != id {
		t.Fatalf("recorded %d files (%+v), want %s alone", len(recorded), recorded, bin)
	}
	if err := os.Rename(bin, bin+".gone"); err != nil {
		t.Fatal(err)
	}
	l := NewLines()
	l.AddRecorded(recorded)
	for k, w := range want {
		resolve := l.Resolve
		if k.caller {
			resolve = l.ResolveCaller
		}
		got, err := resolve(k.f)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("%+v (caller %v) from the recording: %+v, %v; from the file: %+v", k.f, k.caller, got, err, w)
		}
	}
	// Not recorded: the reader goes to the file, which is gone.
	if _, err := l.Resolve(profile.Frame{Module: bin, Offset: offs[0] + 1}); err == nil {
		t.Error("a frame without a build id was answered from the recording, want the file's error")
	}

	q = NewLineRequests()
	q.limit = 3
	q.AddStack(stacks[0])
	q.AddStack(stacks[1])
	if q.n != 3 || q.Dropped != 1 {
		t.Errorf("limit 3, 4 distinct addresses: kept %d, dropped %d; want 3 and 1", q.n, q.Dropped)
	}
}

// TestRecordedLinesTooLarge: a file whose debug information is over the
// recorder's bound is left to the reader and named, never read at the
// recording's end.
func TestRecordedLinesTooLarge(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build a C test binary: not in PATH")
	}
	bin := build(t, "inline-g", inlineProgram, "c", nil, cc, "-O2", "-g")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(buildIDOf(f))
	f.Close()
	lf := openLineFile(bin, bin, id, 16) // 16 bytes: every C binary's DWARF is larger
	if !errors.Is(lf.err, ErrDebugTooLarge) {
		t.Fatalf("debug information over the bound: %v, want ErrDebugTooLarge", lf.err)
	}
	q := NewLineRequests()
	q.AddStack([]profile.Frame{{Module: bin, Offset: fileOffsets(t, bin, "outer")[0], BuildID: id}})
	if got := q.Resolve("/"); len(got) != 1 || len(q.TooLarge) != 0 {
		t.Errorf("a small file: %d files resolved, too large %v; want 1 and none", len(got), q.TooLarge)
	}
}
