package host

import (
	"testing"

	"github.com/cacheheat/cacheheat/internal/testfs"
)

func TestReadCPUInfo(t *testing.T) {
	for _, tc := range []struct {
		host string
		want CPUInfo
	}{
		{"vm2", CPUInfo{Vendor: "AuthenticAMD", ModelName: "AMD EPYC", Family: 26, Model: 2, Stepping: 1}},
		{"intel2s", CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", Family: 6, Model: 85, Stepping: 7}},
		{"epyc-nps4", CPUInfo{Vendor: "AuthenticAMD", ModelName: "AMD EPYC 72F3 8-Core Processor", Family: 25, Model: 1, Stepping: 1}},
		{"offline", CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Core(TM) i7-6700 CPU @ 3.40GHz", Family: 6, Model: 94, Stepping: 3}},
	} {
		got, err := ReadCPUInfo(fixture(tc.host))
		if err != nil {
			t.Errorf("%s: %v", tc.host, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.host, got, tc.want)
		}
	}
}

func TestReadCPUInfoErrors(t *testing.T) {
	if _, err := ReadCPUInfo(t.TempDir()); err == nil {
		t.Error("ReadCPUInfo of an empty root: no error")
	}
	dir := t.TempDir()
	testfs.WriteFile(t, dir, "proc/cpuinfo", "processor\t: 0\ncpu family\t: six\n")
	if _, err := ReadCPUInfo(dir); err == nil {
		t.Error("ReadCPUInfo with a non-numeric family: no error")
	}
}
