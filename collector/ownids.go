package collector

import (
	"reflect"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/cacheheat/cacheheat/bpf"
)

// kernelIDs are the ids of the BPF objects one recording loaded, read from
// its own fds. Tests check that exactly these are gone after the recording:
// on a shared host other profilers load programs with the same names, so
// looking at every program on the host by name would blame them on us.
type kernelIDs struct {
	programs []ebpf.ProgramID
	maps     []ebpf.MapID
	links    []link.ID
}

// onKernelLoaded, when set (by tests), is called with the ids of the
// kernel objects once a recording (or caps' load check) has loaded them.
var onKernelLoaded func(kernelIDs)

// ids reads the ids of every program, map and link the kernel holds.
func (k *kernel) ids() kernelIDs {
	out := objIDs(&k.objs)
	for _, l := range k.links {
		if info, err := l.Info(); err == nil {
			out.links = append(out.links, info.ID)
		}
	}
	return out
}

// objIDs reads the ids of the loaded programs and maps of objs.
func objIDs(objs *bpf.CacheheatObjects) kernelIDs {
	var out kernelIDs
	for _, v := range []reflect.Value{reflect.ValueOf(objs.CacheheatPrograms), reflect.ValueOf(objs.CacheheatMaps)} {
		for i := range v.NumField() {
			switch o := v.Field(i).Interface().(type) {
			case *ebpf.Program:
				if o == nil {
					continue
				}
				if info, err := o.Info(); err == nil {
					if id, ok := info.ID(); ok {
						out.programs = append(out.programs, id)
					}
				}
			case *ebpf.Map:
				if o == nil {
					continue
				}
				if info, err := o.Info(); err == nil {
					if id, ok := info.ID(); ok {
						out.maps = append(out.maps, id)
					}
				}
			}
		}
	}
	return out
}
