package probe

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// load measures how busy the measured CPUs were with other work while
// the probe ran: their busy time in /proc/stat, less the probe's own
// CPU time (getrusage), over their capacity.
type load struct {
	cpus  map[int]bool
	busy  float64 // seconds, measured CPUs, at start
	self  float64
	start time.Time
	ok    bool
}

func startLoad(cpus []int) *load {
	l := &load{cpus: map[int]bool{}, start: time.Now()}
	for _, c := range cpus {
		l.cpus[c] = true
	}
	var err error
	l.busy, err = busySeconds(l.cpus)
	l.self, l.ok = selfSeconds(), err == nil
	return l
}

func (l *load) stop() Noise {
	busy, err := busySeconds(l.cpus)
	if !l.ok || err != nil {
		return Noise{OtherBusy: -1, Warning: "other load unknown: /proc/stat could not be read"}
	}
	wall := time.Since(l.start).Seconds()
	other := (busy - l.busy) - (selfSeconds() - l.self)
	share := max(0, other/(wall*float64(len(l.cpus))))
	n := Noise{OtherBusy: share}
	if share > noisyShare {
		n.Warning = fmt.Sprintf("other tasks used %.0f%% of the measured CPUs' time while the probe ran: its numbers are slower and noisier than this machine's own (run it again on an idle host)", 100*share)
	}
	return n
}

// clockTick is USER_HZ, the unit of /proc/stat (100 on every Linux
// architecture cacheheat runs on).
const clockTick = 100

// busySeconds sums the non-idle time of cpus from /proc/stat.
func busySeconds(cpus map[int]bool) (float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(fields[0], "cpu"))
		if err != nil || !cpus[id] {
			continue
		}
		// user nice system idle iowait irq softirq steal: busy is all but
		// idle and iowait.
		for i, v := range fields[1:] {
			if i == 3 || i == 4 || i >= 8 {
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total / clockTick, sc.Err()
}

// selfSeconds is this process's CPU time so far.
func selfSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
