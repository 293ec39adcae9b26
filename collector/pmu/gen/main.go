// Command gen builds the Intel event tables cacheheat uses from a pinned
// subset of Intel's perfmon JSON, as perf's jevents builds its tables
// from the kernel's copy of the same files.
//
//	go run ./collector/pmu/gen -extract PERFMON_CHECKOUT   # refresh the pinned subset
//	go run ./collector/pmu/gen -o collector/perfmon_gen.go # what go generate runs
//
// -extract reads a checkout of https://github.com/intel/perfmon (its
// mapfile.csv and each model's core event file) and writes, under
// collector/pmu/perfmon, the mapfile rows of the models cacheheat knows
// and, for each, only the events it uses, every field as perfmon has it.
// Without -extract it reads that subset and writes the Go table. Nothing
// is typed by hand: a wrong or missing entry is fixed upstream or in the
// wanted lists below, and regenerated.
package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// models are the perfmon directories cacheheat has tables for: the
// Intel cores of the kernel's pmu-events it covered before, by perfmon's
// directory names.
var models = []string{"HSW", "HSX", "BDW", "BDW-DE", "BDX", "SKL", "SKX", "CLX", "ICL", "ICX", "TGL", "RKL", "SPR", "EMR"}

// wanted are the events cacheheat uses, by perfmon's names: the L2
// requests behind l2-misses and l2-references (with the demand-only
// events for a model that lacks the totals), the retired-load data
// sources (HITM and forwarding snoops, DRAM, remote), the last-level
// cache's architectural events and the dTLB page walks.
var wanted = []string{
	"L2_RQSTS.MISS",
	"L2_RQSTS.REFERENCES",
	"L2_RQSTS.ALL_DEMAND_MISS",
	"L2_RQSTS.ALL_DEMAND_REFERENCES",
	"MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM",
	"MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD",
	"MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS",
	"MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM",
	"MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM",
	"MEM_LOAD_L3_MISS_RETIRED.REMOTE_HITM",
	"MEM_LOAD_L3_MISS_RETIRED.REMOTE_FWD",
	"MEM_LOAD_RETIRED.L2_MISS",
	"MEM_LOAD_RETIRED.L3_MISS",
	"LONGEST_LAT_CACHE.MISS",
	"LONGEST_LAT_CACHE.REFERENCE",
	"DTLB_LOAD_MISSES.WALK_COMPLETED",
}

const subsetDir = "collector/pmu/perfmon"

func main() {
	extract := flag.String("extract", "", "a checkout of intel/perfmon: write the pinned subset from it")
	commit := flag.String("commit", "", "with -extract: the checkout's commit, recorded in the subset")
	out := flag.String("o", "", "the Go file to write (default stdout)")
	dir := flag.String("subset", subsetDir, "the pinned subset")
	flag.Parse()
	var err error
	if *extract != "" {
		err = extractSubset(*extract, *commit, *dir)
	} else {
		err = generate(*dir, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// mapRow is one row of perfmon's mapfile.csv.
type mapRow struct {
	pattern, version, file, kind string
}

func readMapfile(path string) ([]mapRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	var rows []mapRow
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if line == 1 {
			continue // the header
		}
		if len(rec) < 4 {
			return nil, fmt.Errorf("%s:%d: %d fields, want at least 4 (Family-model,Version,Filename,EventType)", path, line, len(rec))
		}
		rows = append(rows, mapRow{rec[0], rec[1], rec[2], rec[3]})
	}
}

// coreRows are the mapfile's core rows of the models cacheheat knows.
func coreRows(rows []mapRow) []mapRow {
	var out []mapRow
	for _, r := range rows {
		dir := strings.Split(strings.TrimPrefix(r.file, "/"), "/")[0]
		if r.kind == "core" && slices.Contains(models, dir) {
			out = append(out, r)
		}
	}
	return out
}

// eventFile is a perfmon event file: a header and its events, each a
// JSON object kept as perfmon wrote it.
type eventFile struct {
	Header json.RawMessage              `json:"Header"`
	Events []map[string]json.RawMessage `json:"Events"`
}

func readEvents(path string) (*eventFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ef eventFile
	if err := json.Unmarshal(b, &ef); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := bytes.Count(b[:se.Offset], []byte("\n")) + 1
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ef, nil
}

func extractSubset(src, commit, dst string) error {
	if commit == "" {
		return errors.New("-extract needs -commit: the subset records where it came from")
	}
	rows, err := readMapfile(filepath.Join(src, "mapfile.csv"))
	if err != nil {
		return err
	}
	rows = coreRows(rows)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var csvOut bytes.Buffer
	w := csv.NewWriter(&csvOut)
	_ = w.Write([]string{"Family-model", "Version", "Filename", "EventType"})
	seen := map[string]bool{}
	for _, r := range rows {
		_ = w.Write([]string{r.pattern, r.version, r.file, r.kind})
		if seen[r.file] {
			continue
		}
		seen[r.file] = true
		ef, err := readEvents(filepath.Join(src, r.file))
		if err != nil {
			return err
		}
		var keep []map[string]json.RawMessage
		for _, e := range ef.Events {
			if slices.Contains(wanted, name(e)) {
				keep = append(keep, e)
			}
		}
		ef.Events = keep
		b, err := json.MarshalIndent(ef, "", "    ")
		if err != nil {
			return err
		}
		p := filepath.Join(dst, filepath.FromSlash(strings.TrimPrefix(r.file, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	w.Flush()
	if err := os.WriteFile(filepath.Join(dst, "mapfile.csv"), csvOut.Bytes(), 0o644); err != nil {
		return err
	}
	lic, err := os.ReadFile(filepath.Join(src, "LICENSE"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "LICENSE"), lic, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "SOURCE"), []byte(fmt.Sprintf("https://github.com/intel/perfmon %s\n", commit)), 0o644)
}

func name(e map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(e["EventName"], &s)
	return s
}

// field reads a string field of an event; path and the event's name
// place an error.
func field(e map[string]json.RawMessage, key, path string) (string, error) {
	raw, ok := e[key]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %s: %s is not a string: %w", path, name(e), key, err)
	}
	return s, nil
}

func hexField(e map[string]json.RawMessage, key, path string) (uint64, error) {
	s, err := field(e, key, path)
	if err != nil {
		return 0, err
	}
	// Some entries list two codes ("0xB7,0xBB", the two offcore
	// MSRs' events); the events cacheheat uses have one.
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %s %q is not one hex number: %w", path, name(e), key, s, err)
	}
	return v, nil
}

// counterMask turns perfmon's Counter or CounterHTOff list ("0,1,2,3")
// into a mask of general counters; 0 when the entry has no such field
// (CounterHTOff is only in the tables of Haswell to Cascade Lake, whose
// cores give a thread 4 counters with Hyper-Threading on and 8 with it
// off).
func counterMask(e map[string]json.RawMessage, key, path string) (uint64, error) {
	s, err := field(e, key, path)
	if err != nil || s == "" {
		return 0, err
	}
	var m uint64
	for _, c := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 0 || n > 63 {
			return 0, fmt.Errorf("%s: %s: %s %q is not a list of general counters", path, name(e), key, s)
		}
		m |= 1 << n
	}
	return m, nil
}

func generate(dir, out string) error {
	src, err := os.ReadFile(filepath.Join(dir, "SOURCE"))
	if err != nil {
		return err
	}
	rows, err := readMapfile(filepath.Join(dir, "mapfile.csv"))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by go run ./collector/pmu/gen; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "// From %s (collector/pmu/perfmon: the rows and events cacheheat uses, under perfmon's LICENSE there).\n\n", strings.TrimSpace(string(src)))
	b.WriteString("package collector\n\n")
	b.WriteString("// perfmonModels are perfmon's mapfile.csv rows of the core event files:\n// the CPUID pattern, in perf's vendor-family-model[-stepping] form, and\n// the file's microarchitecture.\n")
	b.WriteString("var perfmonModels = []perfmonModel{\n")
	uarchs := map[string]string{} // file -> uarch
	var files []string
	for _, r := range rows {
		base := filepath.Base(r.file)
		uarch := strings.TrimSuffix(base, "_core.json")
		if uarch == base {
			return fmt.Errorf("%s/mapfile.csv: %s is not a core event file", dir, r.file)
		}
		if _, ok := uarchs[r.file]; !ok {
			files = append(files, r.file)
		}
		uarchs[r.file] = uarch
		fmt.Fprintf(&b, "\t{%q, %q, %q},\n", r.pattern, uarch, strings.TrimPrefix(r.file, "/"))
	}
	b.WriteString("}\n\n")
	b.WriteString("// perfmonEvents are, per microarchitecture, the events cacheheat uses\n// as perfmon lists them (perf's names are these in lower case).\n")
	b.WriteString("var perfmonEvents = map[string][]perfmonEvent{\n")
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(f, "/")))
		ef, err := readEvents(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "\t%q: {\n", uarchs[f])
		for _, e := range ef.Events {
			ev, err := hexField(e, "EventCode", path)
			if err != nil {
				return err
			}
			umask, err := hexField(e, "UMask", path)
			if err != nil {
				return err
			}
			mask, err := counterMask(e, "Counter", path)
			if err != nil {
				return err
			}
			if mask == 0 {
				return fmt.Errorf("%s: %s: no Counter list", path, name(e))
			}
			htOff, err := counterMask(e, "CounterHTOff", path)
			if err != nil {
				return err
			}
			// An event that must count alone on its core (TakenAlone) would
			// need the scheduler to keep every other event off; none of
			// the events cacheheat uses is one, and a table that made one
			// so must not pass unnoticed.
			if alone, err := field(e, "TakenAlone", path); err != nil {
				return err
			} else if alone == "1" {
				return fmt.Errorf("%s: %s: TakenAlone events are not modelled by the scheduler", path, name(e))
			}
			msr, err := field(e, "MSRIndex", path)
			if err != nil {
				return err
			}
			dep, err := field(e, "Deprecated", path)
			if err != nil {
				return err
			}
			desc, err := field(e, "BriefDescription", path)
			if err != nil {
				return err
			}
			if msr == "0x00" || msr == "0" {
				msr = ""
			}
			fmt.Fprintf(&b, "\t\t{Name: %q, Event: 0x%02x, Umask: 0x%02x, Counters: 0x%x, CountersHTOff: 0x%x, MSR: %q, Deprecated: %t, Desc: %q},\n",
				name(e), ev, umask, mask, htOff, msr, dep == "1", desc)
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}\n")
	src2, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("formatting the generated code: %w", err)
	}
	if out == "" {
		_, err = os.Stdout.Write(src2)
		return err
	}
	return os.WriteFile(out, src2, 0o644)
}
