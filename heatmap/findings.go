package heatmap

// Findings is the findings section: root causes with their evidence, and
// the rules that could not be evaluated on this recording. It is nil (and
// the section absent) until the attribution package provides them.
type Findings struct {
	Items        []FindingView      `json:"items"`
	NotEvaluated []NotEvaluatedView `json:"not_evaluated"`
}

// FindingView is one finding as the page shows it. Metric names the
// heatmap metric its link selects; CPUs, Nodes and the time range are
// marked on the heatmap.
type FindingView struct {
	Rule          string         `json:"rule"`
	Title         string         `json:"title"`
	Severity      string         `json:"severity"`
	Confidence    float64        `json:"confidence"`
	CPUs          []int          `json:"cpus,omitempty"`
	Nodes         []int          `json:"nodes,omitempty"`
	PIDs          []int          `json:"pids,omitempty"`
	Functions     []string       `json:"functions,omitempty"`
	StartNS       int64          `json:"start_ns"`
	EndNS         int64          `json:"end_ns"`
	Metric        string         `json:"metric,omitempty"`
	Evidence      []EvidenceView `json:"evidence"`
	Advice        string         `json:"advice,omitempty"`
	Approximation string         `json:"approximation,omitempty"`
}

// EvidenceView is one number a finding rests on.
type EvidenceView struct {
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit,omitempty"`
}

// NotEvaluatedView is a rule that needs data this recording lacks.
type NotEvaluatedView struct {
	Rule   string   `json:"rule"`
	Title  string   `json:"title"`
	Needs  []string `json:"needs"`
	Reason string   `json:"reason"`
}
