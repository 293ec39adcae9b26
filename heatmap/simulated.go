package heatmap

import (
	"github.com/cacheheat/cacheheat/profile"
)

// Banner is the red line at the top of every page made from a recording
// whose hardware counts are a simulated PMU's software stand-ins, or whose
// counts are synthetic: such numbers must never pass for measurements.
// Empty for a measured recording.
func Banner(recs ...*profile.Recording) string {
	for _, rec := range recs {
		switch {
		case rec == nil:
		case rec.Header.Simulated():
			return profile.SimulatedWarning + " (" + rec.Header.PMU.Simulated + ")"
		case rec.Header.Synthetic != "":
			return "SYNTHETIC RECORDING: " + rec.Header.Synthetic
		}
	}
	return ""
}

// bannerCSS styles the banner; kept apart from page.css so the page's own
// styles can change freely.
const bannerCSS = `.sim-banner { background: #b00020; color: #fff; font-weight: bold; padding: 8px 12px; margin: 0; }`
