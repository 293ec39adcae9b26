// Command gen writes cacheheat's Grafana dashboard (package dashboard) to
// a file: go generate ./promexporter/... refreshes deploy/grafana/cacheheat.json.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cacheheat/cacheheat/promexporter/dashboard"
)

func main() {
	out := flag.String("o", "cacheheat.json", "file to write")
	flag.Parse()
	b, err := dashboard.JSON()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}
