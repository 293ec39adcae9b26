package metric

import (
	"fmt"
	"strings"
)

// Markers around the generated part of docs/METRICS.md.
const (
	DocBegin = "<!-- metrics:begin (generated from metric.Catalogue by 'go test ./metric -update'; do not edit) -->"
	DocEnd   = "<!-- metrics:end -->"
)

// Markdown renders the catalogue as a Markdown table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| metric | formula | unit | worse when | source |\n|---|---|---|---|---|\n")
	for _, d := range catalogue {
		worse := "it rises"
		if d.HigherIsBetter {
			worse = "it falls"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", d.ID, d.Formula, d.Unit, worse, d.Source)
	}
	return b.String()
}
