package main

import (
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/profile"
)

// reportOptions fills the report's findings section once the attribution
// package provides findings; until then the section is absent.
func reportOptions(rec *profile.Recording) heatmap.Options {
	return heatmap.Options{}
}
