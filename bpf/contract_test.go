package bpf

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/cacheheat/cacheheat/profile"
)

// enumRE finds the enums of a header (`enum NAME {` ... `};` at the
// start of lines), valueRE their values, each written out as `NAME = N,`.
var (
	enumRE  = regexp.MustCompile(`(?ms)^enum ([a-z_]+) \{(.*?)^\};`)
	valueRE = regexp.MustCompile(`(?m)^\s*([A-Z][A-Z0-9_]*) = ([0-9]+),`)
)

// headerEnums reads the enums of a header: name -> value name -> value.
func headerEnums(text string) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, m := range enumRE.FindAllStringSubmatch(text, -1) {
		out[m[1]] = map[string]uint64{}
		for _, v := range valueRE.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.ParseUint(v[2], 10, 64)
			out[m[1]][v[1]] = n
		}
	}
	return out
}

// goEnums reads the enum constants bpf2go wrote into a generated file, by
// their Go type: type name -> constant name -> value.
func goEnums(path string) (map[string]map[string]uint64, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]uint64{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			v, err := strconv.ParseUint(lit.Value, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", vs.Names[0].Name, err)
			}
			if out[typ.Name] == nil {
				out[typ.Name] = map[string]uint64{}
			}
			out[typ.Name][vs.Names[0].Name] = v
		}
	}
	return out, nil
}

// goTypeName is bpf2go's name for a C type of the object with this stem:
// "offcpu_reason" of Cacheheat is CacheheatOffcpuReason.
func goTypeName(stem, c string) string {
	var b strings.Builder
	b.WriteString(stem)
	for _, part := range strings.Split(c, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// checkEnums compares each enum of the header with the object's BTF and
// with the Go constants generated for it, both ways: every C value is in
// the object with the header's value and has a Go constant of that value,
// and Go has no constant C lacks.
func checkEnums(spec *btf.Spec, stem string, header, goConsts map[string]map[string]uint64) error {
	var errs []error
	for name, values := range header {
		var e *btf.Enum
		if err := spec.TypeByName(name, &e); err != nil {
			errs = append(errs, fmt.Errorf("enum %s is not in the object's BTF (is it used in cacheheat.c?): %w", name, err))
			continue
		}
		for _, v := range e.Values {
			if h, ok := values[v.Name]; !ok || h != v.Value {
				errs = append(errs, fmt.Errorf("%s: the object says %d, cacheheat.h %d (present: %v)", v.Name, v.Value, h, ok))
			}
		}
		if len(values) != len(e.Values) {
			errs = append(errs, fmt.Errorf("enum %s: %d values in cacheheat.h, %d in the object", name, len(values), len(e.Values)))
		}
		typ := goTypeName(stem, name)
		consts, ok := goConsts[typ]
		if !ok {
			errs = append(errs, fmt.Errorf("enum %s has no Go type %s (is it in gen.go's -type list?)", name, typ))
			continue
		}
		for _, v := range e.Values {
			got, ok := consts[typ+v.Name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: no Go constant %s", v.Name, typ+v.Name))
			case got != v.Value:
				errs = append(errs, fmt.Errorf("%s: C says %d, Go %s says %d", v.Name, v.Value, typ+v.Name, got))
			}
		}
		if len(consts) != len(e.Values) {
			errs = append(errs, fmt.Errorf("enum %s: %d values in C, %d constants of %s in Go", name, len(e.Values), len(consts), typ))
		}
	}
	return errors.Join(errs...)
}

// contracts are the objects with a header shared with user space.
var contracts = []struct {
	stem, header, gofile string
	load                 func() (*ebpf.CollectionSpec, error)
	must                 string // an enum the header must have
}{
	{"Cacheheat", "cacheheat.h", "cacheheat_bpfel.go", LoadCacheheat, "sizes"},
	{"Funclat", "funclat.h", "funclat_bpfel.go", LoadFunclat, "func_size"},
}

// TestContractEnums checks that every enum of each shared header is in the
// embedded object and that the generated Go constants say what it says:
// it fails when the header changed and `make generate` was not run, or
// when an enum was added without its -type.
func TestContractEnums(t *testing.T) {
	for _, c := range contracts {
		header, err := os.ReadFile(c.header)
		if err != nil {
			t.Fatal(err)
		}
		enums := headerEnums(string(header))
		if len(enums[c.must]) == 0 {
			t.Fatalf("%s read as %v: no enum %s with values", c.header, enums, c.must)
		}
		spec, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		goConsts, err := goEnums(c.gofile)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkEnums(spec.Types, c.stem, enums, goConsts); err != nil {
			t.Errorf("bpf/%s, the object and the generated Go disagree (run make generate):\n%v", c.header, err)
		}
	}

	header, err := os.ReadFile("cacheheat.h")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := LoadCacheheat()
	if err != nil {
		t.Fatal(err)
	}
	goConsts, err := goEnums("cacheheat_bpfel.go")
	if err != nil {
		t.Fatal(err)
	}

	// The check must fire: a header value the object lacks (an edit
	// without make generate), a Go constant with another value, one C
	// lacks and a missing enum are each reported.
	tampered := map[string]map[string]uint64{}
	for typ, consts := range goConsts {
		tampered[typ] = map[string]uint64{}
		for k, v := range consts {
			tampered[typ][k] = v
		}
	}
	tampered["CacheheatMode"]["CacheheatModeMODE_CGROUP"] = 7
	sizes := len(tampered["CacheheatSizes"])
	tampered["CacheheatSizes"]["CacheheatSizesMAX_RETRIES"] = 3
	edited := headerEnums(string(header) + "\nenum no_such_enum {\n\tNOTHING = 0,\n};\n")
	edited["target_state"]["TARGET_AT_EXEC"] = 3
	err = checkEnums(spec.Types, "Cacheheat", edited, tampered)
	for _, want := range []string{
		"TARGET_AT_EXEC: the object says 2, cacheheat.h 3",
		"MODE_CGROUP: C says 2, Go CacheheatModeMODE_CGROUP says 7",
		fmt.Sprintf("enum sizes: %d values in C, %d constants", sizes, sizes+1),
		"enum no_such_enum is not in the object's BTF",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tampered constants: error %v, want it to say %q", err, want)
		}
	}
}

// TestContractLayouts checks the sizes user space relies on against the
// object's own maps and types: the off-CPU stack map's value size
// (collector reads entries into [MAX_STACK_DEPTH]uint64), the sample ring
// (a ring buffer whose size collector sets), one counters map per
// event slot, and the histogram layout of the recording format.
func TestContractLayouts(t *testing.T) {
	spec, err := LoadCacheheat()
	if err != nil {
		t.Fatal(err)
	}
	if m := spec.Maps[CacheheatMapSampleRing]; m == nil || m.Type != ebpf.RingBuf {
		t.Errorf("map %s: %v, want a ring buffer", CacheheatMapSampleRing, m)
	}
	for _, name := range []string{CacheheatMapOffcpuStacks} {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("no map %s", name)
			continue
		}
		if want := uint32(CacheheatSizesMAX_STACK_DEPTH) * 8; m.ValueSize != want {
			t.Errorf("map %s: value size %d, want MAX_STACK_DEPTH*8 = %d", name, m.ValueSize, want)
		}
	}
	counters := 0
	for name := range spec.Maps {
		if n, ok := strings.CutPrefix(name, "counters"); ok {
			if _, err := strconv.Atoi(n); err == nil {
				counters++
			}
		}
	}
	if counters != int(CacheheatSizesMAX_EVENTS) {
		t.Errorf("%d countersN maps, want MAX_EVENTS = %d", counters, CacheheatSizesMAX_EVENTS)
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"task_val.counts", len(CacheheatTaskVal{}.Counts), int(CacheheatSizesMAX_EVENTS)},
		{"hist_val.runq", len(CacheheatHistVal{}.Runq), int(CacheheatSizesHIST_BUCKETS)},
		{"profile.HistBuckets", profile.HistBuckets, int(CacheheatSizesHIST_BUCKETS)},
		{"last_val.fires", len(CacheheatLastVal{}.Fires), int(CacheheatSampleSlotSAMPLE_SLOTS)},
		{"cgroup_val.offcpu", len(CacheheatCgroupVal{}.Offcpu), int(CacheheatOffcpuReasonOFFCPU_REASONS)},
		{"go_stack.pc", len(CacheheatGoStack{}.Pc), int(CacheheatSizesGO_STACK_DEPTH)},
		{"func_bucket.sum", len(FunclatFuncBucket{}.Sum), int(FunclatFuncCounterFC_COUNT)},
		{"profile.FunctionCounters", len(profile.FunctionCounters), int(FunclatFuncCounterFC_COUNT)},
		{"func_size.FUNC_BUCKETS", profile.HistBuckets, int(FunclatFuncSizeFUNC_BUCKETS)},
	} {
		if c.got != c.want {
			t.Errorf("%s has %d entries, want %d", c.what, c.got, c.want)
		}
	}
}
