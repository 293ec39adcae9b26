package model

import (
	"strings"

	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// Why a sample is left unnamed: its innermost frame (the user stack's, or
// the kernel's when it has no user stack) names no function.
const (
	UnnamedExited = "exited before its mappings were known (or the address is in no mapping)"
	UnnamedJIT    = "JIT or anonymous code without a perf map (/tmp/perf-PID.map)"
	UnnamedNoSyms = "no symbols in the file (stripped, no debug file)"
	UnnamedKernel = "kernel symbols hidden (kptr_restrict, or not root)"
	UnnamedRaw    = "not symbolized by the recorder"
	UnnamedNone   = "no stack"
)

// unnamedReason says why a sample with these frames is unnamed, "" when
// its innermost frame names a function.
func unnamedReason(user, kernel []profile.Frame) string {
	frames, isKernel := user, false
	if len(frames) == 0 {
		frames, isKernel = kernel, true
	}
	if len(frames) == 0 {
		return UnnamedNone
	}
	f := frames[0]
	switch {
	case f.Function != "":
		return ""
	case isKernel:
		return UnnamedKernel
	case f.Module == symbolize.ModuleUnknown:
		return UnnamedExited
	case f.Module == symbolize.ModuleAnon || strings.HasPrefix(f.Module, "[anon:"):
		return UnnamedJIT
	case f.Module == "":
		return UnnamedRaw
	}
	return UnnamedNoSyms
}

// unnamed counts a sample of pid left unnamed.
func (b *Builder) unnamed(a *Samples, s profile.Sample) {
	p := StackPair{s.UserStack, s.KernelStack}
	reason, ok := b.unnamedOf[p]
	if !ok {
		var user, kernel []profile.Frame
		if s.UserStack != 0 {
			user = b.m.Stacks[s.UserStack].Frames
		}
		if s.KernelStack != 0 {
			kernel = b.m.Stacks[s.KernelStack].Frames
		}
		reason = unnamedReason(user, kernel)
		b.unnamedOf[p] = reason
	}
	if reason == "" {
		return
	}
	if a.Unnamed == nil {
		a.Unnamed = map[int]map[string]uint64{}
	}
	if a.Unnamed[s.PID] == nil {
		a.Unnamed[s.PID] = map[string]uint64{}
	}
	a.Unnamed[s.PID][reason] += s.Count
}

// UnnamedSummary is what the event's samples left unnamed, and why.
func (s *Samples) UnnamedSummary(pid int) profile.UnnamedSummary {
	u := profile.UnnamedSummary{Reasons: map[string]uint64{}}
	total := s.Total
	if pid != 0 {
		total = s.ByPID[pid]
	}
	for p, rs := range s.Unnamed {
		if pid != 0 && p != pid {
			continue
		}
		for r, n := range rs {
			u.Samples += n
			u.Reasons[r] += n
		}
	}
	if total > 0 {
		u.Share = float64(u.Samples) / float64(total)
	}
	return u
}
