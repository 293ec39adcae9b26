// Command modelreport streams a recording into its derived model and
// writes the HTML report without findings, for bench/model.sh: what
// `report` costs apart from attribution.
//
//	modelreport FILE OUT.html
package main

import (
	"fmt"
	"os"

	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/model"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: modelreport FILE OUT.html")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "modelreport:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	m, err := model.ReadFile(in)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := heatmap.RenderModel(f, m, nil, heatmap.Options{NoFindings: true}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
