package compare

import "sort"

// UnmatchedPatterns returns the --metric patterns that select no metric of
// either recording, and the names that could have been selected, sorted,
// so that a typo is a usage error listing the valid names rather than a
// diff that compares nothing and passes.
func UnmatchedPatterns(base, new *Reduced, opts Options) (unmatched, names []string) {
	seen := map[string]bool{}
	for _, r := range []*Reduced{base, new} {
		for _, s := range r.Series {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	sort.Strings(names)
	for _, p := range opts.Metrics {
		re := compilePatterns([]string{p})
		hit := false
		for _, n := range names {
			if matchName(re, n) {
				hit = true
				break
			}
		}
		if !hit {
			unmatched = append(unmatched, p)
		}
	}
	return unmatched, names
}
