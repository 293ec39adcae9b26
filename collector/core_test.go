package collector

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/cacheheat/cacheheat/bpf"
)

// TestTaskStateBeforeLinux514 loads cacheheat's programs with CO-RE
// relocations resolved against this kernel's types as Linux before 5.14
// had them: task_struct's state field called `state`, not `__state`. The
// programs must relocate to it (the fallback in task_state) and load.
func TestTaskStateBeforeLinux514(t *testing.T) {
	needBPF(t)
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	old := kernel.Copy()
	typ, err := old.AnyTypeByName("task_struct")
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := typ.(*btf.Struct)
	if !ok {
		t.Fatalf("task_struct is a %T", typ)
	}
	renamed := false
	for i := range ts.Members {
		if ts.Members[i].Name == "__state" {
			ts.Members[i].Name = "state"
			renamed = true
		}
	}
	if !renamed {
		t.Fatal("this kernel's task_struct has no __state to rename")
	}
	for _, types := range []*btf.Spec{kernel, old} {
		spec, err := bpf.LoadCacheheat()
		if err != nil {
			t.Fatal(err)
		}
		var objs bpf.CacheheatObjects
		err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: types}})
		if err != nil {
			t.Fatalf("loading with task_struct.%s: %v", map[bool]string{true: "__state", false: "state"}[types == kernel], err)
		}
		objs.Close()
	}
}
