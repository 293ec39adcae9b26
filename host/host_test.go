package host

import "testing"

func TestDetectFixture(t *testing.T) {
	h, err := Detect(fixture("epyc-nps4"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Hostname != "epyc-nps4" || h.Kernel != "6.8.0-45-generic" || h.Vendor != "AuthenticAMD" ||
		h.Family != 25 || h.Model != 1 || h.CPUModel != "AMD EPYC 72F3 8-Core Processor" {
		t.Errorf("host %+v", h)
	}
	if len(h.Topology.CPUs) != 32 || len(h.Topology.Nodes) != 8 {
		t.Errorf("topology: %d CPUs, %d nodes; want 32, 8", len(h.Topology.CPUs), len(h.Topology.Nodes))
	}
}
