package host

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/profile"
)

// cpuDirRE matches the per-CPU directories of /sys/devices/system/cpu.
var cpuDirRE = regexp.MustCompile(`^cpu[0-9]+$`)

// ReadTopology reads the CPU, NUMA and cache layout under
// root/sys/devices/system/{cpu,node}. A host without a node directory (a
// kernel without NUMA) gets one node 0 holding every online CPU; a host
// without cache directories (many VMs) gets no caches and L3 -1.
func ReadTopology(root string) (profile.Topology, error) {
	sysCPU := filepath.Join(root, "sys", "devices", "system", "cpu")
	online, err := onlineCPUs(sysCPU)
	if err != nil {
		return profile.Topology{}, err
	}
	if len(online) == 0 {
		return profile.Topology{}, fmt.Errorf("reading topology: no online CPUs under %s", sysCPU)
	}
	var topo profile.Topology
	if present, err := readCPUList(filepath.Join(sysCPU, "present")); err == nil {
		for _, c := range present {
			if !slices.Contains(online, c) {
				topo.OfflineCPUs = append(topo.OfflineCPUs, c)
			}
		}
	}

	caches := newCacheSet()
	for _, id := range online {
		dir := filepath.Join(sysCPU, fmt.Sprintf("cpu%d", id))
		cpu := profile.CPU{ID: id, L3: -1}
		if cpu.Package, err = readIntDefault(filepath.Join(dir, "topology", "physical_package_id"), 0); err != nil {
			return profile.Topology{}, err
		}
		if cpu.Core, err = readIntDefault(filepath.Join(dir, "topology", "core_id"), id); err != nil {
			return profile.Topology{}, err
		}
		cpu.Siblings, err = siblings(dir, id, online)
		if err != nil {
			return profile.Topology{}, err
		}
		if err := caches.addCPU(dir, id, online); err != nil {
			return profile.Topology{}, err
		}
		topo.CPUs = append(topo.CPUs, cpu)
	}
	topo.Caches = caches.list()
	for i := range topo.CPUs {
		for _, c := range topo.Caches {
			if c.Level == 3 && slices.Contains(c.SharedCPUs, topo.CPUs[i].ID) {
				topo.CPUs[i].L3 = c.ID
			}
		}
	}

	topo.Nodes, err = readNodes(filepath.Join(root, "sys", "devices", "system", "node"), online)
	if err != nil {
		return profile.Topology{}, err
	}
	for _, n := range topo.Nodes {
		for _, c := range n.CPUs {
			i := slices.IndexFunc(topo.CPUs, func(x profile.CPU) bool { return x.ID == c })
			topo.CPUs[i].Node = n.ID
		}
	}
	return topo, nil
}

// OnlineCPUs lists the online CPUs of the host at root.
func OnlineCPUs(root string) ([]int, error) {
	return onlineCPUs(filepath.Join(root, "sys", "devices", "system", "cpu"))
}

// onlineCPUs reads cpu/online; without it (very old kernels, odd
// containers) it lists cpuN directories and honours each cpuN/online.
func onlineCPUs(sysCPU string) ([]int, error) {
	cpus, err := readCPUList(filepath.Join(sysCPU, "online"))
	if err == nil {
		return cpus, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(sysCPU)
	if err != nil {
		return nil, fmt.Errorf("reading topology: %w", err)
	}
	for _, e := range entries {
		if !cpuDirRE.MatchString(e.Name()) {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu"))
		on, err := readIntDefault(filepath.Join(sysCPU, e.Name(), "online"), 1)
		if err != nil {
			return nil, err
		}
		if on == 1 {
			cpus = append(cpus, id)
		}
	}
	slices.Sort(cpus)
	return cpus, nil
}

// siblings reads the CPU's SMT siblings: core_cpus_list is the current
// name, thread_siblings_list the old one (both exist on current kernels).
func siblings(dir string, id int, online []int) ([]int, error) {
	for _, name := range []string{"core_cpus_list", "thread_siblings_list"} {
		list, err := readCPUList(filepath.Join(dir, "topology", name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return onlyOnline(list, online), nil
	}
	return []int{id}, nil
}

func onlyOnline(list, online []int) []int {
	out := make([]int, 0, len(list))
	for _, c := range list {
		if slices.Contains(online, c) {
			out = append(out, c)
		}
	}
	return out
}

// readNodes reads node/nodeN/cpulist for every node directory.
func readNodes(sysNode string, online []int) ([]profile.Node, error) {
	entries, err := os.ReadDir(sysNode)
	if errors.Is(err, os.ErrNotExist) {
		return []profile.Node{{ID: 0, CPUs: slices.Clone(online)}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading numa nodes: %w", err)
	}
	var nodes []profile.Node
	for _, e := range entries {
		idStr, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(idStr)
		if err != nil {
			continue // "node" files such as has_cpu are not nodes
		}
		cpus, err := readCPUList(filepath.Join(sysNode, e.Name(), "cpulist"))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, profile.Node{ID: id, CPUs: onlyOnline(cpus, online)})
	}
	if len(nodes) == 0 {
		return []profile.Node{{ID: 0, CPUs: slices.Clone(online)}}, nil
	}
	slices.SortFunc(nodes, func(a, b profile.Node) int { return a.ID - b.ID })
	return nodes, nil
}

// cacheSet collects distinct cache instances from every CPU's
// cache/index* directories. An instance is identified by level, type and
// id; kernels and VMs that omit id get ids numbered per level in order of
// first appearance, keyed by the CPUs sharing the cache.
type cacheSet struct {
	caches []profile.Cache
	nextID map[int]int // level -> next synthetic id
	hasID  map[int]bool
}

func newCacheSet() *cacheSet {
	return &cacheSet{nextID: map[int]int{}, hasID: map[int]bool{}}
}

func (s *cacheSet) addCPU(cpuDir string, cpu int, online []int) error {
	dirs, err := filepath.Glob(filepath.Join(cpuDir, "cache", "index*"))
	if err != nil {
		return fmt.Errorf("reading caches of cpu %d: %w", cpu, err)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		c, idKnown, err := readCache(d, online)
		if err != nil {
			return fmt.Errorf("reading caches of cpu %d: %w", cpu, err)
		}
		if !slices.Contains(c.SharedCPUs, cpu) {
			c.SharedCPUs = append(c.SharedCPUs, cpu)
			slices.Sort(c.SharedCPUs)
		}
		s.add(c, idKnown)
	}
	return nil
}

func (s *cacheSet) add(c profile.Cache, idKnown bool) {
	for _, have := range s.caches {
		if have.Level != c.Level || have.Type != c.Type {
			continue
		}
		if idKnown && have.ID == c.ID {
			return
		}
		if !idKnown && slices.Equal(have.SharedCPUs, c.SharedCPUs) {
			return
		}
	}
	if !idKnown {
		// Data and instruction caches of one core share a number, as the
		// kernel's ids do.
		c.ID = -1
		for _, have := range s.caches {
			if have.Level == c.Level && slices.Equal(have.SharedCPUs, c.SharedCPUs) {
				c.ID = have.ID
			}
		}
		if c.ID < 0 {
			c.ID = s.nextID[c.Level]
			s.nextID[c.Level]++
		}
	}
	s.caches = append(s.caches, c)
}

// list returns the caches sorted by level, type and id.
func (s *cacheSet) list() []profile.Cache {
	out := append([]profile.Cache{}, s.caches...) // [] rather than null in JSON
	slices.SortStableFunc(out, func(a, b profile.Cache) int {
		if a.Level != b.Level {
			return a.Level - b.Level
		}
		if a.Type != b.Type {
			return strings.Compare(a.Type, b.Type)
		}
		return a.ID - b.ID
	})
	return out
}

func readCache(dir string, online []int) (profile.Cache, bool, error) {
	var c profile.Cache
	var err error
	if c.Level, err = readInt(filepath.Join(dir, "level")); err != nil {
		return c, false, err
	}
	if c.Type, err = readString(filepath.Join(dir, "type")); err != nil {
		return c, false, err
	}
	if size, err := readString(filepath.Join(dir, "size")); err == nil {
		if c.SizeBytes, err = parseSize(size); err != nil {
			return c, false, fmt.Errorf("parsing %s: %w", filepath.Join(dir, "size"), err)
		}
	}
	if c.LineSize, err = readIntDefault(filepath.Join(dir, "coherency_line_size"), 0); err != nil {
		return c, false, err
	}
	if c.Ways, err = readIntDefault(filepath.Join(dir, "ways_of_associativity"), 0); err != nil {
		return c, false, err
	}
	shared, err := readCPUList(filepath.Join(dir, "shared_cpu_list"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, false, err
	}
	c.SharedCPUs = onlyOnline(shared, online)
	id, err := readIntDefault(filepath.Join(dir, "id"), -1)
	if err != nil {
		return c, false, err
	}
	c.ID = id
	return c, id >= 0, nil
}

// parseSize parses sysfs cache sizes such as "48K" or "32768K".
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mult, nil
}

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11"; empty
// means none).
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("parsing cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("parsing cpu list %q: %w", s, err)
			}
		}
		if b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("parsing cpu list %q: bad range %q", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList writes cpus in the kernel's list format, for people.
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		} else {
			fmt.Fprintf(&b, "%d", cpus[i])
		}
		i = j + 1
	}
	return b.String()
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading topology: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(path string) (int, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return n, nil
}

// readIntDefault reads an integer file, returning def when it does not
// exist (attributes vary across kernels and architectures).
func readIntDefault(path string, def int) (int, error) {
	n, err := readInt(path)
	if errors.Is(err, os.ErrNotExist) {
		return def, nil
	}
	return n, err
}

func readCPUList(path string) ([]int, error) {
	s, err := readString(path)
	if err != nil {
		return nil, err
	}
	list, err := ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}

// TopologyOrder sorts cpus so that what shares hardware sits together:
// by package, NUMA node, L3 domain and core, SMT siblings side by side.
// A matrix in this order shows each sharing level as a block on its
// diagonal. CPUs the topology does not list keep their id order, last.
func TopologyOrder(topo profile.Topology, cpus []int) []int {
	info := map[int]profile.CPU{}
	for _, c := range topo.CPUs {
		info[c.ID] = c
	}
	out := slices.Clone(cpus)
	slices.SortStableFunc(out, func(a, b int) int {
		ca, oka := info[a]
		cb, okb := info[b]
		if oka != okb {
			if oka {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(ca.Package, cb.Package), cmp.Compare(ca.Node, cb.Node),
			cmp.Compare(ca.L3, cb.L3), cmp.Compare(ca.Core, cb.Core), cmp.Compare(a, b))
	})
	return out
}
