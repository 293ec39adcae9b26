package collector

import "github.com/cacheheat/cacheheat/profile"

// WindowSink receives a recording in memory as it is made, beside the
// file: the header once, before the first window, then every window right
// after it was written. The live view is one; nothing is read back from
// disk. Both calls run on the recorder's goroutine and must return
// quickly; the window must not be modified (the sink may keep it).
type WindowSink interface {
	Header(h profile.Header)
	Window(w *profile.Window, s Status)
}
