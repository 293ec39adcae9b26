package heatmap

import (
	"github.com/cacheheat/cacheheat/model"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestOffCPUView: the flame graph's base frames are the reasons, largest
// first; idle threads and sleeps are counted but not drawn; stack times
// are scaled to the exact blocked time.
func TestOffCPUView(t *testing.T) {
	rec := &profile.Recording{Stacks: map[uint64]profile.Stack{
		1: {ID: 1, Frames: []profile.Frame{{Function: "sync.runtime_SemacquireRWMutexR"}, {Function: "main.read"}}},
		2: {ID: 2, Frames: []profile.Frame{{Function: "runtime.stopm"}}},
		3: {ID: 3, Frames: []profile.Frame{{Function: "time.Sleep"}, {Function: "main.write"}}},
		4: {ID: 4, Kernel: true, Frames: []profile.Frame{{Function: "futex_wait"}}},
	}}
	rec.Windows = []profile.Window{{OffCPU: &profile.OffCPU{
		BlockedNS: 20e9, SampledNS: 10e9, // every stack counts twice
		Stacks: []profile.OffCPUStack{
			{UserStack: 1, KernelStack: 4, NS: 1e9, Reason: profile.OffCPULock},
			{UserStack: 2, KernelStack: 4, NS: 6e9, Reason: profile.OffCPUIdle},
			{UserStack: 3, NS: 3e9, Reason: profile.OffCPUSleep},
		},
	}}}
	v := OffCPU(model.FromRecording(rec))
	if v == nil {
		t.Fatal("no off-CPU view")
	}
	if len(v.Flame.Children) != 1 || v.Flame.Children[0].Name != profile.OffCPULock || v.Flame.Value != 2e6 {
		t.Errorf("flame base %+v (value %d us), want only lock, 2 s", v.Flame.Children, v.Flame.Value)
	}
	if len(v.Stacks) != 1 || !strings.Contains(strings.Join(v.Stacks[0].Frames, ";"), "RWMutex") || v.Stacks[0].NS != 2e9 {
		t.Errorf("top stacks %+v, want the RWMutex wait at 2 s", v.Stacks)
	}
	var order []string
	for _, r := range v.Reasons {
		order = append(order, r.Reason)
	}
	if strings.Join(order, ",") != "lock,idle,sleep" || v.Reasons[1].NS != 12e9 {
		t.Errorf("reasons %+v, want lock first, then idle (12 s) and sleep", v.Reasons)
	}
}
