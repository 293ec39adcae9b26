package profile

// summarize is the inspect summary of a recording, which package model
// derives. model imports this package, so this package's tests reach it
// through summary_test.go (package profile_test), which sets it.
var summarize func(*Recording) Summary

// SetSummarize sets summarize.
func SetSummarize(f func(*Recording) Summary) { summarize = f }

// WriteTestRecording writes the tests' recording (testHeader, windows
// testWindow(0..windows-1), a trailer when finish) in format major.
var WriteTestRecording = writeTestRecordingVersion
