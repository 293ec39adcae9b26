package attribution

import (
	"fmt"
	"os"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestDumpMetrics prints the metrics the software rules read, for the
// recording named by CACHEHEAT_DUMP: the numbers docs/ATTRIBUTION.md
// quotes come from it.
func TestDumpMetrics(t *testing.T) {
	path := os.Getenv("CACHEHEAT_DUMP")
	if path == "" {
		t.Skip("set CACHEHEAT_DUMP=FILE to print a recording's metrics")
	}
	rec, err := profile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(DumpMetrics(rec))
}
