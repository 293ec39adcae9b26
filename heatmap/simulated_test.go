package heatmap

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/profile"
)

// TestSimulatedBanner: a report of a simulated-PMU recording opens with the
// red warning, one of a synthetic recording says synthetic, and a measured
// one has neither.
func TestSimulatedBanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*profile.Header)
		want string
	}{
		{"measured", func(*profile.Header) {}, ""},
		{"simulated", func(h *profile.Header) { h.PMU = &profile.PMU{Simulated: "intel-icx"} }, profile.SimulatedWarning + " (intel-icx)"},
		{"synthetic", func(h *profile.Header) { h.Synthetic = "made by a <test>" }, "SYNTHETIC RECORDING: made by a &lt;test&gt;"},
	} {
		rec := synth.Recording(synth.Default())
		tc.edit(&rec.Header)
		var b bytes.Buffer
		if err := Render(&b, rec, Options{NoFindings: true}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		i := strings.Index(page, `<p class="sim-banner" role="alert">`)
		switch {
		case tc.want == "" && i >= 0:
			t.Errorf("%s: a banner on a measured recording", tc.name)
		case tc.want != "" && (i < 0 || !strings.HasPrefix(page[i+len(`<p class="sim-banner" role="alert">`):], tc.want)):
			t.Errorf("%s: no banner %q", tc.name, tc.want)
		case tc.want != "" && i > strings.Index(page, `<header class="top">`):
			t.Errorf("%s: the banner is not above everything", tc.name)
		}
	}
}
