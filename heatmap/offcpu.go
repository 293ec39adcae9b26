package heatmap

import (
	"math"
	"sort"

	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// OffCPUView is the off-CPU section: where the target's threads were
// blocked, as a flame graph whose base frames are the reasons, beside the
// on-CPU flame graph of the samples.
type OffCPUView struct {
	// BlockedNS is every voluntary switch-out's blocked time; SampledNS
	// the part with stacks, scaled up to BlockedNS in the views.
	// ChosenNS is the part the program chose: idle threads waiting for
	// work, sleeps and polls (profile.Waiting).
	BlockedNS float64 `json:"blocked_ns"`
	SampledNS float64 `json:"sampled_ns"`
	ChosenNS  float64 `json:"chosen_ns"`
	// Waits is the kernel's account by wait (reason, system call and
	// descriptor), exact, longest first; Peers who woke the target out
	// of waits on other processes. Both empty in older recordings.
	Waits []profile.WaitTotal `json:"waits"`
	Peers []PeerRow           `json:"peers"`
	// Reasons is the blocked time by reason, largest first.
	Reasons []OffCPUReason `json:"reasons"`
	// Stacks are the top stacks (innermost frame first) in microseconds.
	Stacks []OffCPUStack `json:"stacks"`
	// Flame's values are microseconds; its first level is the reason.
	// Like Stacks it leaves out idle threads and sleeps.
	Flame FlameNode `json:"flame"`
}

// OffCPUReason is one reason's share of the blocked time.
type OffCPUReason struct {
	Reason string  `json:"reason"`
	NS     float64 `json:"ns"`
	Share  float64 `json:"share"`
}

// PeerRow is a process that woke the target out of a wait on it.
type PeerRow struct {
	WakerPID  int     `json:"waker_pid"`
	WakerComm string  `json:"waker_comm"`
	PID       int     `json:"pid"`
	Reason    string  `json:"reason"`
	Call      string  `json:"call"`
	NS        float64 `json:"ns"`
	Count     uint64  `json:"count"`
}

// maxWaitRows bounds the waits and peers tables.
const maxWaitRows = 20

// OffCPUStack is one top off-CPU stack.
type OffCPUStack struct {
	Reason string   `json:"reason"`
	NS     float64  `json:"ns"`
	Frames []string `json:"frames"`
}

// OffCPU builds the off-CPU section, nil when the recording has no
// off-CPU stacks.
func OffCPU(m *model.Model) *OffCPUView {
	rec := m.Light
	stacks := rec.OffCPUStacks()
	var v *OffCPUView
	for _, w := range rec.Windows {
		if w.OffCPU == nil {
			continue
		}
		if v == nil {
			v = &OffCPUView{Reasons: []OffCPUReason{}, Stacks: []OffCPUStack{}}
		}
		v.BlockedNS += float64(w.OffCPU.BlockedNS)
		v.SampledNS += float64(w.OffCPU.SampledNS)
	}
	if v == nil {
		return nil
	}
	v.Waits, v.Peers = rec.WaitTotals(maxWaitRows), peerRows(rec)
	byReason := map[string]float64{}
	var total float64
	// Time the kernel put in a wait reason for which no stack was taken
	// is shown under that reason, without stacks.
	for r, ns := range rec.OffCPUScaler().Unsampled() {
		byReason[r] += ns
		total += ns
	}
	root := &flameBuild{children: map[string]*flameBuild{}}
	for _, s := range stacks {
		byReason[s.Reason] += s.NS
		total += s.NS
		// Idle threads waiting for work and deliberate sleeps are counted
		// in Reasons but not drawn: they would dwarf where the program
		// really waits.
		if profile.Waiting(s.Reason) {
			continue
		}
		if len(v.Stacks) < topStacks {
			v.Stacks = append(v.Stacks, OffCPUStack{Reason: s.Reason, NS: s.NS, Frames: s.Frames})
		}
		us := uint64(math.Round(s.NS / 1e3))
		// The reason is the base frame; then outermost to innermost.
		path := append([]string{s.Reason}, reversed(s.Frames)...)
		n := root
		n.value += us
		for j, name := range path {
			if j > flameMaxDepth {
				break
			}
			c, ok := n.children[name]
			if !ok {
				c = &flameBuild{children: map[string]*flameBuild{}}
				n.children[name] = c
			}
			c.value += us
			n = c
		}
	}
	for r, ns := range byReason {
		v.Reasons = append(v.Reasons, OffCPUReason{Reason: r, NS: ns, Share: ns / total})
		if profile.Waiting(r) {
			v.ChosenNS += ns
		}
	}
	sort.Slice(v.Reasons, func(i, j int) bool {
		// Idle and sleep last: they are not drawn, and they are not
		// where the program waits.
		if ii, ij := profile.Waiting(v.Reasons[i].Reason), profile.Waiting(v.Reasons[j].Reason); ii != ij {
			return ij
		}
		if v.Reasons[i].NS != v.Reasons[j].NS {
			return v.Reasons[i].NS > v.Reasons[j].NS
		}
		return v.Reasons[i].Reason < v.Reasons[j].Reason
	})
	v.Flame = flameTree("all", root, uint64(math.Ceil(float64(root.value)*flameMinShare)))
	return v
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

// peerRows sums who woke the target, by waker, process and wait.
func peerRows(rec *profile.Recording) []PeerRow {
	type key struct {
		waker, pid         int
		comm, reason, call string
	}
	by := map[key]*PeerRow{}
	for _, w := range rec.Windows {
		for _, p := range w.Peers {
			k := key{p.WakerPID, p.PID, p.WakerComm, p.Reason, p.Call}
			r := by[k]
			if r == nil {
				r = &PeerRow{WakerPID: p.WakerPID, WakerComm: p.WakerComm, PID: p.PID, Reason: p.Reason, Call: p.Call}
				by[k] = r
			}
			r.NS += float64(p.NS)
			r.Count += p.Count
		}
	}
	out := make([]PeerRow, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NS != out[j].NS {
			return out[i].NS > out[j].NS
		}
		return out[i].WakerPID < out[j].WakerPID
	})
	if len(out) > maxWaitRows {
		out = out[:maxWaitRows]
	}
	return out
}
