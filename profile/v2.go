package profile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Format v2 payloads (docs/FORMAT.md, "Version 2"). Every record's payload
// is one zstd frame, so a record decompresses alone. Header and trailer are
// JSON inside the frame: they are written once and are small. A window is a
// varint layout: first the definitions it adds to the file's tables
// (strings, string lists, frames, call-tree nodes, stacks and, since 2.1,
// processes and sample and off-CPU rows), then its body, which refers to
// table entries by index. Tables only grow, so the body of any window can
// be decoded once the definitions of it and every earlier window are read.

// maxRecordBytes caps a v2 record's decompressed size.
const maxRecordBytes = 64 << 20

// A zstd frame can inflate by a factor of thousands, and a record may hold
// many frames end to end, so what a record claims is never what memory is
// sized by. A recording's records inflate, all together, to at most
// inflateRatio times their compressed bytes plus inflateFloor; recordings
// compress 1.1x to 4x (BENCHMARKS.md), so only a zstd bomb or a damaged
// file gets near it. Each record stops inflating at its share of that
// (inflateLimit), frames counted across their concatenation, before more
// memory is taken.
const (
	inflateRatio = 16
	inflateFloor = 64 << 20
)

// ErrInflate marks a recording that inflates past its budget; it wraps
// ErrFormat.
var ErrInflate = &formatError{msg: "recording inflates past its decompression budget"}

// inflateLimit is the most a record of n compressed bytes may inflate to
// within a read-ahead batch: its own share, capped by maxRecordBytes.
func inflateLimit(n int) int { return min(maxRecordBytes, inflateRatio*n+1<<20) }

var (
	zstdEnc = sync.OnceValue(func() *zstd.Encoder {
		// The records carry a CRC-32C already: no second checksum.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err)) // only bad options fail
		}
		return e
	})
	// Streaming decoders, one per decoding goroutine: a stream stops
	// where the reader stops reading, which DecodeAll does only at a
	// frame's end.
	zstdDecs = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true),
			zstd.WithDecoderMaxWindow(maxRecordBytes), zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(fmt.Sprintf("zstd decoder: %v", err))
		}
		return d
	}}
)

func compress(raw []byte) []byte {
	if len(raw) < storeBelow {
		return storedFrame(raw)
	}
	return zstdEnc().EncodeAll(raw, nil)
}

// storeBelow is the payload size below which a record is stored in a zstd
// frame without compressing it: an idle window's few hundred bytes shrink
// by a hundred or so, and the encoder's tables for them cost ~40 us, a
// tenth of what a window of an idle recorder costs (BENCHMARKS.md).
const storeBelow = 1024

// storedFrame is raw in a zstd frame of one raw block (RFC 8878, 3.1.1):
// the magic number, a frame header descriptor of a single segment with a
// 4-byte content size, the size, and a raw block that is the last one.
// Any zstd decoder reads it; raw must be under a block's 128 KiB limit.
func storedFrame(raw []byte) []byte {
	b := make([]byte, 0, 4+1+4+3+len(raw))
	b = binary.LittleEndian.AppendUint32(b, 0xFD2FB528)
	b = append(b, 0b10_1_00000) // FCS field 4 bytes, single segment
	b = binary.LittleEndian.AppendUint32(b, uint32(len(raw)))
	h := uint32(len(raw))<<3 | 1 // raw block (type 0), last
	b = append(b, byte(h), byte(h>>8), byte(h>>16))
	return append(b, raw...)
}

// decompress inflates a record's frames, stopping with an error wrapping
// ErrInflate once they pass limit bytes.
func decompress(payload []byte, limit int) ([]byte, error) {
	d := zstdDecs.Get().(*zstd.Decoder)
	defer zstdDecs.Put(d)
	if err := d.Reset(bytes.NewReader(payload)); err != nil {
		return nil, fmt.Errorf("decompressing record: %w", err)
	}
	defer d.Reset(nil) // drop the reference to payload
	out := bytes.NewBuffer(make([]byte, 0, min(limit, 4*len(payload)+512)))
	n, err := out.ReadFrom(io.LimitReader(d, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing record: %w", err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: a record of %d bytes inflates past %d bytes", ErrInflate, len(payload), limit)
	}
	return out.Bytes(), nil
}

// windowFields are the Window fields the binary layout encodes. Any other
// exported field (one added to the model later) is carried as JSON in the
// window's extension, so it is never lost; giving it a binary encoding is
// an optimisation (docs/FORMAT.md, "Adding a field").
var windowFields = map[string]bool{
	"Index": true, "StartNS": true, "EndNS": true, "Counters": true, "Processes": true,
	"Histograms": true, "Samples": true, "NewStacks": true, "SampleRate": true,
	"Drops": true, "AppMetrics": true, "OffCPU": true, "IdleNS": true, "Others": true,
}

// extField is a Window field carried as JSON: its index and its JSON
// name, quoted.
type extField struct {
	index int
	name  []byte
}

// extFields are the Window fields carried as JSON, those known lacks, in
// the order of their JSON names (encoding/json's order for a map's keys).
func extFields(known map[string]bool) []extField {
	var out []extField
	t := reflect.TypeFor[Window]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || known[f.Name] {
			continue
		}
		name := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
			name = tag
		}
		q, _ := json.Marshal(name)
		out = append(out, extField{index: i, name: q})
	}
	slices.SortFunc(out, func(a, b extField) int { return bytes.Compare(a.name, b.name) })
	return out
}

// windowExtFields are extFields(windowFields), taken once: reading them
// by reflection at every window was a tenth of an idle recorder's time.
var windowExtFields = sync.OnceValue(func() []extField { return extFields(windowFields) })
