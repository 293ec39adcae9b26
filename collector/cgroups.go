package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// cgroupMapEntries is the kernel's cgroups map size in by-cgroup mode: the
// cgroups that had a task run since they were created, on the whole host.
// Updates beyond it are counted (SinkWindow.CgroupMapFull), never lost
// silently.
const cgroupMapEntries = 8192

// cgroupVal is one cgroup's cumulative values in a snapshot.
type cgroupVal = bpf.CacheheatCgroupVal

// snapshotCgroups reads the per-cgroup map and the count of updates it
// refused.
func (k *kernel) snapshotCgroups(s *snapshot) error {
	vals, err := k.batchCgroups()
	if err != nil {
		// Batch lookups need Linux 5.6; one entry at a time otherwise.
		if vals, err = k.iterateCgroups(); err != nil {
			return err
		}
	}
	s.cgroups = make(map[uint64]*cgroupVal, len(vals))
	for i := range vals {
		s.cgroups[vals[i].id] = &vals[i].val
	}
	var zero uint32
	var full []uint64
	if err := k.objs.CgroupFull.Lookup(&zero, &full); err != nil {
		return fmt.Errorf("reading the cgroup map's drop count: %w", err)
	}
	for _, n := range full {
		s.cgroupFull += n
	}
	return nil
}

type cgroupEntry struct {
	id  uint64
	val cgroupVal
}

// cgroupBatch is the entries read per batch syscall.
const cgroupBatch = 128

// batchCgroups reads the map a batch of entries per syscall.
func (k *kernel) batchCgroups() ([]cgroupEntry, error) {
	var cursor ebpf.MapBatchCursor
	keys := make([]uint64, cgroupBatch)
	vals := make([]cgroupVal, cgroupBatch)
	var out []cgroupEntry
	for {
		n, err := k.objs.Cgroups.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			out = append(out, cgroupEntry{keys[i], vals[i]})
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the cgroup map: %w", err)
		}
	}
}

func (k *kernel) iterateCgroups() ([]cgroupEntry, error) {
	var out []cgroupEntry
	var id uint64
	var v cgroupVal
	it := k.objs.Cgroups.Iterate()
	for it.Next(&id, &v) {
		out = append(out, cgroupEntry{id, v})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the cgroup map: %w", err)
	}
	return out, nil
}

// forgetCgroup deletes a removed cgroup's entry, so the map holds live
// cgroups only.
func (k *kernel) forgetCgroup(id uint64) error {
	if err := k.objs.Cgroups.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting cgroup %d from the cgroup map: %w", id, err)
	}
	return nil
}

// programStats reads every attached program's cumulative run time.
func (k *kernel) programStats() []ProgramStats {
	var out []ProgramStats
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"on_switch", k.objs.OnSwitch}, {"on_waking", k.objs.OnWaking},
		{"on_wakeup", k.objs.OnWakeup}, {"on_wakeup_new", k.objs.OnWakeupNew}, {"on_fork", k.objs.OnFork},
		{"on_exec", k.objs.OnExec}, {"on_exit", k.objs.OnExit},
		{"sample_clock", k.objs.SampleClock}, {"sample_miss", k.objs.SampleMiss},
	} {
		if p.prog == nil || k.unattached(p.prog) {
			continue
		}
		st, err := p.prog.Stats()
		if err != nil {
			continue // a kernel without program stats: the metric is absent
		}
		out = append(out, ProgramStats{Name: p.name, RunTime: st.Runtime, RunCount: st.RunCount})
	}
	return out
}

// cgroupNames maps cgroup ids to their paths below the cgroup v2 mount. The
// kernel names a cgroup by the inode number of its directory, so a walk of
// the mount finds every live one. The walk is redone when an id is unknown
// and every cgroupRewalk, to notice removed cgroups; a few hundred
// directories take about a millisecond.
type cgroupNames struct {
	mount    string
	paths    map[uint64]string
	lastWalk time.Time
}

const cgroupRewalk = 5 * time.Second

func newCgroupNames(mount string) *cgroupNames {
	return &cgroupNames{mount: mount, paths: map[uint64]string{}}
}

// walk reads every cgroup directory's id.
func (n *cgroupNames) walk() {
	n.lastWalk = time.Now()
	paths := map[uint64]string{}
	_ = filepath.WalkDir(n.mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // a cgroup removed during the walk
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		rel, err := filepath.Rel(n.mount, p)
		if err != nil {
			return nil
		}
		paths[st.Ino] = filepath.Clean("/" + rel)
		return nil
	})
	n.paths = paths
}

// resolve names ids, walking the mount again when one is unknown or the
// last walk is old. It returns the ids that name no live cgroup, with the
// path each had when it was last seen ("" if never).
func (n *cgroupNames) resolve(ids []uint64) (gone map[uint64]string) {
	walk := time.Since(n.lastWalk) >= cgroupRewalk
	for _, id := range ids {
		if _, ok := n.paths[id]; !ok {
			walk = true
			break
		}
	}
	if !walk {
		return nil
	}
	old := n.paths
	n.walk()
	for _, id := range ids {
		if _, ok := n.paths[id]; !ok {
			if gone == nil {
				gone = map[uint64]string{}
			}
			gone[id] = old[id]
		}
	}
	return gone
}

// cgroupWindows computes each cgroup's deltas between two snapshots. A
// cgroup in prev that is missing from cur was deleted from the map because
// it was removed: it was reported then. A cgroup whose id names no live
// directory is reported once more, Removed, and deleted from the map.
func cgroupWindows(prev, cur *snapshot, names *cgroupNames, events []string, forget func(uint64) error) ([]CgroupWindow, error) {
	ids := make([]uint64, 0, len(cur.cgroups))
	for id := range cur.cgroups {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	gone := names.resolve(ids)
	var out []CgroupWindow
	for _, id := range ids {
		c := cur.cgroups[id]
		p := prev.cgroups[id]
		if p == nil {
			p = &cgroupVal{}
		}
		oldPath, removed := gone[id]
		w := CgroupWindow{ID: id, Path: names.paths[id], Removed: removed, Counts: map[string]uint64{}}
		if removed {
			w.Path = oldPath
		}
		changed := w.Removed
		for slot, name := range events {
			if d := delta(c.Counts[slot], p.Counts[slot]); d != 0 {
				w.Counts[name] = d
				changed = true
			}
		}
		w.Runq, w.RunqNS = histDelta(c.Runq[:], p.Runq[:]), delta(c.RunqNs, p.RunqNs)
		changed = changed || w.Runq != nil
		for r := range OffCPUReasons {
			w.OffCPU[r], w.OffCPUNS[r] = histDelta(c.Offcpu[r][:], p.Offcpu[r][:]), delta(c.OffcpuNs[r], p.OffcpuNs[r])
			changed = changed || w.OffCPU[r] != nil
		}
		if changed {
			out = append(out, w)
		}
		if w.Removed {
			if err := forget(id); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// histDelta is the bucket-wise delta of two cumulative histograms, trimmed
// of trailing zero buckets; nil when nothing changed.
func histDelta(cur, prev []uint64) []uint64 {
	b := make([]uint64, min(len(cur), profile.HistBuckets))
	last := 0
	for i := range b {
		b[i] = delta(cur[i], at(prev, i))
		if b[i] != 0 {
			last = i + 1
		}
	}
	if last == 0 {
		return nil
	}
	return b[:last]
}
