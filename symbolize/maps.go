package symbolize

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// mapping is one executable mapping of a process.
type mapping struct {
	start, end, pgoff uint64
	dev               string // "fd:01", from /proc/PID/maps
	inode             uint64
	// module is the mapped path, or the kernel's name for a special
	// mapping ("[vdso]", "[vsyscall]"), or "[anon]".
	module string
	obj    *object // nil: nothing to index (anonymous, special, unreadable)
}

func (m *mapping) sameAs(o *mapping) bool {
	return m.start == o.start && m.end == o.end && m.pgoff == o.pgoff &&
		m.dev == o.dev && m.inode == o.inode && m.module == o.module
}

// isFile reports whether the mapping is backed by a file on disk.
func (m *mapping) isFile() bool {
	return m.inode != 0 && strings.HasPrefix(m.module, "/")
}

// parseMaps returns the executable mappings listed in a /proc/PID/maps
// text, in address order (the kernel lists them sorted).
func parseMaps(data []byte) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// start-end perms offset dev inode [path]; the path may contain
		// spaces, so it is everything after the fifth field.
		var fields [5]string
		rest := line
		for i := range fields {
			rest = strings.TrimLeft(rest, " ")
			j := strings.IndexByte(rest, ' ')
			if j < 0 {
				j = len(rest)
			}
			fields[i], rest = rest[:j], rest[j:]
		}
		if len(fields[1]) < 3 || fields[1][2] != 'x' {
			continue
		}
		startS, endS, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("parsing maps line %q: no address range", line)
		}
		start, err1 := strconv.ParseUint(startS, 16, 64)
		end, err2 := strconv.ParseUint(endS, 16, 64)
		pgoff, err3 := strconv.ParseUint(fields[2], 16, 64)
		inode, err4 := strconv.ParseUint(fields[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || end <= start {
			return nil, fmt.Errorf("parsing maps line %q: bad number", line)
		}
		module := strings.TrimLeft(rest, " ")
		if module == "" {
			module = "[anon]"
		}
		maps = append(maps, mapping{start: start, end: end, pgoff: pgoff, dev: fields[3], inode: inode, module: module})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading maps: %w", err)
	}
	return maps, nil
}
