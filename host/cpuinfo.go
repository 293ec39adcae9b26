package host

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUInfo identifies the processor model, which decides the raw encodings
// of vendor events such as l2-misses.
type CPUInfo struct {
	Vendor    string `json:"vendor"`     // vendor_id: "GenuineIntel", "AuthenticAMD", ...
	ModelName string `json:"model_name"` // "model name", e.g. "AMD EPYC 9654 96-Core Processor"
	Family    int    `json:"family"`     // "cpu family", decimal as /proc/cpuinfo prints it
	Model     int    `json:"model"`
	Stepping  int    `json:"stepping"`
	// Simulated names the simulated PMU fixture this identity comes from
	// (CACHEHEAT_SIMULATED_PMU); empty for the real CPU.
	Simulated string `json:"simulated,omitempty"`
}

// String names the model the way an SRE reads it off a spec sheet.
func (c CPUInfo) String() string {
	return fmt.Sprintf("%s (%s family %d model %d stepping %d)", c.ModelName, c.Vendor, c.Family, c.Model, c.Stepping)
}

// ReadCPUInfo parses root/proc/cpuinfo. Only the first processor's block is
// read: cacheheat assumes one CPU model per host (hybrid Intel parts list
// the same family/model for both core types).
func ReadCPUInfo(root string) (CPUInfo, error) {
	path := filepath.Join(root, "proc", "cpuinfo")
	f, err := os.Open(path)
	if err != nil {
		return CPUInfo{}, fmt.Errorf("reading cpu info: %w", err)
	}
	defer f.Close()
	return parseCPUInfo(f, path)
}

func parseCPUInfo(f *os.File, path string) (CPUInfo, error) {
	var c CPUInfo
	seen := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024) // flags lines are long
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break // end of the first processor's block
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		var err error
		switch key {
		case "processor":
			seen = true
		case "vendor_id":
			c.Vendor = val
		case "model name":
			c.ModelName = val
		case "cpu family":
			c.Family, err = strconv.Atoi(val)
		case "model":
			c.Model, err = strconv.Atoi(val)
		case "stepping":
			c.Stepping, err = strconv.Atoi(val)
		}
		if err != nil {
			return CPUInfo{}, fmt.Errorf("parsing %s: %q: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return CPUInfo{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if !seen {
		return CPUInfo{}, fmt.Errorf("parsing %s: no processor entry", path)
	}
	return c, nil
}
