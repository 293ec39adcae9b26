package heatmap

import (
	"github.com/cacheheat/cacheheat/profile"
)

// Banner is the red line at the top of every page made from a recording
// whose hardware counts are a simulated PMU's software stand-ins, or whose
// counts are synthetic: such numbers must never pass for measurements.
// Empty for a measured recording.
func Banner(hs ...*profile.Header) string {
	for _, h := range hs {
		switch {
		case h == nil:
		case h.Simulated():
			return profile.SimulatedWarning + " (" + h.PMU.Simulated + ")"
		case h.Synthetic != "":
			return "SYNTHETIC RECORDING: " + h.Synthetic
		}
	}
	return ""
}

// bannerCSS styles the banner; kept apart from page.css so the page's own
// styles can change freely.
const bannerCSS = `.sim-banner { background: #b00020; color: #fff; font-weight: bold; padding: 8px 12px; margin: 0; }`
