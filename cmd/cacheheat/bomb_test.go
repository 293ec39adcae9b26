package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdBombs: a valid recording (every checksum right) whose windows
// each carry an unknown section of zeros, compressed as many zstd frames
// end to end, is refused by every reader with exit 4 and the reason, in
// bounded memory. Two shapes: each window inflating to 60 MB (a 100 KB
// file), and each inflating to just under 1 MB, many windows (more than
// the recording's compressed size can explain, taken together). Before
// the budget, the first file drove each command past 1 GB.
func TestZstdBombs(t *testing.T) {
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		windows  int
		section  int
		wantText string
	}{
		{"60MB-windows", 12, 60 << 20, "inflates past"},
		{"1MB-windows", 150, 1000 << 10, "recordings compress about"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := filepath.Join(dir, c.name+"-base.rec")
			writeSynthN(t, base, 1, 1e6, 4000, "bench", c.windows)
			bomb := filepath.Join(dir, c.name+".rec")
			bombFile(t, base, bomb, c.section)
			fi, err := os.Stat(bomb)
			must(t, err)
			t.Logf("%s: %d KB", c.name, fi.Size()>>10)
			html := filepath.Join(dir, c.name+".html")
			for _, args := range [][]string{
				{"inspect", bomb},
				{"inspect", "--json", bomb},
				{"analyze", bomb},
				{"report", bomb, "-o", html},
				{"export", bomb, "--folded"},
				{"diff", base, bomb},
			} {
				cmd := exec.Command(bin, args...)
				var errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = io.Discard, &errb
				err := cmd.Run()
				code := exitStatus(err)
				rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss >> 10 // MB
				if code != exitFormat || !strings.Contains(errb.String(), c.wantText) {
					t.Errorf("%s: exit %d, %q; want exit %d saying %q", strings.Join(args, " "), code, errb.String(), exitFormat, c.wantText)
				}
				if rss > 512 {
					t.Errorf("%s: peak RSS %d MB, want at most 512 MB", strings.Join(args, " "), rss)
				}
			}
		})
	}
}

// bombFile copies the recording at src to dst with an unknown section of
// size zero bytes added to every window, compressed as concatenated
// frames of 1 MB.
func bombFile(t *testing.T, src, dst string, size int) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	dec, err := zstd.NewReader(nil)
	must(t, err)
	defer dec.Close()
	enc, err := zstd.NewWriter(nil)
	must(t, err)
	var out bytes.Buffer
	out.Write(b[:12]) // magic and version
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	write := func(kind byte, payload []byte) {
		out.WriteByte(kind)
		binary.Write(&out, binary.LittleEndian, uint32(len(payload)))
		binary.Write(&out, binary.LittleEndian, crc32.Update(crc32.Checksum([]byte{kind}, castagnoli), castagnoli, payload))
		out.Write(payload)
	}
	for rest := b[12:]; len(rest) >= 9; {
		kind, n := rest[0], binary.LittleEndian.Uint32(rest[1:])
		payload := rest[9 : 9+n]
		rest = rest[9+n:]
		if kind != 'W' {
			write(kind, payload)
			continue
		}
		raw, err := dec.DecodeAll(payload, nil)
		must(t, err)
		if raw[len(raw)-1] != 0 {
			t.Fatal("window does not end with its end-of-sections byte")
		}
		raw = binary.AppendUvarint(raw[:len(raw)-1], 99) // a tag nobody knows
		raw = binary.AppendUvarint(raw, uint64(size))
		raw = append(raw, make([]byte, size)...)
		raw = append(raw, 0)
		var frames []byte
		for len(raw) > 0 {
			chunk := raw[:min(len(raw), 1<<20)]
			raw = raw[len(chunk):]
			frames = enc.EncodeAll(chunk, frames)
		}
		write(kind, frames)
	}
	must(t, os.WriteFile(dst, out.Bytes(), 0o644))
}
