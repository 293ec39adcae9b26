package symbolize

import (
	"os"
	"strings"
	"syscall"

	"github.com/cacheheat/cacheheat/profile"
)

// Frames of a stack walked by frame pointers are the interrupted
// instruction, then return addresses read from the chain of saved frame
// pointers. Code built without frame pointers (most C and C++ at -O2)
// leaves garbage in that chain: a "return address" that is no address of
// code, or that follows no call instruction. Such a frame, and any after
// it, would name a wrong caller, so the stack is cut there and ends in a
// marker frame that says why. A stack as deep as the kernel walks ends in
// another marker: its outer frames are missing.

// Marker frames' function names (module "[unwind]").
const (
	ModuleUnwind = "[unwind]"
	// CutNoFramePointer ends a stack cut at a frame that is no return
	// address: the code below it keeps no frame pointer.
	CutNoFramePointer = "[truncated: no frame pointer]"
	// CutSignal ends a stack at a signal handler's frame: its return
	// address is the signal trampoline the kernel pushed, and the
	// interrupted code's frames lie beyond the signal frame, where frame
	// pointers do not lead.
	CutSignal = "[truncated: signal frame]"
	// CutDepth ends a stack as deep as the kernel walks.
	CutDepth = "[truncated: depth limit]"
)

// MaxStackDepth is the deepest stack the kernel walks for the recorder
// (PERF_MAX_STACK_DEPTH).
const MaxStackDepth = 127

// Marker returns a marker frame.
func Marker(name string) profile.Frame { return profile.Frame{Function: name, Module: ModuleUnwind} }

// injectedCall says whether fn is a function the Go runtime enters by a
// call it injects from a signal handler: asyncPreempt
// (runtime/signal_unix.go) and sigpanic0, which jumps to sigpanic
// (runtime/signal_amd64.go), both through sigctxt.pushCall.
func injectedCall(fn string) bool {
	switch fn {
	case "runtime.asyncPreempt", "runtime.sigpanic", "runtime.sigpanic0":
		return true
	}
	return false
}

// sigreturn says whether fn is a signal trampoline, the return address
// the kernel gives a signal handler: glibc's __restore_rt, Go's
// runtime.sigreturn__sigaction (runtime/sys_linux_amd64.s).
func sigreturn(fn string) bool {
	return fn == "__restore_rt" || fn == "runtime.sigreturn__sigaction"
}

// IsMarker says whether f is a marker frame.
func IsMarker(f profile.Frame) bool { return f.Module == ModuleUnwind }

// checkStack cuts frames (resolved from addrs, innermost first) at the
// first caller frame that cannot be a return address, and marks a stack
// cut by the depth limit.
func (s *Symbolizer) checkStack(p *process, addrs []uint64, frames []profile.Frame) []profile.Frame {
	for i := 1; i < len(addrs); i++ {
		if p == nil {
			break
		}
		m := find(p.maps, addrs[i])
		if m == nil {
			m = find(p.before, addrs[i])
		}
		if m == nil {
			// No executable mapping holds it: not code, so not a
			// return address.
			return append(frames[:i:i], Marker(CutNoFramePointer))
		}
		if !m.isFile() || m.obj == nil {
			continue // JIT or special code: nothing to check against
		}
		if strings.HasPrefix(frames[i].Function, "runtime.goexit") {
			// Go starts every goroutine with goexit's address plus one
			// as the return address of its first frame, as if goexit
			// had called it: the root of the stack, after no call.
			continue
		}
		if sigreturn(frames[i].Function) {
			return append(frames[:i:i], Marker(CutSignal))
		}
		if injectedCall(frames[i-1].Function) {
			// Go's signal handler makes the interrupted goroutine call
			// asyncPreempt (or sigpanic) by pushing the interrupted PC as
			// its return address: the true caller, after no call.
			continue
		}
		if call, ok := s.callBefore(m.obj, frames[i].Offset); ok && !call {
			return append(frames[:i:i], Marker(CutNoFramePointer))
		}
	}
	if len(addrs) >= MaxStackDepth {
		return append(frames, Marker(CutDepth))
	}
	return frames
}

// callBefore says whether the instruction that ends at file offset off of
// o is a call: what a return address always follows. ok is false when the
// file cannot be read, and nothing is cut then.
func (s *Symbolizer) callBefore(o *object, off uint64) (call, ok bool) {
	if o.calls == nil {
		o.calls = map[uint64]bool{}
	}
	if v, seen := o.calls[off]; seen {
		return v, true
	}
	if off < 2 {
		return false, true
	}
	f := s.reader(o)
	if f == nil {
		return false, false
	}
	start := off - min(off, 8)
	b := make([]byte, off-start)
	if n, err := f.ReadAt(b, int64(start)); n != len(b) {
		_ = err
		return false, false
	}
	v := endsInCall(b)
	o.calls[off] = v
	return v, true
}

// maxReaders bounds the files kept open to check return addresses.
const maxReaders = 64

// reader opens o's file again for reading, once, checking it is still
// the file that was mapped; nil when it cannot.
func (s *Symbolizer) reader(o *object) *os.File {
	if o.reader != nil || o.readerErr {
		return o.reader
	}
	o.readerErr = true
	if o.path == "" {
		return nil
	}
	f, err := os.Open(o.path)
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if err != nil || !ok || !fi.Mode().IsRegular() || (o.inode != 0 && st.Ino != o.inode) {
		f.Close()
		return nil
	}
	if len(s.readers) >= maxReaders {
		for _, r := range s.readers {
			r.reader.Close()
			r.reader, r.readerErr = nil, false
		}
		s.readers = s.readers[:0]
	}
	o.reader, o.readerErr = f, false
	s.readers = append(s.readers, o)
	return f
}

// endsInCall says whether b ends with an x86-64 call instruction: a
// direct call (E8 rel32) or an indirect one (FF /2, with its ModRM, SIB
// and displacement, after an optional REX prefix).
func endsInCall(b []byte) bool {
	n := len(b)
	if n >= 5 && b[n-5] == 0xE8 {
		return true
	}
	for k := 2; k <= min(n, 8); k++ {
		i := n - k
		if b[i] != 0xFF || i+1 >= n {
			continue
		}
		modrm := b[i+1]
		if (modrm>>3)&7 != 2 {
			continue
		}
		if l := callFFLen(b[i+1:]); l == k {
			return true
		}
	}
	return false
}

// callFFLen is the length of an FF /2 call from its opcode on, given the
// bytes from its ModRM on; 0 when they do not hold it.
func callFFLen(b []byte) int {
	modrm := b[0]
	mod, rm := modrm>>6, modrm&7
	l := 2
	if mod != 3 && rm == 4 {
		if len(b) < 2 {
			return 0
		}
		l++ // SIB
		if mod == 0 && b[1]&7 == 5 {
			l += 4
		}
	}
	switch {
	case mod == 0 && rm == 5:
		l += 4 // RIP-relative
	case mod == 1:
		l++
	case mod == 2:
		l += 4
	}
	return l
}
