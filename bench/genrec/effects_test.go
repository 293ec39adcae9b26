package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// TestEffectsFireTheirRuleOnly checks, through the file, that every
// hardware rule fires on its own effect and no other hardware rule does,
// and that the healthy recording fires nothing at all.
func TestEffectsFireTheirRuleOnly(t *testing.T) {
	var hardware []string
	for _, r := range attribution.Rules() {
		if r.Hardware() {
			hardware = append(hardware, r.ID)
		}
	}
	if len(hardware) < 6 {
		t.Fatalf("only %d hardware rules (%v): the rule table changed, update the effects", len(hardware), hardware)
	}
	for _, name := range append([]string{"none"}, hardware...) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".rec")
			if err := writeEffect(path, name); err != nil {
				t.Fatalf("no effect for hardware rule %s: %v", name, err)
			}
			rec, err := profile.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Header.Synthetic == "" {
				t.Error("header does not say synthetic")
			}
			res := attribution.Analyze(model.FromRecording(rec))
			for _, ne := range res.NotEvaluated {
				if slices.Contains(hardware, ne.Rule) {
					t.Errorf("hardware rule %s not evaluated: %s", ne.Rule, ne.Reason)
				}
			}
			var fired, hwFired []string
			for _, f := range res.Findings {
				fired = append(fired, f.Rule)
				if slices.Contains(hardware, f.Rule) {
					hwFired = append(hwFired, f.Rule)
				}
			}
			if name == "none" {
				if len(fired) > 0 {
					t.Errorf("the healthy recording fired %v", fired)
				}
				return
			}
			if !slices.Equal(hwFired, []string{name}) {
				t.Errorf("hardware rules fired %v, want exactly [%s] (all findings: %v)", hwFired, name, fired)
			}
		})
	}
}

// TestSimulatedFindingsWarn: the same effect recorded on a simulated PMU
// gives its hardware finding the warning; measured, it carries none.
func TestSimulatedFindingsWarn(t *testing.T) {
	h, wins, err := effectRecording("false-sharing")
	if err != nil {
		t.Fatal(err)
	}
	rec := &profile.Recording{Header: h, Stacks: map[uint64]profile.Stack{}}
	for _, w := range wins {
		rec.Windows = append(rec.Windows, *w)
		for _, s := range w.NewStacks {
			rec.Stacks[s.ID] = s
		}
	}
	for _, simulated := range []bool{false, true} {
		rec.Header.PMU = nil
		if simulated {
			rec.Header.PMU = &profile.PMU{Simulated: "intel-icx"}
		}
		res := attribution.Analyze(model.FromRecording(rec))
		want := ""
		if simulated {
			want = profile.SimulatedWarning
		}
		if res.Warning != want {
			t.Errorf("simulated=%v: result warning %q, want %q", simulated, res.Warning, want)
		}
		if len(res.Findings) == 0 {
			t.Fatalf("simulated=%v: no finding", simulated)
		}
		for _, f := range res.Findings {
			if f.Rule == "false-sharing" && f.Warning != want {
				t.Errorf("simulated=%v: finding warning %q, want %q", simulated, f.Warning, want)
			}
		}
	}
}
