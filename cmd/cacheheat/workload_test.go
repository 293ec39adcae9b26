package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWorkloadListShowsAll(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"workload", "list"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, n := range []string{"falseshare", "align", "ffn", "kvcache", "rcu", "chase", "stream", "numa"} {
		if !strings.Contains(out.String(), "\n"+n+" ") {
			t.Errorf("list lacks %s:\n%s", n, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"workload", "list", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 8 {
		t.Fatalf("list --json: %v, %d rows", err, len(rows))
	}
}

func TestWorkloadRunJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"workload", "run", "ffn", "--variant", "good", "-t", "2", "-d", "200ms", "--size", "16KiB", "--json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Workload     string  `json:"workload"`
		Variant      string  `json:"variant"`
		Threads      int     `json:"threads"`
		DurationS    float64 `json:"duration_s"`
		Ops          uint64  `json:"ops"`
		OpsPerSec    float64 `json:"ops_per_sec"`
		NsPerOp      float64 `json:"ns_per_op"`
		BytesTouched uint64  `json:"bytes_touched"`
		Check        string  `json:"check"`
		OK           bool    `json:"ok"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if r.Workload != "ffn" || r.Variant != "good" || r.Threads != 2 || r.Ops == 0 || !r.OK || !strings.HasPrefix(r.Check, "ok(") {
		t.Errorf("result %+v", r)
	}
}

func TestWorkloadRunLine(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"workload", "run", "falseshare", "-t", "2", "-d", "200ms"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	line := out.String()
	for _, f := range []string{"falseshare bad threads=2 ", "duration_s=", "ops=", "ops_per_sec=", "ns_per_op=", "bytes_touched=", "check=ok(sum="} {
		if !strings.Contains(line, f) {
			t.Errorf("line %q lacks %q", line, f)
		}
	}
}

func TestWorkloadBadInput(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"workload", "run", "nosuch"}, exitUsage, "valid: falseshare, align"},
		{[]string{"workload", "run", "falseshare", "--variant", "fast"}, exitUsage, "valid: bad, good"},
		{[]string{"workload", "run", "falseshare", "-t", "0"}, exitUsage, "at least 1"},
		{[]string{"workload", "run", "falseshare", "-d", "soon"}, exitUsage, "duration"},
		{[]string{"workload", "run", "falseshare", "-d", "0s"}, exitUsage, "positive"},
		{[]string{"workload", "run", "align", "--size", "1TiB"}, exitUsage, "available"},
		{[]string{"workload", "run", "align", "--size", "lots"}, exitUsage, "64MiB"},
		{[]string{"workload", "run"}, exitUsage, "one workload name"},
		{[]string{"workload", "frobnicate"}, exitUsage, "list"},
		{[]string{"workload"}, exitUsage, "list"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errb.String(), c.code, c.msg)
		}
	}
}

func TestWorkloadNUMAOnOneNode(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"workload", "run", "numa", "-d", "100ms", "--size", "1MiB"}, &out, &errb)
	if code == exitOK {
		t.Skip("host has several NUMA nodes; the one-node refusal cannot be seen here")
	}
	if code != exitHost || !strings.Contains(errb.String(), "numa needs at least two NUMA nodes; this host has 1") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func TestWorkloadChaseOneLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"workload", "run", "chase", "-d", "100ms", "--size", "16KiB"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "ns_per_access=4KiB:") || !strings.Contains(lines[0], ",16KiB:") {
		t.Errorf("output %q, want one line with the staircase", out.String())
	}
}
