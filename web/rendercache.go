package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"time"
)

// Reading a recording and rendering its report costs several times the
// file's size in memory, so a server that rendered every request at once
// could be made to run out of memory by a few clients (ten concurrent
// /report requests of 44 MB recordings once took 1.55 GB). The
// renderCache bounds that with a memory budget shared by every read and
// render: each reserves what it may take (renderCost of the files it
// reads) before it starts, at most `limit` run at once (the CPU count by
// default: more would not finish sooner), and a request that cannot start
// within maxQueueWait is answered 503 with Retry-After. Concurrent
// requests for the same page share one render, and finished pages are
// kept, keyed by each file's identity (path, size, modification time), up
// to maxBytes in all, oldest dropped first.
type renderCache struct {
	maxBytes int64
	budget   *budget

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
const defaultCacheBytes = 128 << 20

// DefaultMemoryBudget is what concurrent reads and renders may take
// together: with the page cache and the runtime's own, serve stays under
// 1 GB.
const DefaultMemoryBudget = 640 << 20

// maxQueueWait is how long a request waits for room in the budget before
// it is answered 503.
const maxQueueWait = 60 * time.Second

// retryAfter is the Retry-After of that 503, in seconds.
const retryAfter = 10

// errBusy: the budget had no room for the request within maxQueueWait.
var errBusy = errors.New("the server is busy rendering other recordings (memory budget full)")

// renderCost is what reading and rendering recordings of these sizes may
// take. Reports and diffs are read as streams (no window kept): the model,
// the findings and the page come to about 4 times the file (a 44 MB
// file's report peaks at 181 MB, a diff of two at 449 MB), plus the
// runtime's fixed share.
func renderCost(sizes ...int64) int64 {
	n := int64(48 << 20)
	for _, s := range sizes {
		n += 5 * s
	}
	return n
}

func newRenderCache(limit int, maxBytes, budgetBytes int64) *renderCache {
	if limit <= 0 {
		limit = runtime.NumCPU()
	}
	return &renderCache{maxBytes: maxBytes, budget: newBudget(budgetBytes, limit), entries: map[string]*renderEntry{}}
}

// budget is a memory budget shared by renders, and a limit on how many
// run at once. A reservation larger than the whole budget waits for all
// of it: it runs alone.
type budget struct {
	mu      sync.Mutex
	free    int64
	total   int64
	running int
	limit   int
	wait    time.Duration // maxQueueWait; tests shorten it
	changed chan struct{} // closed and replaced at each release
}

func newBudget(total int64, limit int) *budget {
	return &budget{free: total, total: total, limit: limit, wait: maxQueueWait, changed: make(chan struct{})}
}

// acquire reserves n bytes (at most the whole budget), waiting for room
// until ctx ends or b.wait passes (errBusy).
func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.total)
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.free >= n && b.running < b.limit {
			b.free -= n
			b.running++
			b.mu.Unlock()
			return n, nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timer.C:
			return 0, errBusy
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.running--
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// fileKey is a file's identity for the cache: a rewritten recording has
// another size or modification time, so it is rendered afresh.
func fileKey(name string, fi fs.FileInfo) string {
	return fmt.Sprintf("%s\x00%d\x00%d", name, fi.Size(), fi.ModTime().UnixNano())
}

// limited runs f with cost bytes of the budget reserved.
func (c *renderCache) limited(ctx context.Context, cost int64, f func()) error {
	n, err := c.budget.acquire(ctx, cost)
	if err != nil {
		return err
	}
	defer c.budget.release(n)
	f()
	return nil
}

// get returns the page for key, rendering it (within the budget, cost
// bytes of it) unless it is cached or being rendered for another request.
// Failed renders are not cached.
func (c *renderCache) get(ctx context.Context, key string, cost int64, render func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		select {
		case <-e.done:
			return e.body, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &renderEntry{done: make(chan struct{})}
	c.entries[key] = e
	c.renders++
	c.mu.Unlock()

	if err := c.limited(ctx, cost, func() { e.body, e.err = render() }); err != nil {
		e.err = err
	}
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
