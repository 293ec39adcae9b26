package collector

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// perfCounter is one counting perf event on one CPU (pid=-1: every task on
// that CPU). The same code opens software and hardware events.
type perfCounter struct {
	fd  int
	cpu int
}

// counterValue is one read of a counting event.
type counterValue struct {
	Value, Enabled, Running uint64
}

// openCounter opens ev on cpu for counting, disabled until enable. Its
// read_format carries enabled/running times so that multiplexed hardware
// counters can be scaled. It joins leader's group (nil: a group of its
// own). A group is read in one system call (readGroup): reading a
// counter of another CPU costs an interrupt of that CPU, so one read per
// CPU instead of one per event is most of what a recorder of idle
// targets saves in a window.
func openCounter(ev Event, cpu int, leader *perfCounter) (*perfCounter, error) {
	attr := ev.Attr()
	attr.Bits |= unix.PerfBitDisabled
	attr.Read_format = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING | unix.PERF_FORMAT_GROUP
	group := -1
	if leader != nil {
		group = leader.fd
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, group, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening %s on cpu %d: %w", ev.Name, cpu, err)
	}
	return &perfCounter{fd: fd, cpu: cpu}, nil
}

// openSampler opens ev on cpu as a sampling event for a BPF perf_event
// program: every period events, or hz times a second when hz > 0.
func openSampler(ev Event, cpu int, hz int, period uint64) (*perfCounter, error) {
	attr := ev.Attr()
	attr.Bits |= unix.PerfBitDisabled
	attr.Read_format = 0
	if hz > 0 {
		attr.Bits |= unix.PerfBitFreq
		attr.Sample = uint64(hz)
	} else {
		attr.Sample = period
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening %s sampling on cpu %d: %w", ev.Name, cpu, err)
	}
	return &perfCounter{fd: fd, cpu: cpu}, nil
}

func (p *perfCounter) enable() error {
	if err := unix.IoctlSetInt(p.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enabling perf event on cpu %d: %w", p.cpu, err)
	}
	return nil
}

func (p *perfCounter) disable() error {
	if err := unix.IoctlSetInt(p.fd, unix.PERF_EVENT_IOC_DISABLE, 0); err != nil {
		return fmt.Errorf("disabling perf event on cpu %d: %w", p.cpu, err)
	}
	return nil
}

// read reads a counter that leads a group of its own.
func (p *perfCounter) read() (counterValue, error) {
	var v [1]counterValue
	if err := p.readGroup(v[:]); err != nil {
		return counterValue{}, err
	}
	return v[0], nil
}

// readGroup reads the counters of p's group, p first, then its members in
// the order they were opened: one value each of out, which must have
// room for them all. The group's enabled and running times are the
// leader's, and so every member's: members are software events, which
// are never multiplexed, or p alone.
func (p *perfCounter) readGroup(out []counterValue) error {
	b := make([]byte, 8*(3+len(out)))
	n, err := rawRead(p.fd, b) // a counter read does not block
	if err != nil {
		return fmt.Errorf("reading perf event on cpu %d: %w", p.cpu, err)
	}
	if n < 24 || binary.NativeEndian.Uint64(b) != uint64(len(out)) || n != 8*(3+len(out)) {
		return fmt.Errorf("reading perf event on cpu %d: %d bytes, want %d counters", p.cpu, n, len(out))
	}
	enabled, running := binary.NativeEndian.Uint64(b[8:]), binary.NativeEndian.Uint64(b[16:])
	for i := range out {
		out[i] = counterValue{Value: binary.NativeEndian.Uint64(b[24+8*i:]), Enabled: enabled, Running: running}
	}
	return nil
}

func (p *perfCounter) close() error {
	if p == nil || p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// scaled is the value extrapolated to the whole enabled time, as perf stat
// does for a multiplexed counter.
func (v counterValue) scaled() uint64 {
	if v.Running == 0 || v.Running >= v.Enabled {
		return v.Value
	}
	return uint64(float64(v.Value) * float64(v.Enabled) / float64(v.Running))
}
