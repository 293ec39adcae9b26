// Package profile defines the cacheheat recording: its data model and its
// streaming, crash-safe file codec. It is the only package that knows the
// file format (docs/FORMAT.md documents it field by field).
package profile
