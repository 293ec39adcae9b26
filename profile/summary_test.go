package profile_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	profile.SetSummarize(func(r *profile.Recording) profile.Summary { return model.FromRecording(r).Summary() })
}

// TestStreamedSummary: the model streamed from a file (v1 and v2,
// finished and cut short) summarizes the recording exactly as the model of
// the whole recording read into memory.
func TestStreamedSummary(t *testing.T) {
	for _, major := range []int{1, 2} {
		for _, finish := range []bool{true, false} {
			path := filepath.Join(t.TempDir(), fmt.Sprintf("r%d.rec", major))
			profile.WriteTestRecording(t, path, 4, finish, major)
			if !finish {
				path = profile.PartialFiles(path)[0]
			}
			rec, err := profile.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(m.Summary())
			want, _ := json.Marshal(model.FromRecording(rec).Summary())
			if string(got) != string(want) {
				t.Errorf("v%d finished %v: streamed summary\n%s\nwant\n%s", major, finish, got, want)
			}
			if m.Windows() != 4 || m.Truncated == finish {
				t.Errorf("v%d finished %v: %d windows, truncated %v", major, finish, m.Windows(), m.Truncated)
			}
		}
	}
}
