package attribution

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated rule section of docs/ATTRIBUTION.md")

const docPath = "../docs/ATTRIBUTION.md"

// TestDocsMatchTable keeps docs/ATTRIBUTION.md's rule section equal to the
// table it documents. Refresh it with 'go test ./attribution -update'.
func TestDocsMatchTable(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("reading the rule documentation: %v", err)
	}
	doc := string(b)
	i, j := strings.Index(doc, DocBegin), strings.Index(doc, DocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-section markers %q ... %q", docPath, DocBegin, DocEnd)
	}
	want := DocBegin + "\n" + RulesMarkdown() + DocEnd
	got := doc[i : j+len(DocEnd)]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(doc[:i]+want+doc[j+len(DocEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date with the rule table: run 'go test ./attribution -update'", docPath)
}
