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
// counters can be scaled.
func openCounter(ev Event, cpu int) (*perfCounter, error) {
	attr := ev.Attr()
	attr.Bits |= unix.PerfBitDisabled
	attr.Read_format = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
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

func (p *perfCounter) read() (counterValue, error) {
	var b [24]byte
	n, err := unix.Read(p.fd, b[:])
	if err != nil {
		return counterValue{}, fmt.Errorf("reading perf event on cpu %d: %w", p.cpu, err)
	}
	if n != len(b) {
		return counterValue{}, fmt.Errorf("reading perf event on cpu %d: short read of %d bytes", p.cpu, n)
	}
	return counterValue{
		Value:   binary.NativeEndian.Uint64(b[0:]),
		Enabled: binary.NativeEndian.Uint64(b[8:]),
		Running: binary.NativeEndian.Uint64(b[16:]),
	}, nil
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
