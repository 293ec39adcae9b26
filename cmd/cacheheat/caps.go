package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "caps", summary: "what this host can measure, and why not (--json for scripts)", run: runCaps})
}

// runCaps reports the host's capabilities. It exits 0 in software mode
// too: reporting what is missing is its job, not a failure.
func runCaps(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "[--json]", `  cacheheat caps
  sudo cacheheat caps --json | jq '.events[] | select(.status != "measured")'
`, stdout)
	asJSON := fs.Bool("json", false, "print the capabilities as JSON (snake_case names, stable for scripts)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("caps: takes no arguments, got %q; run 'cacheheat caps --help'", fs.Args())
	}
	if _, err := collector.LiveCPU(); errors.Is(err, collector.ErrUnknownPMU) {
		return usageErrorf("caps: %v", err)
	}
	c := collector.DetectCaps("/")
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	writeCaps(stdout, c)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeCaps prints caps in sections, the verdict last so it is the line an
// SRE sees at the bottom of the terminal.
func writeCaps(w io.Writer, c collector.Caps) {
	row := func(k, format string, args ...any) {
		fmt.Fprintf(w, "  %-20s %s\n", k, fmt.Sprintf(format, args...))
	}
	writeCapsKernel(w, row, c)
	writeCapsCPU(w, row, c)
	fmt.Fprintln(w, "\nTopology")
	writeTopology(row, c.Topology)
	writeCapsEvents(w, c)
	if len(c.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings")
		for _, warn := range c.Warnings {
			fmt.Fprintf(w, "  %s\n", warn)
		}
	}
	fmt.Fprintln(w, "\nVerdict")
	fmt.Fprintf(w, "  %s\n", c.Verdict)
}

// writeCapsKernel prints the kernel, privileges and BPF sections.
func writeCapsKernel(w io.Writer, row rowFunc, c collector.Caps) {
	fmt.Fprintln(w, "Kernel & privileges")
	row("host", "%s", c.Hostname)
	row("kernel", "%s", c.Kernel)
	if c.BTF {
		row("BTF", "yes (/sys/kernel/btf/vmlinux)")
	} else {
		row("BTF", "no: /sys/kernel/btf/vmlinux is missing; the BPF programs need a kernel built with CONFIG_DEBUG_INFO_BTF")
	}
	row("root", "%s", yesNo(c.Root))
	row("CAP_BPF", "%s", yesNo(c.CapBPF))
	row("CAP_PERFMON", "%s", yesNo(c.CapPerfmon))
	row("CAP_SYS_ADMIN", "%s", yesNo(c.CapSysAdmin))
	row("perf_event_paranoid", "%s", paranoidText(c))
	row("lockdown", "%s", lockdownText(c.Lockdown))

	fmt.Fprintln(w, "\nBPF")
	if c.BPFLoad.OK {
		row("program load", "ok (cacheheat's own BPF object was loaded and unloaded; nothing attached)")
	} else {
		row("program load", "FAILED: %s", c.BPFLoad.Error)
	}
}

// writeCapsCPU prints the CPU model and the PMUs.
func writeCapsCPU(w io.Writer, row rowFunc, c collector.Caps) {
	fmt.Fprintln(w, "\nCPU")
	row("model", "%s", c.CPU.ModelName)
	row("vendor", "%s, family %d (%#x), model %d (%#x), stepping %d", c.CPU.Vendor, c.CPU.Family, c.CPU.Family, c.CPU.Model, c.CPU.Model, c.CPU.Stepping)
	pmus := strings.Join(c.PMUs, ", ")
	if c.Mode != collector.ModeHardware || c.PMU != nil {
		pmus += " (no core PMU among them)"
	}
	row("perf PMUs", "%s", pmus)
	if c.PMU != nil {
		row("PMU", "%s: %s, %d general counters, fixed %s; every hardware event opens a software stand-in (docs/EVENTS.md)",
			profile.SimulatedWarning, c.PMU.Simulated, c.PMU.Counters, orNone(strings.Join(c.PMU.Fixed, ", ")))
		row("multiplexing", "%s", c.Multiplexing)
	}
}

// writeCapsEvents prints each event's status and why, then the raw
// encodings the catalogue uses on this CPU.
func writeCapsEvents(w io.Writer, c collector.Caps) {
	fmt.Fprintln(w, "\nEvents")
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  EVENT\tKIND\tSTATUS\tREASON\n")
	for _, e := range c.Events {
		reason := e.Reason
		if e.Errno != "" {
			reason = e.Errno + ": " + reason
		}
		if e.Simulated && e.Status == profile.StatusMeasured {
			reason = "SIMULATED by " + e.StandIn
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Name, e.Kind, e.Status, reason)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(tb.String(), "\n") {
		// tabwriter pads the last column too; measured events have no
		// reason, so drop the padding.
		fmt.Fprint(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n")))
	}
	var raw []string
	for _, e := range c.Catalogue {
		if e.Kind == collector.KindRaw && e.Missing == "" {
			raw = append(raw, fmt.Sprintf("  %s = r%x: %s", e.Name, e.Config, e.Source))
		}
	}
	if len(raw) > 0 {
		fmt.Fprintf(w, "  raw encodings for this CPU (docs/EVENTS.md):\n")
		for _, r := range raw {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
}

func paranoidText(c collector.Caps) string {
	if c.PerfEventParanoid == nil {
		return "unknown (/proc/sys/kernel/perf_event_paranoid unreadable)"
	}
	n := *c.PerfEventParanoid
	var meaning string
	switch {
	case n <= -1:
		meaning = "every user may use all events"
	case n == 0:
		meaning = "users may not use raw tracepoints"
	case n == 1:
		meaning = "users may not count CPU-wide"
	case n == 2:
		meaning = "users may count only their own user-space code"
	default:
		meaning = "users may not open perf events at all (distribution patch)"
	}
	s := fmt.Sprintf("%d: %s", n, meaning)
	if c.Root || c.CapPerfmon || c.CapSysAdmin {
		s += "; no limit for this process (CAP_PERFMON)"
	}
	return s
}

func lockdownText(mode string) string {
	switch mode {
	case "unknown":
		return "unknown (no /sys/kernel/security/lockdown: the lockdown LSM is not active or securityfs is not mounted)"
	case "none":
		return "none"
	case "integrity", "confidentiality":
		return mode + " (some BPF helpers, such as reading kernel memory, are refused)"
	}
	return mode
}

// maxListed caps the per-node and per-L3 lines on very large hosts; --json
// has them all.
const maxListed = 32

// rowFunc prints one "key  value" line of caps' text output.
type rowFunc func(k, format string, args ...any)

// writeTopology prints the layout the way the report groups it: packages,
// cores, NUMA nodes with their L3 domains, then every cache level.
func writeTopology(row rowFunc, t profile.Topology) {
	ids := make([]int, len(t.CPUs))
	for i, c := range t.CPUs {
		ids[i] = c.ID
	}
	row("online CPUs", "%s (%d)", host.FormatCPUList(ids), len(ids))
	if len(t.OfflineCPUs) > 0 {
		row("offline CPUs", "%s (present but offline: never counted)", host.FormatCPUList(t.OfflineCPUs))
	}
	row("packages", "%s", groupText(t, func(c profile.CPU) int { return c.Package }, "package"))
	writeCores(row, t)
	writeNodes(row, t)
	writeL3Domains(row, t)
	writeCaches(row, t)
}

// writeCores prints the number of cores and whether SMT is on.
func writeCores(row rowFunc, t profile.Topology) {
	cores := map[[2]int][]int{}
	for _, c := range t.CPUs {
		k := [2]int{c.Package, c.Core}
		cores[k] = append(cores[k], c.ID)
	}
	maxThreads := 0
	for _, g := range cores {
		maxThreads = max(maxThreads, len(g))
	}
	if maxThreads <= 1 {
		row("cores", "%d, one thread per core (SMT off or absent)", len(cores))
		return
	}
	example := ""
	for _, c := range t.CPUs {
		if len(c.Siblings) > 1 {
			example = host.FormatCPUList(c.Siblings)
			break
		}
	}
	row("cores", "%d, SMT on: up to %d threads per core (siblings such as %s)", len(cores), maxThreads, example)
}

// writeNodes prints each NUMA node with its CPUs, package and L3 domains.
func writeNodes(row rowFunc, t profile.Topology) {
	cpuByID := map[int]profile.CPU{}
	for _, c := range t.CPUs {
		cpuByID[c.ID] = c
	}
	row("NUMA nodes", "%d", len(t.Nodes))
	for i, n := range t.Nodes {
		if i == maxListed {
			row("", "... and %d more nodes (see caps --json)", len(t.Nodes)-maxListed)
			break
		}
		pkgs, l3s := map[int]bool{}, map[int]bool{}
		for _, id := range n.CPUs {
			pkgs[cpuByID[id].Package] = true
			if l3 := cpuByID[id].L3; l3 >= 0 {
				l3s[l3] = true
			}
		}
		desc := "CPUs " + cpuListOrNone(n.CPUs)
		if len(n.CPUs) > 0 {
			desc += "; package " + host.FormatCPUList(keys(pkgs))
		}
		if len(l3s) > 0 {
			desc += "; L3 domains " + host.FormatCPUList(keys(l3s))
		}
		row(fmt.Sprintf("  node %d", n.ID), "%s", desc)
	}
}

// writeL3Domains prints the L3 domains, how many each package has, and
// the CPUs of each.
func writeL3Domains(row rowFunc, t profile.Topology) {
	l3 := map[int][]int{}
	perPkg := map[int]map[int]bool{}
	for _, c := range t.CPUs {
		if c.L3 < 0 {
			continue
		}
		l3[c.L3] = append(l3[c.L3], c.ID)
		if perPkg[c.Package] == nil {
			perPkg[c.Package] = map[int]bool{}
		}
		perPkg[c.Package][c.L3] = true
	}
	if len(l3) == 0 {
		row("L3 domains", "none reported")
		return
	}
	counts := map[int]bool{}
	for _, m := range perPkg {
		counts[len(m)] = true
	}
	row("L3 domains", "%d (per package: %s)", len(l3), joinInts(keys(counts), " or "))
	for i, id := range keys(l3) {
		if i == maxListed {
			row("", "... and %d more L3 domains (see caps --json)", len(l3)-maxListed)
			break
		}
		row(fmt.Sprintf("  L3 %d", id), "CPUs %s", host.FormatCPUList(l3[id]))
	}
}

// writeCaches prints one line per cache level and type.
func writeCaches(row rowFunc, t profile.Topology) {
	if len(t.Caches) == 0 {
		row("caches", "none exposed (no cpu*/cache in sysfs, common in VMs)")
		return
	}
	type kind struct {
		level int
		typ   string
	}
	var order []kind
	byKind := map[kind][]profile.Cache{}
	for _, c := range t.Caches {
		k := kind{c.Level, c.Type}
		if _, ok := byKind[k]; !ok {
			order = append(order, k)
		}
		byKind[k] = append(byKind[k], c)
	}
	row("caches", "%d levels", order[len(order)-1].level)
	for _, k := range order {
		cs := byKind[k]
		c := cs[0]
		desc := fmt.Sprintf("%s, %d-byte lines", metric.FormatBytes(c.SizeBytes), c.LineSize)
		if c.Ways > 0 {
			desc += fmt.Sprintf(", %d-way", c.Ways)
		}
		desc += fmt.Sprintf(", %d instances of %s CPUs", len(cs), sharedCounts(cs))
		if c.Source == "cpuid" {
			desc += " (from CPUID: sysfs has no cache info)"
		}
		row(fmt.Sprintf("  L%d %s", k.level, strings.ToLower(k.typ)), "%s", desc)
	}
}

func keys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func joinInts(ns []int, sep string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, sep)
}

// groupText lists the CPUs of each group ("package 0: 0-3,8-11; ...").
func groupText(t profile.Topology, key func(profile.CPU) int, name string) string {
	groups := map[int][]int{}
	for _, c := range t.CPUs {
		groups[key(c)] = append(groups[key(c)], c.ID)
	}
	keys := make([]int, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d: %s", name, k, host.FormatCPUList(groups[k]))
	}
	return fmt.Sprintf("%d: %s", len(keys), strings.Join(parts, "; "))
}

func sharedCounts(cs []profile.Cache) string {
	seen := map[int]bool{}
	for _, c := range cs {
		seen[len(c.SharedCPUs)] = true
	}
	return joinInts(keys(seen), " or ")
}

func cpuListOrNone(cpus []int) string {
	if len(cpus) == 0 {
		return "no CPUs"
	}
	return host.FormatCPUList(cpus)
}
