package profile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes (v1 or v2) to the reader: it must never panic, and
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
	f.Add(bombSeed(f), false)
	// The v1 fixtures keep the JSON decoder covered.
	v1, _ := filepath.Glob("testdata/v1/*.rec")
	v20, _ := filepath.Glob("testdata/v2.0/*.rec") // the layout before minor version 1
	v1 = append(v1, v20...)
	for _, p := range v1 {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, true)
		}
	}
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
		summarize(rec)
	})
}

// bombSeed is a recording whose one window is 16 zstd frames of 1 MB of
// zeros end to end: a few hundred bytes that inflate to 16 MB.
func bombSeed(f testing.TB) []byte {
	var file bytes.Buffer
	file.WriteString(magic)
	binary.Write(&file, binary.LittleEndian, [2]uint16{FormatMajor, FormatMinor})
	h := testHeader()
	h.FormatVersion = FormatVersion()
	hj, err := json.Marshal(h)
	if err != nil {
		f.Fatal(err)
	}
	writeFramed(&file, recHeader, compress(hj))
	var frames []byte
	for range 16 {
		frames = append(frames, compress(make([]byte, 1<<20))...)
	}
	writeFramed(&file, recWindow, frames)
	return file.Bytes()
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

// FuzzReadV2 fuzzes the v2 window decoder itself: the two inputs are the
// uncompressed payloads of two windows (so the second can refer to what
// the first defined), compressed and framed by the test so that every
// mutation reaches the varint layout instead of failing zstd or the
// checksum. Seeds are real window payloads.
func FuzzReadV2(f *testing.F) {
	e := newEncoder2()
	var raw [][]byte
	for i := 0; i < 2; i++ {
		win := testWindow(i)
		win.Index = i
		if _, err := e.window(&win); err != nil {
			f.Fatal(err)
		}
		raw = append(raw, bytes.Clone(e.out))
	}
	f.Add(raw[0], raw[1])
	f.Add(raw[1], raw[0])
	f.Add(raw[0], []byte{})
	// Two windows with every field set (off-CPU rows, other processes,
	// idle times, containers, threads, functions): every section.
	_, wins, _ := everyField(f)
	e = newEncoder2()
	raw = raw[:0]
	for i := range wins {
		if _, err := e.window(&wins[i]); err != nil {
			f.Fatal(err)
		}
		raw = append(raw, bytes.Clone(e.out))
	}
	f.Add(raw[0], raw[1])
	f.Fuzz(func(t *testing.T, w0, w1 []byte) {
		var file bytes.Buffer
		file.WriteString(magic)
		binary.Write(&file, binary.LittleEndian, [2]uint16{FormatMajor, FormatMinor})
		h := testHeader()
		h.FormatVersion = fmt.Sprintf("%d.%d", FormatMajor, FormatMinor)
		hj, _ := json.Marshal(h)
		writeFramed(&file, recHeader, compress(hj))
		writeFramed(&file, recWindow, compress(w0))
		writeFramed(&file, recWindow, compress(w1))
		rec, err := Read(bytes.NewReader(file.Bytes()))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		if err := rec.CheckValid(); err != nil {
			t.Fatalf("accepted recording fails CheckValid: %v", err)
		}
		summarize(rec)
	})
}

// writeFramed appends one record with its checksum.
func writeFramed(b *bytes.Buffer, kind byte, payload []byte) {
	b.WriteByte(kind)
	binary.Write(b, binary.LittleEndian, uint32(len(payload)))
	binary.Write(b, binary.LittleEndian, crc32.Update(crc32.Checksum([]byte{kind}, castagnoli), castagnoli, payload))
	b.Write(payload)
}

// TestInflateBudget: the bomb seed is refused for what it is, wrapping
// ErrInflate and ErrFormat (exit 4), before its 16 MB are inflated.
func TestInflateBudget(t *testing.T) {
	_, err := Read(bytes.NewReader(bombSeed(t)))
	if !errors.Is(err, ErrInflate) || !errors.Is(err, ErrFormat) {
		t.Errorf("bomb: %v, want an error wrapping ErrInflate and ErrFormat", err)
	}
}
