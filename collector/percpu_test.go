package collector

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/cacheheat/cacheheat/bpf"
)

// TestPerCPURead: the kept-buffer read of a per-CPU array gives what was
// put and what cilium/ebpf's Lookup gives, CPU by CPU: for bindings the
// recorder reads (arrays, a hidden layout field), and for a 12-byte value,
// whose CPUs the kernel lays 16 bytes apart; a map whose value size is
// not the type's is refused.
func TestPerCPURead(t *testing.T) {
	needBPF(t)
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	hists := perCPUArray(t, uint32(reflect.TypeFor[bpf.CacheheatHistVal]().Size()))
	put := make([]bpf.CacheheatHistVal, n)
	for cpu := range put {
		for b := range put[cpu].Runq {
			put[cpu].Runq[b] = uint64(cpu*1000 + b)
			put[cpu].Offcpu[b] = uint64(cpu*1000 + 500 + b)
		}
	}
	if err := hists.Put(uint32(0), put); err != nil {
		t.Fatal(err)
	}
	var p perCPU[bpf.CacheheatHistVal]
	for range 2 { // the second read reuses the buffers
		got, err := p.read(hists)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, put) {
			t.Fatalf("read %v, put %v", got, put)
		}
	}
	stats := perCPUArray(t, uint32(reflect.TypeFor[bpf.CacheheatOffcpuStat]().Size()))
	st := make([]bpf.CacheheatOffcpuStat, n)
	for cpu := range st {
		st[cpu] = bpf.CacheheatOffcpuStat{BlockedNs: uint64(cpu) + 1, SampledNs: 7, StackErrors: 3, MapErrors: uint64(cpu) * 9}
	}
	if err := stats.Put(uint32(0), st); err != nil {
		t.Fatal(err)
	}
	var ps perCPU[bpf.CacheheatOffcpuStat]
	got, err := ps.read(stats)
	if err != nil {
		t.Fatal(err)
	}
	var want []bpf.CacheheatOffcpuStat
	if err := stats.Lookup(uint32(0), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, st) {
		t.Errorf("read %v, Lookup %v, put %v", got, want, st)
	}
	odd := perCPUArray(t, 12)
	three := make([][3]uint32, n)
	for cpu := range three {
		three[cpu] = [3]uint32{uint32(cpu), 1 << 31, uint32(cpu) + 77}
	}
	if err := odd.Put(uint32(0), three); err != nil {
		t.Fatal(err)
	}
	var po perCPU[[3]uint32]
	if got, err := po.read(odd); err != nil || !reflect.DeepEqual(got, three) {
		t.Errorf("12-byte values: read %v (%v), put %v", got, err, three)
	}
	var wrong perCPU[bpf.CacheheatStatsVal]
	if _, err := wrong.read(hists); err == nil || !strings.Contains(err.Error(), "per-CPU array of") {
		t.Errorf("reading a map of another value size: %v", err)
	}
}

// perCPUArray makes a per-CPU array of one value of size bytes, closed at
// the test's end.
func perCPUArray(t *testing.T, size uint32) *ebpf.Map {
	t.Helper()
	return testMap(t, &ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: size, MaxEntries: 1})
}

// testMap creates a map of spec, closed at the test's end.
func testMap(t *testing.T, spec *ebpf.MapSpec) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestBatchReadPerCPUHash: a per-CPU hash read in batches gives, for every
// key, each CPU's value in CPU order, as put and as iterating gives; more
// keys than one batch holds (64) are all read, and a second read through
// the kept buffers gives the same.
func TestBatchReadPerCPUHash(t *testing.T) {
	needBPF(t)
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	m := testMap(t, &ebpf.MapSpec{
		Type: ebpf.PerCPUHash, KeySize: 4, MaxEntries: 1024,
		ValueSize: uint32(reflect.TypeFor[bpf.CacheheatWaitVal]().Size()),
	})
	const keys = 150
	put := map[uint32][]bpf.CacheheatWaitVal{}
	for k := range uint32(keys) {
		v := make([]bpf.CacheheatWaitVal, n)
		for cpu := range v {
			v[cpu].Ns = uint64(k)*1000 + uint64(cpu)
			v[cpu].Count = uint64(cpu) + 1
			v[cpu].Hist[cpu%len(v[cpu].Hist)] = uint64(k) + 7
		}
		if err := m.Put(k*7919, v); err != nil {
			t.Fatal(err)
		}
		put[k*7919] = v
	}
	want, wantVals, err := iterateAll[uint32, bpf.CacheheatWaitVal](m)
	if err != nil || len(want) != keys || len(wantVals) != keys*n {
		t.Fatalf("iterating: %d keys, %d values, %v; want %d keys", len(want), len(wantVals), err, keys)
	}
	var b batchBuf[uint32, bpf.CacheheatWaitVal]
	for range 2 {
		got, vals, err := b.readAll(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != keys || len(vals) != keys*n {
			t.Fatalf("batch read %d keys and %d values, want %d and %d", len(got), len(vals), keys, keys*n)
		}
		for i, k := range got {
			if !reflect.DeepEqual(vals[i*n:(i+1)*n], put[k]) {
				t.Fatalf("key %d: read %v, put %v", k, vals[i*n:(i+1)*n], put[k])
			}
		}
	}
}

// TestTakeHash: taking a hash map returns every key with its value and
// leaves the map empty, in batches and key by key (kernels without batch
// operations); a second take finds nothing.
func TestTakeHash(t *testing.T) {
	needBPF(t)
	for _, name := range []string{"batch", "each"} {
		m := testMap(t, &ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 4096})
		const keys = 300
		for k := range uint32(keys) {
			if err := m.Put(k*7919, uint64(k)+1); err != nil {
				t.Fatal(err)
			}
		}
		var b batchBuf[uint32, uint64]
		take := func() ([]uint32, []uint64, error) {
			if name == "each" {
				return takeEach[uint32, uint64](m)
			}
			return b.takeAll(m)
		}
		got, vals, err := take()
		if err != nil || len(got) != keys || len(vals) != keys {
			t.Fatalf("%s: took %d keys, %d values, %v; want %d", name, len(got), len(vals), err, keys)
		}
		for i, k := range got {
			if vals[i] != uint64(k/7919)+1 {
				t.Fatalf("%s: key %d: took %d, put %d", name, k, vals[i], k/7919+1)
			}
		}
		if got, _, err := take(); err != nil || len(got) != 0 {
			t.Errorf("%s: a second take found %d keys (%v); the first left them", name, len(got), err)
		}
	}
}
