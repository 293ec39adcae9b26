package profile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the reader: it must never panic, and
// anything it rejects must be a format error (exit 4), while anything it
// accepts must satisfy CheckValid and summarize without panicking.
// The seed corpus is under testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.rec")
	w, err := Create(path, testHeader())
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		win := testWindow(i)
		if err := w.WriteWindow(&win); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(Trailer{EndReason: EndDuration}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, false)
	f.Add(seed, true)
	f.Add(seed[:len(seed)/2], false)
	f.Add([]byte(magic), false)
	// With fix set, every record's checksum is recomputed before reading,
	// so mutations reach the JSON decoding and CheckValid instead of
	// stopping at the checksum.
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixChecksums(data)
		}
		rec, err := Read(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		if err := rec.CheckValid(); err != nil {
			t.Fatalf("accepted recording fails CheckValid: %v", err)
		}
		Summarize(rec)
	})
}

// fixChecksums returns a copy of data with each record's CRC recomputed.
func fixChecksums(data []byte) []byte {
	out := append([]byte(nil), data...)
	for o := 12; o+recHeadLen <= len(out); {
		n := int(binary.LittleEndian.Uint32(out[o+1:]))
		end := o + recHeadLen + n
		if n > maxPayloadLen || end > len(out) {
			break
		}
		crc := crc32.Update(crc32.Checksum(out[o:o+1], castagnoli), castagnoli, out[o+recHeadLen:end])
		binary.LittleEndian.PutUint32(out[o+5:], crc)
		o = end
	}
	return out
}
