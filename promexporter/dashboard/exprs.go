package dashboard

import "encoding/json"

// Exprs returns every PromQL expression of a dashboard's panels, in panel
// order, as written (with Grafana's variables): the integration test runs
// each one against a real Prometheus.
func Exprs(dashboardJSON []byte) []string {
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if json.Unmarshal(dashboardJSON, &d) != nil {
		return nil
	}
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			if t.Expr != "" {
				out = append(out, t.Expr)
			}
		}
	}
	return out
}
