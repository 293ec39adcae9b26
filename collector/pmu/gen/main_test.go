package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedIsCurrent: regenerating from the pinned subset gives the
// committed table, byte for byte (go generate ./collector writes it).
func TestGeneratedIsCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "perfmon_gen.go")
	if err := generate("../perfmon", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../perfmon_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("collector/perfmon_gen.go is not what the pinned subset generates: run go generate ./collector")
	}
}

// TestSubsetHasWhatIsWanted: every model's file in the subset has only
// wanted events, and the events cacheheat cannot do without on every
// model (the last-level cache's architectural pair and the dTLB walks).
func TestSubsetHasWhatIsWanted(t *testing.T) {
	rows, err := readMapfile("../perfmon/mapfile.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("the subset's mapfile has no rows")
	}
	for _, r := range rows {
		ef, err := readEvents(filepath.Join("../perfmon", r.file))
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, e := range ef.Events {
			n := name(e)
			have[n] = true
			if !strings.HasPrefix(n, "L2_RQSTS.") && !strings.HasPrefix(n, "MEM_LOAD_") && !strings.HasPrefix(n, "LONGEST_LAT_CACHE.") && !strings.HasPrefix(n, "DTLB_LOAD_MISSES.") {
				t.Errorf("%s: %s is not an event cacheheat uses", r.file, n)
			}
		}
		for _, n := range []string{"LONGEST_LAT_CACHE.MISS", "DTLB_LOAD_MISSES.WALK_COMPLETED"} {
			if !have[n] {
				t.Errorf("%s lacks %s", r.file, n)
			}
		}
	}
}

// TestMalformedTableNamesFileAndLine: a broken event file or mapfile
// fails the generator with the file and line, never a partial table.
func TestMalformedTableNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("SOURCE", "https://github.com/intel/perfmon test\n")
	write("mapfile.csv", "Family-model,Version,Filename,EventType\nGenuineIntel-6-55,V1,/X/events/x_core.json,core\n")
	write("X/events/x_core.json", "{\n  \"Header\": {},\n  \"Events\": [\n    {\"EventName\": \"A\",}\n  ]\n}\n")
	out := filepath.Join(dir, "out.go")
	err := generate(dir, out)
	if err == nil || !strings.Contains(err.Error(), "x_core.json:4") {
		t.Errorf("broken JSON: error %v, want the file and line 4", err)
	}
	if _, statErr := os.Stat(out); statErr == nil {
		t.Error("a broken table still wrote output")
	}
	write("X/events/x_core.json", `{"Header": {}, "Events": [{"EventName": "A", "EventCode": "0xZZ", "UMask": "0x01", "Counter": "0,1"}]}`)
	if err := generate(dir, out); err == nil || !strings.Contains(err.Error(), "EventCode") {
		t.Errorf("a bad event code: error %v, want it named", err)
	}
	for _, c := range []struct{ event, want string }{
		{`"Counter": "0,x"`, `Counter "0,x"`},
		{`"Counter": "0,1", "CounterHTOff": "9,"`, `CounterHTOff "9,"`},
		{`"UMask": "0x02"`, "no Counter list"},
		{`"Counter": "0,1", "TakenAlone": "1"`, "TakenAlone"},
	} {
		write("X/events/x_core.json", `{"Header": {}, "Events": [{"EventName": "A", "EventCode": "0x24", "UMask": "0x01", `+c.event+`}]}`)
		if err := generate(dir, out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("event with %s: error %v, want %q", c.event, err, c.want)
		}
	}
	write("mapfile.csv", "Family-model,Version,Filename,EventType\nGenuineIntel-6-55\n")
	if err := generate(dir, out); err == nil || !strings.Contains(err.Error(), "mapfile.csv:2") {
		t.Errorf("a short mapfile row: error %v, want mapfile.csv:2", err)
	}
}
