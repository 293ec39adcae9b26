package workloads

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cacheheat/cacheheat/host"
	"golang.org/x/sys/unix"
)

// numa streams over a buffer from threads pinned to node 0's CPUs, with
// the buffer bound to another node (every miss crosses the interconnect)
// or to node 0 itself.
var numa = &Workload{
	Name:    "numa",
	Summary: "memory-bound threads reading a remote node's memory vs their own node's",
	Variants: map[string]string{
		Bad:  "threads on node 0 sweep a buffer bound (mbind) to a remote node",
		Good: "the same threads sweep a buffer bound to their local node; on a one-node host exits 3 saying why",
	},
	Size: &SizeParam{
		Meaning: "bytes of the buffer",
		Default: 256 << 20,
		Min:     4 << 10,
		Memory:  func(s int64) int64 { return s },
	},
	Op:      "one 8-byte word read and written",
	Threads: true,
	run:     runNUMA,
}

// needsNUMAError is ErrNeedsNUMA with the host's node count.
type needsNUMAError struct{ nodes int }

func (e *needsNUMAError) Error() string {
	return fmt.Sprintf("numa needs at least two NUMA nodes; this host has %d", e.nodes)
}

func (e *needsNUMAError) Is(target error) bool { return target == ErrNeedsNUMA }

const nodeDir = "/sys/devices/system/node"

// numaNodes lists node ids with their CPUs, from sysfs.
func numaNodes() (map[int][]int, error) {
	dirs, err := filepath.Glob(filepath.Join(nodeDir, "node[0-9]*"))
	if err != nil {
		return nil, err
	}
	nodes := map[int][]int{}
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("reading cpus of node %d: %w", id, err)
		}
		cpus, err := host.ParseCPUList(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("parsing cpus of node %d: %w", id, err)
		}
		nodes[id] = cpus
	}
	if len(nodes) == 0 {
		// No sysfs node directory: a kernel without NUMA is one node.
		nodes[0] = allowedCPUs()
	}
	return nodes, nil
}

// Memory policy constants from linux/mempolicy.h (not in x/sys/unix).
const (
	mpolBind      = 2
	mpolMFStrict  = 1 << 0
	mpolMFMove    = 1 << 1
	mpolFNode     = 1 << 0
	mpolFAddr     = 1 << 1
	numaMaskWords = 16 // nodemask of 1024 nodes
)

// mbind binds [b, b+len) to one node.
func mbind(b []byte, node int) error {
	var mask [numaMaskWords]uint64
	mask[node/64] |= 1 << (node % 64)
	_, _, errno := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		mpolBind, uintptr(unsafe.Pointer(&mask[0])), numaMaskWords*64+1, mpolMFStrict|mpolMFMove)
	if errno != 0 {
		return fmt.Errorf("binding buffer to node %d: %w", node, errno)
	}
	return nil
}

// pageNode asks the kernel which node backs the page at p.
func pageNode(p *byte) (int, error) {
	var node int32
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(p)), mpolFNode|mpolFAddr, 0)
	if errno != 0 {
		return -1, fmt.Errorf("asking the node of a page: %w", errno)
	}
	return int(node), nil
}

func runNUMA(e *env) (Result, error) {
	nodes, err := numaNodes()
	if err != nil {
		return Result{}, fmt.Errorf("reading numa nodes: %w", err)
	}
	if len(nodes) < 2 {
		return Result{}, &needsNUMAError{nodes: len(nodes)}
	}
	ids := make([]int, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	local := ids[0]
	memNode := local
	if e.cfg.Variant == Bad {
		memNode = ids[1]
	}
	cpus := nodes[local]
	if len(cpus) == 0 {
		return Result{}, fmt.Errorf("node %d has no cpus", local)
	}
	// mmap, not make: the binding must be set before the first touch and
	// must cover whole pages that no other Go object shares.
	buf, err := unix.Mmap(-1, 0, int(e.cfg.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Result{}, fmt.Errorf("mapping %s buffer: %w", FormatSize(e.cfg.Size), err)
	}
	defer unix.Munmap(buf)
	if err := mbind(buf, memNode); err != nil {
		return Result{}, &hostErr{err}
	}
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&buf[0])), len(buf)/8)
	// First touch places the pages (on memNode, by the binding); it is
	// not part of the timed run.
	for j := range words {
		words[j] = uint64(j)
	}
	workers := min(e.cfg.Threads, len(words))
	ops := make([]uint64, workers)
	bad := make([]uint64, workers)
	e.begin()
	err = runWorkers(workers, workerOpts{name: e.threadName(), cpus: cpus}, func(id int) error {
		lo, hi := split(len(words), workers, id)
		w := words[lo:hi]
		var done uint64
		for pass := uint64(0); !e.stopBefore(int(pass)); pass++ {
			// Each pass adds 1 to every word and checks the sum
			// the previous pass left: sum(lo+j) + pass*len.
			var sum uint64
			for j := range w {
				sum += w[j]
				w[j]++
			}
			want := uint64(hi-lo)*uint64(lo) + uint64(hi-lo)*uint64(hi-lo-1)/2 + pass*uint64(hi-lo)
			if sum != want {
				bad[id]++
			}
			done += uint64(len(w))
			e.progress.add(id, uint64(len(w)))
		}
		ops[id] = done
		return nil
	})
	e.ended()
	if err != nil {
		return Result{}, err
	}
	var total, wrong uint64
	for id := range ops {
		total += ops[id]
		wrong += bad[id]
	}
	got, err := pageNode(&buf[0])
	if err != nil {
		return Result{}, err
	}
	return Result{
		Ops:          total,
		BytesTouched: total * 16,
		Check:        checkf(wrong == 0 && got == memNode, "wrong_sums=%d cpus_node=%d memory_node=%d (wanted %d)", wrong, local, got, memNode),
	}, nil
}

// hostErr marks a refusal by this host's kernel (mbind denied); it is
// ErrNeedsNUMA too, so the CLI exits 3.
type hostErr struct{ err error }

func (e *hostErr) Error() string        { return e.err.Error() }
func (e *hostErr) Unwrap() error        { return e.err }
func (e *hostErr) Is(target error) bool { return target == ErrNeedsNUMA }
