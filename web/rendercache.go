package web

import (
	"fmt"
	"io/fs"
	"runtime"
	"sync"
)

// Reading a recording and rendering its report costs several times the
// file's size in memory, so a server that rendered every request at once
// could be made to run out of memory by a few clients (ten concurrent
// /report requests of a 75 MB recording once peaked at 3.7 GB). The
// renderCache bounds that: at most `limit` reads or renders run at once
// (the CPU count by default: more would not finish sooner), concurrent
// requests for the same page share one render, and finished pages are
// kept, keyed by each file's identity (path, size, modification time), up
// to maxBytes in all, oldest dropped first.
type renderCache struct {
	sem      chan struct{}
	maxBytes int64

	mu      sync.Mutex
	entries map[string]*renderEntry
	order   []string // keys of finished entries, oldest first
	bytes   int64
	renders int // renders started, for tests
}

type renderEntry struct {
	done chan struct{}
	body []byte
	err  error
}

// defaultCacheBytes bounds the rendered pages kept.
const defaultCacheBytes = 256 << 20

func newRenderCache(limit int, maxBytes int64) *renderCache {
	if limit <= 0 {
		limit = runtime.NumCPU()
	}
	return &renderCache{sem: make(chan struct{}, limit), maxBytes: maxBytes, entries: map[string]*renderEntry{}}
}

// fileKey is a file's identity for the cache: a rewritten recording has
// another size or modification time, so it is rendered afresh.
func fileKey(name string, fi fs.FileInfo) string {
	return fmt.Sprintf("%s\x00%d\x00%d", name, fi.Size(), fi.ModTime().UnixNano())
}

// limited runs f while holding one of the limit's slots.
func (c *renderCache) limited(f func()) {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	f()
}

// get returns the page for key, rendering it (within the limit) unless it
// is cached or being rendered for another request. Failed renders are not
// cached.
func (c *renderCache) get(key string, render func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		<-e.done
		return e.body, e.err
	}
	e := &renderEntry{done: make(chan struct{})}
	c.entries[key] = e
	c.renders++
	c.mu.Unlock()

	c.limited(func() { e.body, e.err = render() })
	close(e.done)

	c.mu.Lock()
	defer c.mu.Unlock()
	if e.err != nil || int64(len(e.body)) > c.maxBytes {
		delete(c.entries, key)
		return e.body, e.err
	}
	c.order = append(c.order, key)
	c.bytes += int64(len(e.body))
	for c.bytes > c.maxBytes && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= int64(len(c.entries[old].body))
		delete(c.entries, old)
	}
	return e.body, e.err
}
